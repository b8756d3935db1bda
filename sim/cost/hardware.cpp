// Hardware presets with their sources, the device model's rates, and machines from JSON.
// Sections: [device] [presets] [json]
#include "sim/cost/hardware.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <queue>
#include <sstream>

#include "reference/error.hpp"
#include "sim/cost/cpu_calibration.hpp"

namespace ringlab {

// ---- [device] --------------------------------------------------------------------------------

double DeviceModel::rank_share(int64_t ranks) const {
  if (shared_cores <= 0) return 1.0;
  const int64_t whole_threads = shared_cores / ranks;  // max(1, cores/P) threads each
  if (ranks <= shared_cores) return double(whole_threads);
  return double(shared_cores) / double(ranks);  // time-shared cores
}

double DeviceModel::thread_efficiency(bool backward, int64_t ranks) const {
  if (shared_cores <= 0 || ranks >= shared_cores || thread_scaling.empty()) return 1.0;
  const int64_t threads = shared_cores / ranks;  // max(1, cores/P), as the simulator gives a rank
  const double t = double(threads);
  double below_t = 1, below = 1;  // the measured point at or below t (one thread: 1 by definition)
  for (const ThreadScaling& s : thread_scaling) {
    const double value = backward ? s.backward : s.forward;
    if (double(s.threads) >= t) {
      const double span = double(s.threads) - below_t;
      return span > 0 ? below + (value - below) * (t - below_t) / span : value;
    }
    below_t = double(s.threads), below = value;
  }
  return below;  // more threads than measured: the last measured point
}

double DeviceModel::rank_flops(bool backward, MaskedWork work, int64_t ranks) const {
  const double efficiency = backward
                                ? (work == MaskedWork::full ? backward_full_efficiency : backward_masked_efficiency)
                                : (work == MaskedWork::full ? forward_full_efficiency : forward_masked_efficiency);
  return peak_flops * efficiency * rank_share(ranks) * thread_efficiency(backward, ranks);
}

double DeviceModel::rows_factor(bool backward, int64_t rows) const {
  if (block_rows.empty() || rows <= 0) return 1.0;
  auto value = [&](const BlockRows& k) { return backward ? k.backward : k.forward; };
  if (rows <= block_rows.front().rows) return value(block_rows.front());
  if (rows >= block_rows.back().rows) return value(block_rows.back());
  for (size_t i = 1; i < block_rows.size(); ++i) {
    const BlockRows &a = block_rows[i - 1], &b = block_rows[i];
    if (rows > b.rows) continue;
    const double x = std::log2(double(rows)), xa = std::log2(double(a.rows)), xb = std::log2(double(b.rows));
    return value(a) + (value(b) - value(a)) * (x - xa) / (xb - xa);
  }
  return value(block_rows.back());
}

double DeviceModel::forward_floor_s(int64_t dim, int64_t key_rows, double full_rate) const {
  if (floor_sms <= 0 || key_rows <= 0 || full_rate <= 0) return 0;
  const double resident = double(floor_sms) * double(floor_blocks_per_sm);
  const double per_key = 4.0 * double(dim) * double(floor_block_queries) * resident / full_rate;
  return floor_startup_s + double(key_rows) * per_key;
}

double DeviceModel::shape_factor(bool backward, int64_t block, int64_t q_rows, int64_t kv_rows) const {
  double factor = rows_factor(backward, block);
  if (2 * q_rows <= block) factor *= short_queries.of(backward);
  if (2 * kv_rows <= block) factor *= short_keys.of(backward);
  return factor;
}

std::vector<double> processor_sharing(const std::vector<double>& start, const std::vector<double>& work) {
  const size_t n = start.size();
  std::vector<double> finish(n, 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return start[a] < start[b]; });
  // Virtual time V advances at 1/k per second while k jobs run; a job arriving at V_a with work w
  // leaves at V = V_a + w. A min-heap of those leaving points.
  using Leaving = std::pair<double, size_t>;
  std::priority_queue<Leaving, std::vector<Leaving>, std::greater<>> running;
  double t = 0, v = 0;
  size_t next = 0;
  while (next < n || !running.empty()) {
    const double arrival = next < n ? start[order[next]] : INFINITY;
    if (running.empty()) {
      t = std::max(t, arrival);
    } else {
      const double k = double(running.size());
      const double leaves_at = t + (running.top().first - v) * k;
      if (leaves_at <= arrival) {
        t = leaves_at, v = running.top().first;
        finish[running.top().second] = t;
        running.pop();
        continue;
      }
      v += (arrival - t) / k, t = arrival;
    }
    const size_t job = order[next++];
    if (work[job] <= 0) {
      finish[job] = start[job];
    } else {
      running.emplace(v + work[job], job);
    }
  }
  return finish;
}

