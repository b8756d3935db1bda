#include "sim/pipeline/inputs.hpp"

#include <cmath>
#include <filesystem>
#include <tuple>

#include "reference/error.hpp"
#include "reference/inputs.hpp"
#include "reference/npy.hpp"

namespace ringlab {

void require_finite(const Tensor<double>& tensor, const std::string& name) {
  for (int64_t i = 0; i < tensor.size(); ++i) {
    if (!std::isfinite(tensor[i])) {
      throw UsageError(name + " holds " + (std::isnan(tensor[i]) ? "NaN" : "Inf") + " at flat index " +
                       std::to_string(i) + "; inputs must be finite — fix the file that produced it");
    }
  }
}

AttentionDims input_dims(const AttentionInputs<double>& files, bool backward) {
  return dims_of(files.q.shape(), files.k.shape(), files.v.shape(), backward ? &files.dout.shape() : nullptr);
}

AttentionInputs<double> generate_inputs(const Problem& problem) {
  const RunConfig& config = problem.config;
  return make_inputs(config.dims, config.seed, config.backward).cast<double>();
}

std::optional<AttentionInputs<double>> read_input_files(const RunConfig& flags) {
  if (flags.in_dir.empty()) return std::nullopt;
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(flags.in_dir, error)) {
    throw UsageError("--in " + flags.in_dir +
                     " is not a readable directory; pass the directory holding q.npy k.npy v.npy");
  }
  auto read = [&](const char* name) {
    const std::string path = (fs::path(flags.in_dir) / name).string();
    if (!fs::exists(path, error)) {
      throw UsageError("--in " + flags.in_dir + " has no " + name + "; it needs q.npy k.npy v.npy" +
                       (flags.backward ? " dout.npy" : ""));
    }
    NpyArray array = read_npy(path);
    require_finite(array.values, path);
    return std::move(array.values);
  };
  AttentionInputs<double> inputs{read("q.npy"), read("k.npy"), read("v.npy"), {}};
  if (flags.backward) inputs.dout = read("dout.npy");
  const AttentionDims dims = input_dims(inputs, flags.backward);
  for (const std::string& flag : flags.sizes_given) {
    const auto [flag_value, file_value, file, what] =
        flag == "--batch"      ? std::tuple{flags.dims.batch, dims.batch, "q.npy", "batch rows"}
        : flag == "--seq"      ? std::tuple{flags.dims.seq, dims.seq, "q.npy", "tokens"}
        : flag == "--heads"    ? std::tuple{flags.dims.heads, dims.heads, "q.npy", "heads"}
        : flag == "--kv-heads" ? std::tuple{flags.dims.kv_heads, dims.kv_heads, "k.npy", "kv heads"}
        : flag == "--dim"      ? std::tuple{flags.dims.dim, dims.dim, "q.npy", "head dimension"}
                               : std::tuple{int64_t{0}, int64_t{0}, "", ""};
    if (flag_value != file_value) {
      throw UsageError(flag + " " + std::to_string(flag_value) + " contradicts --in " + flags.in_dir + "/" + file +
                       ", which has " + std::to_string(file_value) + " " + what + " (shape " +
                       shape_string(flag == "--kv-heads" ? inputs.k.shape() : inputs.q.shape()) + "); drop " + flag +
                       " or pass " + flag + " " + std::to_string(file_value));
    }
  }
  return inputs;
}

}  // namespace ringlab
