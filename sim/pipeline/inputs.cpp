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

AttentionInputs<double> load_inputs(RunConfig& config) {
  if (config.in_dir.empty()) {
    return make_inputs(config.dims, config.seed, config.backward).cast<double>();
  }
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(config.in_dir, error)) {
    throw UsageError("--in " + config.in_dir +
                     " is not a readable directory; pass the directory holding q.npy k.npy v.npy");
  }
  auto read = [&](const char* name) {
    const std::string path = (fs::path(config.in_dir) / name).string();
    if (!fs::exists(path, error)) {
      throw UsageError("--in " + config.in_dir + " has no " + name + "; it needs q.npy k.npy v.npy" +
                       (config.backward ? " dout.npy" : ""));
    }
    NpyArray array = read_npy(path);
    require_finite(array.values, path);
    return std::move(array.values);
  };
  AttentionInputs<double> inputs{read("q.npy"), read("k.npy"), read("v.npy"), {}};
  if (config.backward) inputs.dout = read("dout.npy");
  const AttentionDims dims =
      dims_of(inputs.q.shape(), inputs.k.shape(), inputs.v.shape(), config.backward ? &inputs.dout.shape() : nullptr);
  // A size flag the files contradict is an error, not silently overridden.
  for (const std::string& flag : config.sizes_given) {
    const auto [flag_value, file_value, file, what] =
        flag == "--batch"      ? std::tuple{config.dims.batch, dims.batch, "q.npy", "batch rows"}
        : flag == "--seq"      ? std::tuple{config.dims.seq, dims.seq, "q.npy", "tokens"}
        : flag == "--heads"    ? std::tuple{config.dims.heads, dims.heads, "q.npy", "heads"}
        : flag == "--kv-heads" ? std::tuple{config.dims.kv_heads, dims.kv_heads, "k.npy", "kv heads"}
        : flag == "--dim"      ? std::tuple{config.dims.dim, dims.dim, "q.npy", "head dimension"}
                               : std::tuple{int64_t{0}, int64_t{0}, "", ""};
    if (flag_value != file_value) {
      throw UsageError(flag + " " + std::to_string(flag_value) + " contradicts --in " + config.in_dir + "/" + file +
                       ", which has " + std::to_string(file_value) + " " + what + " (shape " +
                       shape_string(flag == "--kv-heads" ? inputs.k.shape() : inputs.q.shape()) + "); drop " + flag +
                       " or pass " + flag + " " + std::to_string(file_value));
    }
  }
  config.dims = dims;
  resolve_documents(config);
  return inputs;
}

}  // namespace ringlab