double DeviceModel::memory_seconds(double bytes, int64_t ranks) const {
  if (memory_bandwidth_Bps <= 0 || bytes <= 0) return 0;
  // Elementwise loops run on one thread of the rank: at most one core's worth.
  return bytes / (memory_bandwidth_Bps * std::min(1.0, rank_share(ranks)));
}

double DeviceModel::first_touch_seconds(double bytes, int64_t ranks) const {
  if (first_touch_Bps <= 0 || bytes <= 0) return 0;
  return bytes / (first_touch_Bps * std::min(1.0, rank_share(ranks)));  // one thread of the rank
}

double masked_tile_efficiency(double full_efficiency, double causal_efficiency, int64_t seq, int64_t tile) {
  // Square tiles of t rows over a causal S x S attention, nt = S/t tiles a side:
  //   nt (nt-1)/2 tiles fully visible, nt tiles on the diagonal (computed whole under the mask).
  // Time  ~ visible / causal_eff = full_area / full_eff + diagonal_area / masked_eff.
  const int64_t whole_tiles = seq / tile;
  const double t = double(tile), nt = double(whole_tiles);
  const double visible = double(seq) * double(seq + 1) / 2;
  const double full_area = t * t * nt * (nt - 1) / 2, diagonal_area = t * t * nt;
  const double diagonal_time = visible / causal_efficiency - full_area / full_efficiency;
  return diagonal_time > 0 ? std::min(1.0, diagonal_area / diagonal_time) : full_efficiency;
}

// ---- [presets] -------------------------------------------------------------------------------

// Where an error about a machine file sends the reader: the whole format is a paragraph, too long
// for the one line a bad input gets.
constexpr const char* kFormatPointer = "`ringlab compare --help-hw` prints the machine file's format";

namespace {

// FlashAttention-3 on H100 SXM, BF16 (FlashAttention-3 paper, arXiv 2407.08608, figures 5-6), TFLOP/s with
// FLOPs = 4 S^2 D heads (causal halved), backward 2.5x the forward:
constexpr double kH100DensePeak = 989e12;                                   // dense BF16 peak, H100 SXM
constexpr double kFa3ForwardD128 = 648e12, kFa3ForwardCausalD128 = 616e12;  // 16K tokens
constexpr double kFa3ForwardD64 = 497e12;
constexpr double kFa3BackwardD128 = 561e12;
constexpr int64_t kFa3Tile = 128;  // assumed FA3 d128 tile (the model only uses it to find diagonal tiles)

// Measured H100 NVLink P2P (copy engines), unidirectional (a published measurement).
constexpr double kNvlinkP2p = 375e9;
// InfiniBand NDR, one 400 Gb/s NIC per GPU = 50 GB/s (the source material, exercise 5).
constexpr double kInfinibandPerGpu = 50e9;
// PCIe 5.0 x16: 32 GT/s x 16 lanes x 128/130 / 8 = 63.0 GB/s per direction (PCI-SIG PCIe 5.0).
constexpr double kPcie5x16 = 32e9 * 16 * 128.0 / 130.0 / 8;
constexpr double kAchievedFraction = 0.8;  // assumed achieved / theoretical (ASTRA-sim: use achieved)

DeviceModel h100_sxm(int64_t head_dim, std::vector<std::string>& sources) {
  DeviceModel d;
  d.name = "H100 SXM5, BF16, FlashAttention-3-class kernel";
  d.peak_flops = kH100DensePeak;
  const bool small_head = head_dim <= 64;
  d.forward_full_efficiency = (small_head ? kFa3ForwardD64 : kFa3ForwardD128) / kH100DensePeak;
  const double causal_ratio = masked_tile_efficiency(kFa3ForwardD128 / kH100DensePeak,
                                                     kFa3ForwardCausalD128 / kH100DensePeak, 16384, kFa3Tile) /
                              (kFa3ForwardD128 / kH100DensePeak);
  d.forward_masked_efficiency = d.forward_full_efficiency * causal_ratio;
  d.backward_full_efficiency = kFa3BackwardD128 / kH100DensePeak;
  d.backward_masked_efficiency = d.backward_full_efficiency * causal_ratio;
  d.q_tile = d.kv_tile = kFa3Tile;
  d.kernel_launch_s = 4e-6;
  d.memory_bandwidth_Bps = 3.35e12;
  d.memory_capacity_bytes = 80e9;
  sources.push_back("peak = 989 TFLOP/s dense BF16: H100 SXM (FlashAttention-3 paper, arXiv 2407.08608)");
  sources.push_back(
      small_head ? "forward efficiency = 497/989 on unmasked tiles: FA3 forward d64 non-causal 16K, 497 TFLOP/s "
                   "(arXiv 2407.08608 fig. 5)"
                 : "forward efficiency = 648/989 on unmasked tiles: FA3 forward d128 non-causal 16K, 648 TFLOP/s "
                   "(arXiv 2407.08608 fig. 5)");
  char line[240];
  std::snprintf(line, sizeof line,
                "diagonal-tile efficiency = %.3f x the unmasked one: derived so that a causal 16K attention with "
                "128x128 tiles runs at FA3's 616 TFLOP/s (d128 causal, fig. 5); backward assumed the same ratio",
                causal_ratio);
  sources.emplace_back(line);
  sources.push_back(
      "backward efficiency = 561/989: FA3 backward d128 non-causal, 561 TFLOP/s (arXiv 2407.08608 fig. 6)");
  sources.push_back("tile = 128 x 128: assumed FA3-class tile; only decides which diagonal tiles are computed");
  sources.push_back("kernel launch = 4 us: assumption (order of a CUDA kernel launch); re-measure");
  sources.push_back("HBM3 = 3.35 TB/s, 80 GB: NVIDIA H100 SXM5 datasheet");
  return d;
}

LinkClass nvlink(std::vector<std::string>& sources) {
  sources.push_back(
      "NVLink = 375 GB/s per direction: measured H100 P2P unidirectional (copy engines), published measurement");
  sources.push_back(
      "NVLink latency = 3 us: assumption (NCCL small-message P2P is a few us; fit from small messages "
      "as ASTRA-sim advises)");
  return {"NVLink 4 (H100 SXM, measured P2P)", 3e-6, kNvlinkP2p, false, 0};
}

LinkClass infiniband(std::vector<std::string>& sources) {
  sources.push_back("InfiniBand = 50 GB/s per GPU: one 400 Gb/s NDR NIC per GPU (the source material, exercise 5)");
  sources.push_back("InfiniBand latency = 5 us: assumption (RDMA send/recv through NCCL); re-measure");
  return {"InfiniBand NDR 400 Gb/s per GPU", 5e-6, kInfinibandPerGpu, false, 0};
}

Hardware h100_nvlink(int64_t head_dim) {
  Hardware hw;
  hw.name = "h100-nvlink";
  hw.description = "HGX H100 SXM: 8 GPUs per node on NVLink 4 (more than 8 ranks spill over InfiniBand), BF16";
  hw.device = h100_sxm(head_dim, hw.sources);
  hw.intra_node = nvlink(hw.sources);
  hw.inter_node = infiniband(hw.sources);
  hw.ranks_per_node = 8;
  hw.element_bytes = 2;
  return hw;
}

Hardware h100_ib(int64_t head_dim) {
  Hardware hw = h100_nvlink(head_dim);
  hw.name = "h100-ib";
  hw.description = "H100 SXM nodes of 8 on NVLink 4, nodes joined by InfiniBand NDR (50 GB/s per GPU), BF16";
  return hw;
}

Hardware h100_pcie(int64_t head_dim) {
  Hardware hw;
  hw.name = "h100-pcie";
  hw.description = "H100 PCIe: 8 GPUs per node peer-to-peer over PCIe 5.0 x16 (no NVLink), BF16";
  hw.device = h100_sxm(head_dim, hw.sources);
  hw.sources.erase(hw.sources.begin());  // the SXM peak and memory lines do not apply
  hw.sources.pop_back();
  hw.device.name = "H100 PCIe, BF16, FlashAttention-3-class kernel";
  hw.device.peak_flops = 756e12;
  hw.device.memory_bandwidth_Bps = 2.0e12;
  hw.sources.insert(hw.sources.begin(),
                    "peak = 756 TFLOP/s dense BF16: NVIDIA H100 PCIe datasheet (1,513 with sparsity); efficiencies "
                    "assumed as on SXM");
  hw.sources.push_back("HBM2e = 2.0 TB/s, 80 GB: NVIDIA H100 PCIe datasheet");
  char line[200];
  std::snprintf(line, sizeof line,
                "PCIe = %.1f GB/s per direction: 80%% (assumed achieved) of PCIe 5.0 x16's 63.0 GB/s (PCI-SIG)",
                kAchievedFraction * kPcie5x16 / 1e9);
  hw.sources.emplace_back(line);
  hw.sources.push_back("PCIe latency = 5 us: assumption; re-measure with nccl-tests sendrecv_perf");
  hw.intra_node = {"PCIe 5.0 x16 peer-to-peer", 5e-6, kAchievedFraction * kPcie5x16, false, 0};
  hw.inter_node = infiniband(hw.sources);
  hw.ranks_per_node = 8;
  hw.element_bytes = 2;
  return hw;
}

}  // namespace

std::vector<std::string> hardware_preset_names() { return {"h100-nvlink", "h100-ib", "h100-pcie", "cpu"}; }

Hardware hardware_preset(const std::string& name, int64_t head_dim) {
  if (name == "h100-nvlink") return h100_nvlink(head_dim);
  if (name == "h100-ib") return h100_ib(head_dim);
  if (name == "h100-pcie") return h100_pcie(head_dim);
  if (name == "cpu") return cpu_hardware(cached_cpu_calibration(head_dim));
  std::string list;
  for (const std::string& preset : hardware_preset_names()) list += (list.empty() ? "" : ", ") + preset;
  throw UsageError("unknown hardware preset '" + name + "'; use --hw " + list +
                   ", or the path of a JSON file describing a machine (ringlab compare --help-hw shows the format)");
}

// ---- [json] ----------------------------------------------------------------------------------

namespace {

using nlohmann::json;

// Reads fields of one JSON object, refusing unknown ones, with errors naming the file and field.
class Fields {
 public:
  Fields(const json& object, std::string where, std::initializer_list<const char*> known)
      : object_(object), where_(std::move(where)) {
    if (!object.is_object()) fail("is not an object");
    for (const auto& item : object.items()) {
      const std::string& key = item.key();  // (clang 14 cannot capture a structured binding)
      if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) == known.end()) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        throw UsageError(where_ + ": unknown field '" + key + "'; the fields are " + list);
      }
    }
  }
  [[noreturn]] void fail(const std::string& problem) const {
    throw UsageError(where_ + " " + problem + "; " + kFormatPointer);
  }
  bool has(const char* key) const { return object_.contains(key); }
  const json& at(const char* key) const { return object_.at(key); }
  // A number from kLeast to `most` (at most kMost), or 0 when zero_ok. The bounds keep every time
  // the model derives from the file finite: a bandwidth of 1e-320 GB/s or a latency of 1e300 us
  // would print inf or a 300-digit time, not a prediction.
  static constexpr double kLeast = 1e-9, kMost = 1e9;
  void number(const char* key, double& into, double scale, bool zero_ok = false, double most = kMost) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    if (!value.is_number()) throw UsageError(where_ + "." + key + " is not a number; give a number");
    const double x = value.get<double>();
    const double top = std::min(most, kMost);
    if (!std::isfinite(x) || !((zero_ok && x == 0) || (x >= kLeast && x <= top))) {
      char range[80];
      std::snprintf(range, sizeof range, "%sfrom %g to %g", zero_ok ? "0 or " : "", kLeast, top);
      throw UsageError(where_ + "." + key + " = " + value.dump() + " is out of range; it must be " + range);
    }
    into = x * scale;
  }
  void integer(const char* key, int64_t& into, int64_t least) const {
    if (!has(key)) return;
    const json& value = object_.at(key);
    if (!value.is_number_integer() || value.get<int64_t>() < least) {
      throw UsageError(where_ + "." + key + " = " + value.dump() +
                       " must be a whole number >= " + std::to_string(least));
    }
    into = value.get<int64_t>();
  }
  void boolean(const char* key, bool& into) const {
    if (!has(key)) return;
    if (!object_.at(key).is_boolean()) throw UsageError(where_ + "." + key + " is not true or false; give one");
    into = object_.at(key).get<bool>();
  }
  void text(const char* key, std::string& into) const {
    if (!has(key)) return;
    if (!object_.at(key).is_string()) throw UsageError(where_ + "." + key + " is not a string; give a string");
    into = object_.at(key).get<std::string>();
  }

 private:
  const json& object_;
  std::string where_;
};

void read_link(const Fields& parent, const char* key, const std::string& where, LinkClass& link) {
  if (!parent.has(key)) return;
  const Fields f(parent.at(key), where + "." + key,
                 {"name", "bandwidth_gb_per_s", "latency_us", "host_copy", "verify_gb_per_s"});
  f.text("name", link.name);
  f.number("bandwidth_gb_per_s", link.bandwidth_Bps, 1e9);
  f.number("latency_us", link.latency_s, 1e-6, true);
  // The simulator's queues (the cpu preset prints them): copies by the sending thread, a checksum
  // pass at the receiver's wait.
  link.host_copy = false;
  link.verify_bandwidth_Bps = 0;
  f.boolean("host_copy", link.host_copy);
  f.number("verify_gb_per_s", link.verify_bandwidth_Bps, 1e9, true);
  if (link.verify_bandwidth_Bps > 0 && !link.host_copy) f.fail("has verify_gb_per_s without host_copy: true");
}

// A list of per-pass factors by a count, ascending and distinct, factors in (0, 4]: block_rows,
// [{"rows": 1024, "forward": 0.6, "backward": 0.8}, ...], and the cpu preset's measured scaling of
// a kernel on t threads, thread_scaling, [{"threads": 2, "forward": 0.9, ...}, ...]. `meaning`
// says what the count is, for the error that finds it missing.
template <class Row>
void read_factor_list(const json& list, const std::string& where, const char* key, const char* meaning,
                      int64_t Row::*count, std::vector<Row>& into) {
  const std::string name = key;
  if (!list.is_array()) {
    throw UsageError(where + " must be an array of {\"" + name + "\": n, \"forward\": f, \"backward\": b}");
  }
  into.clear();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const Fields f(list[i], at, {key, "forward", "backward"});
    if (!f.has(key)) throw UsageError(at + " needs " + name + " (" + meaning + ")");
    Row row;
    f.integer(key, row.*count, 1);
    f.number("forward", row.forward, 1, false, 4);
    f.number("backward", row.backward, 1, false, 4);
    if (!into.empty() && row.*count <= into.back().*count) {
      throw UsageError(at + "." + name + " = " + std::to_string(row.*count) + " must be above the one before; list " +
                       name + " ascending");
    }
    into.push_back(row);
  }
}

// {"forward": 0.6, "backward": 0.9}
void read_factor(const Fields& parent, const char* key, const std::string& where, PassFactor& into) {
  if (!parent.has(key)) return;
  const Fields f(parent.at(key), where + "." + key, {"forward", "backward"});
  f.number("forward", into.forward, 1, false, 4);
  f.number("backward", into.backward, 1, false, 4);
}

}  // namespace

std::string hardware_json_help() {
  return "a machine file is {\"name\": \"my-cluster\", \"base\": \"h100-ib\" (optional preset to start from), "
         "\"element_bytes\": 2, \"ranks_per_node\": 8, \"device\": {\"peak_tflops\": 989, \"efficiency\": "
         "{\"forward_full\": 0.65, \"forward_masked\": 0.11, \"backward_full\": 0.57, \"backward_masked\": 0.1}, "
         "\"tile\": [128, 128], \"kernel_launch_us\": 4, \"memory_bandwidth_gb_per_s\": 3350, \"memory_gb\": 80, "
         "\"ranks_per_device\": 1 (P virtual ranks on one GPU: P), \"block_rows\": [{\"rows\": 1024, \"forward\": "
         "0.7, \"backward\": 0.9}], \"short_queries\": {\"forward\": 0.6}, \"short_keys\": {\"forward\": 1.1}, "
         "\"floor\": {\"sm_count\": 132, \"blocks_per_sm\": 2, \"block_queries\": 128, \"startup_us\": 38} "
         "(the last five optional)}, "
         "\"intra_node\": {\"bandwidth_gb_per_s\": 375, \"latency_us\": 3}, \"inter_node\": {\"bandwidth_gb_per_s\": "
         "50, "
         "\"latency_us\": 5}, \"sources\": [\"...\"]}; without \"base\", device.peak_tflops, "
         "device.efficiency.forward_full and intra_node.bandwidth_gb_per_s are required. The hardware object "
         "that --json prints loads as a machine file, the cpu preset's too (its measured device.shared_cores, "
         "first_touch_gb_per_s and thread_scaling, and links with host_copy and verify_gb_per_s: the simulator's "
         "queues on the machine that measured them)";
}

Hardware hardware_from_json(const json& document, const std::string& source, int64_t head_dim) {
  const Fields top(document, source,
                   {"name", "base", "description", "element_bytes", "ranks_per_node", "device", "intra_node",
                    "inter_node", "sources"});
  Hardware hw;
  std::string base;
  top.text("base", base);
  const bool from_base = !base.empty();
  if (from_base) {
    if (base == "cpu")
      throw UsageError(source +
                       ".base = \"cpu\" is measured, not described; base a file on a GPU preset, or save the "
                       "\"hardware\" object of `ringlab run --dry-run --hw cpu --json` as the file");
    hw = hardware_preset(base, head_dim);
  } else {
    hw.device.memory_bandwidth_Bps = 0;
    hw.intra_node = hw.inter_node = {"link", 0, 0, false, 0};
  }
  hw.name = source;
  top.text("name", hw.name);
  top.text("description", hw.description);
  top.integer("element_bytes", hw.element_bytes, 1);
  if (hw.element_bytes != 1 && hw.element_bytes != 2 && hw.element_bytes != 4 && hw.element_bytes != 8) {
    throw UsageError(source + ".element_bytes = " + std::to_string(hw.element_bytes) +
                     " is not a float size; use 2 (bf16/fp16), 4 (fp32), 1 (fp8) or 8 (fp64)");
  }
  top.integer("ranks_per_node", hw.ranks_per_node, 1);
  bool have_peak = from_base, have_efficiency = from_base;
  if (top.has("device")) {
    const std::string where = source + ".device";
    const Fields d(top.at("device"), where,
                   {"name", "peak_tflops", "efficiency", "tile", "kernel_launch_us", "memory_bandwidth_gb_per_s",
                    "memory_gb", "ranks_per_device", "block_rows", "short_queries", "short_keys", "floor",
                    "shared_cores", "first_touch_gb_per_s", "thread_scaling"});
    d.text("name", hw.device.name);
    have_peak = have_peak || d.has("peak_tflops");
    d.number("peak_tflops", hw.device.peak_flops, 1e12);
    d.number("kernel_launch_us", hw.device.kernel_launch_s, 1e-6, true);
    d.number("memory_bandwidth_gb_per_s", hw.device.memory_bandwidth_Bps, 1e9, true);
    d.number("memory_gb", hw.device.memory_capacity_bytes, 1e9, true);
    d.integer("ranks_per_device", hw.device.ranks_per_device, 1);
    if (d.has("block_rows")) {
      read_factor_list(d.at("block_rows"), where + ".block_rows", "rows", "the kernel call's query rows",
                       &BlockRows::rows, hw.device.block_rows);
    }
    // The cpu preset's fields: rank threads sharing cores, first-touch page faults, thread scaling.
    d.integer("shared_cores", hw.device.shared_cores, 1);
    d.number("first_touch_gb_per_s", hw.device.first_touch_Bps, 1e9, true);
    if (d.has("thread_scaling")) {
      if (hw.device.shared_cores == 0) d.fail("has thread_scaling without shared_cores");
      read_factor_list(d.at("thread_scaling"), where + ".thread_scaling", "threads", "the kernel's thread count",
                       &ThreadScaling::threads, hw.device.thread_scaling);
    }
    read_factor(d, "short_queries", where, hw.device.short_queries);
    read_factor(d, "short_keys", where, hw.device.short_keys);
    if (d.has("floor")) {
      const Fields f(d.at("floor"), where + ".floor", {"sm_count", "blocks_per_sm", "block_queries", "startup_us"});
      if (!f.has("sm_count") || !f.has("startup_us")) f.fail("needs sm_count and startup_us");
      f.integer("sm_count", hw.device.floor_sms, 1);
      f.integer("blocks_per_sm", hw.device.floor_blocks_per_sm, 1);
      f.integer("block_queries", hw.device.floor_block_queries, 1);
      f.number("startup_us", hw.device.floor_startup_s, 1e-6, true);
    }
    if (d.has("efficiency")) {
      const Fields e(d.at("efficiency"), where + ".efficiency",
                     {"forward_full", "forward_masked", "backward_full", "backward_masked"});
      if (!from_base && !e.has("forward_full")) e.fail("needs forward_full (fraction of peak on unmasked tiles)");
      have_efficiency = true;
      e.number("forward_full", hw.device.forward_full_efficiency, 1, false, 1);
      // Unset ones default to the forward figure (without a base) or keep the base's.
      if (!from_base) {
        hw.device.forward_masked_efficiency = hw.device.backward_full_efficiency =
            hw.device.backward_masked_efficiency = hw.device.forward_full_efficiency;
      }
      e.number("forward_masked", hw.device.forward_masked_efficiency, 1, false, 1);
      e.number("backward_full", hw.device.backward_full_efficiency, 1, false, 1);
      e.number("backward_masked", hw.device.backward_masked_efficiency, 1, false, 1);
    }
    if (d.has("tile")) {
      const json& tile = d.at("tile");
      if (!tile.is_array() || tile.size() != 2 || !tile[0].is_number_integer() || !tile[1].is_number_integer() ||
          tile[0].get<int64_t>() <= 0 || tile[1].get<int64_t>() <= 0) {
        throw UsageError(where + ".tile = " + tile.dump() + " must be [query rows, key rows], two positive integers");
      }
      hw.device.q_tile = tile[0].get<int64_t>();
      hw.device.kv_tile = tile[1].get<int64_t>();
    }
  }
  if (!have_peak) top.fail("needs device.peak_tflops");
  if (!have_efficiency) top.fail("needs device.efficiency.forward_full");
  const bool had_intra = from_base || top.has("intra_node");
  read_link(top, "intra_node", source, hw.intra_node);
  if (!had_intra || hw.intra_node.bandwidth_Bps <= 0) top.fail("needs intra_node.bandwidth_gb_per_s");
  if (!from_base && !top.has("inter_node")) hw.inter_node = hw.intra_node;
  read_link(top, "inter_node", source, hw.inter_node);
  if (hw.inter_node.bandwidth_Bps <= 0) top.fail("needs inter_node.bandwidth_gb_per_s");
  if (top.has("sources")) {
    const json& list = top.at("sources");
    if (!list.is_array() || !std::all_of(list.begin(), list.end(), [](const json& s) { return s.is_string(); })) {
      throw UsageError(source + ".sources must be an array of strings (where each number comes from)");
    }
    if (!from_base) hw.sources.clear();
    for (const json& s : list) hw.sources.push_back(s.get<std::string>());
  }
  if (hw.sources.empty()) hw.sources.push_back("numbers from " + source + " (no sources given)");
  if (hw.description.empty()) hw.description = "machine described by " + source;
  return hw;
}

Hardware load_hardware(const std::string& preset_or_path, int64_t head_dim) {
  const std::vector<std::string> presets = hardware_preset_names();
  if (std::find(presets.begin(), presets.end(), preset_or_path) != presets.end()) {
    return hardware_preset(preset_or_path, head_dim);
  }
  const bool looks_like_file =
      preset_or_path.find('/') != std::string::npos || (preset_or_path.size() > 5 && preset_or_path.ends_with(".json"));
  if (!looks_like_file) return hardware_preset(preset_or_path, head_dim);  // throws, listing the presets
  std::ifstream file(preset_or_path, std::ios::binary);
  if (!file) throw UsageError(preset_or_path + ": cannot open the machine file; check the path");
  std::ostringstream text;
  text << file.rdbuf();
  json document;
  try {
    document = json::parse(text.str());
  } catch (const json::parse_error& error) {
    throw UsageError(preset_or_path + ": not valid JSON (byte " + std::to_string(error.byte) + "); " + kFormatPointer);
  }
  return hardware_from_json(document, preset_or_path, head_dim);
}

json to_json(const Hardware& hw) {
  auto link = [](const LinkClass& l) {
    json j = {{"name", l.name}, {"bandwidth_gb_per_s", l.bandwidth_Bps / 1e9}, {"latency_us", l.latency_s * 1e6}};
    if (l.host_copy) j["host_copy"] = true, j["verify_gb_per_s"] = l.verify_bandwidth_Bps / 1e9;
    return j;
  };
  const DeviceModel& d = hw.device;
  json device = {{"name", d.name},
                 {"peak_tflops", d.peak_flops / 1e12},
                 {"efficiency",
                  {{"forward_full", d.forward_full_efficiency},
                   {"forward_masked", d.forward_masked_efficiency},
                   {"backward_full", d.backward_full_efficiency},
                   {"backward_masked", d.backward_masked_efficiency}}},
                 {"tile", {d.q_tile, d.kv_tile}},
                 {"kernel_launch_us", d.kernel_launch_s * 1e6},
                 {"memory_bandwidth_gb_per_s", d.memory_bandwidth_Bps / 1e9},
                 {"memory_gb", d.memory_capacity_bytes / 1e9}};
  if (d.shared_cores > 0) device["shared_cores"] = d.shared_cores;
  if (d.first_touch_Bps > 0) device["first_touch_gb_per_s"] = d.first_touch_Bps / 1e9;
  if (d.ranks_per_device > 1) device["ranks_per_device"] = d.ranks_per_device;
  for (const BlockRows& k : d.block_rows) {
    device["block_rows"].push_back({{"rows", k.rows}, {"forward", k.forward}, {"backward", k.backward}});
  }
  for (const auto& [key, f] : {std::pair{"short_queries", d.short_queries}, std::pair{"short_keys", d.short_keys}}) {
    if (f.forward != 1 || f.backward != 1) device[key] = {{"forward", f.forward}, {"backward", f.backward}};
  }
  if (d.floor_sms > 0) {
    device["floor"] = {{"sm_count", d.floor_sms},
                       {"blocks_per_sm", d.floor_blocks_per_sm},
                       {"block_queries", d.floor_block_queries},
                       {"startup_us", d.floor_startup_s * 1e6}};
  }
  for (const ThreadScaling& s : d.thread_scaling) {
    device["thread_scaling"].push_back({{"threads", s.threads}, {"forward", s.forward}, {"backward", s.backward}});
  }
  return {{"name", hw.name},
          {"description", hw.description},
          {"element_bytes", hw.element_bytes},
          {"ranks_per_node", hw.ranks_per_node},
          {"device", device},
          {"intra_node", link(hw.intra_node)},
          {"inter_node", link(hw.inter_node)},
          {"sources", hw.sources}};
}

}  // namespace ringlab
