// Hardware descriptions for the cost model: devices, link classes, topology, and the presets with
// their sources written next to every number (sim/cost/hardware.cpp).
//
// The model, in one place (the book's "cost model" chapter states the same formulas):
//   * a transfer of b bytes over a link class costs  alpha + b / beta   (latency + bytes/bandwidth);
//     ranks live on nodes of `ranks_per_node` consecutive ranks: a transfer between two ranks of a
//     node uses the intra-node class, otherwise the inter-node class. Each rank has one send port
//     and one receive port per direction (full duplex); transfers on a port queue behind each other.
//   * all-to-all among n ranks (chunk c per peer) is what NCCL does: grouped send/recv to every
//     peer, all posted at once, so a rank's intra- and inter-node traffic flow side by side:
//         T = alpha_max + max(c n_intra / beta_intra, c n_inter / beta_inter)
//   * all-gather and reduce-scatter of m bytes per rank use the ring algorithm (NCCL's default):
//     n-1 steps each moving one chunk over every ring link, so the slowest link sets the pace:
//         T = (n-1) (alpha_slowest + m / beta_slowest)
//     (reduce-scatter adds its (n-1) m bytes of additions at memory bandwidth).
//   * a kernel call on a (query block x key block) costs
//         launch + (full_area F / (peak eff_full) + masked_area F / (peak eff_masked)) / shape
//     where the areas are the (query, key) pairs of the tiles the kernel really computes — the
//     tiles a causal kernel skips cost nothing, the tiles the diagonal cuts through are computed
//     whole under the mask — and F is the FLOPs per pair (4 D forward, 10 D backward, times the
//     rank's heads and batch; reference/formulas.hpp). `shape` is the kernel's throughput
//     relative to the efficiencies, DeviceModel::shape_factor: block_rows(n) at the rank's block
//     of n rows (measured points, interpolated in log2 n, flat beyond the ends; none = 1), times
//     short_queries when the call covers at most half the block's query rows (zig-zag's "later
//     half of the queries" blocks), times short_keys when it covers at most half its key rows
//     (zig-zag's "earlier half of the keys" blocks). All 1 unless measured (ringlab calibrate).
//   * ranks_per_device = n > 1 (P virtual ranks on one GPU, the gpu-streams executor): ranks
//     r with the same r / n share one device. Their kernels do not each get a device: they share
//     it by processor sharing — while k of them have kernel work outstanding, each progresses at
//     1/k of the device's rate, and each kernel's work is priced at the whole device's rate as
//     above. A step in which the ranks start together so ends when the SUM of their kernel times
//     has passed: an idle rank's share goes to the busy ones (a rank whose block is skipped costs
//     the others nothing), where the model without it gives each rank 1/n of the device for the
//     whole step and so prices a step by its slowest rank's work times n.
//   * elementwise work (online-softmax finalize, dK/dV accumulation, local copies) moves its bytes
//     at the device's memory bandwidth.
//   * first touch (the cpu preset): a rank writes the memory of a new peak (the memory model's
//     bytes beyond every earlier phase's, inputs aside) for the first time at that phase's start,
//     paying the page faults, at first_touch_Bps.
//   * host_copy links describe ringlab's own simulator: a "transfer" is a copy made by the sending
//     rank's thread when it posts the send (so it cannot overlap that rank's compute), and the
//     receiver checks the payload's checksum when it waits. `shared_cores` says that P rank threads
//     time-share that many cores, each kernel using max(1, cores/P) threads.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace ringlab {

struct LinkClass {
  std::string name;                 // "NVLink 4 (H100 SXM)"
  double latency_s = 0;             // alpha, per message (s)
  double bandwidth_Bps = 1;         // 1/beta, one direction, per rank (bytes/s)
  bool host_copy = false;           // the simulator's queues: the sending thread copies (no overlap)
  double verify_bandwidth_Bps = 0;  // host_copy: the receiver's checksum pass at its wait (0 = free)

  // alpha + bytes / beta.
  double seconds(double bytes) const { return latency_s + bytes / bandwidth_Bps; }
  // host_copy: the receiver's share at its wait.
  double verify_seconds(double bytes) const { return verify_bandwidth_Bps > 0 ? bytes / verify_bandwidth_Bps : 0; }
};

enum class MaskedWork : uint8_t { full, masked };

// The cpu preset: how a kernel call on t threads compares with t single-threaded calls, measured.
struct ThreadScaling {
  int64_t threads = 1;
  double forward = 1, backward = 1;  // rate on t threads / (t x the rate on one)
};

// A kernel's throughput on a rank's block of `rows` rows, relative to the efficiencies (1 = as they say).
struct BlockRows {
  int64_t rows = 0;
  double forward = 1, backward = 1;
};

// A throughput factor by pass.
struct PassFactor {
  double forward = 1, backward = 1;
  double of(bool backward_pass) const { return backward_pass ? backward : forward; }
};

struct DeviceModel {
  std::string name;                      // "H100 SXM5 (bf16, FlashAttention-3)"
  double peak_flops = 1;                 // FLOP/s of one device (dense)
  double forward_full_efficiency = 1;    // of peak, on tiles computed without a mask
  double forward_masked_efficiency = 1;  // on tiles the causal mask cuts through (computed whole)
  double backward_full_efficiency = 1;
  double backward_masked_efficiency = 1;
  int64_t q_tile = 128;                       // kernel tile: query rows
  int64_t kv_tile = 128;                      //              key rows
  double kernel_launch_s = 0;                 // per kernel call
  double memory_bandwidth_Bps = 0;            // elementwise work; 0 = not modelled (free)
  double first_touch_Bps = 0;                 // memory written for the first time (page faults); 0 = free
  double memory_capacity_bytes = 0;           // 0 = unknown
  int64_t shared_cores = 0;                   // > 0: P rank threads share this many cores (the cpu preset)
  std::vector<ThreadScaling> thread_scaling;  // with shared_cores, by threads ascending; none = linear
  int64_t ranks_per_device = 1;               // > 1: that many consecutive ranks share one device
  std::vector<BlockRows> block_rows;          // by rows ascending; none = the efficiencies at every size
  PassFactor short_queries, short_keys;       // calls on at most half the block's query / key rows
  // The floor of a forward kernel call (measured: ringlab calibrate; floor_sms = 0: none). A call
  // ends no sooner than its start + floor_startup_s + its longest thread block's keys x the time
  // one block takes per key: 4 D floor_block_queries FLOPs x (floor_sms x floor_blocks_per_sm
  // blocks resident) / the call's full-tile rate. A kernel whose thread blocks all fit on the
  // device at once lasts as long as its longest one, plus a start-up (on the H100 the causal
  // forward at S = 1024 took as long as the full one). With ranks_per_device > 1 it is a latency,
  // not work: kernels running together hide it.
  int64_t floor_sms = 0;
  int64_t floor_blocks_per_sm = 2;
  int64_t floor_block_queries = 128;
  double floor_startup_s = 0;

  // FLOP/s one rank's kernel gets on tiles of a kind, with P ranks on the machine: peak x
  // efficiency x rank_share, and with shared_cores, x the kernel's measured scaling on its threads.
  double rank_flops(bool backward, MaskedWork work, int64_t ranks) const;
  // Fraction of one device (or, with shared_cores, of one core's speed times its threads) a rank
  // gets: 1 for dedicated devices; with shared_cores c: floor(c/P) threads when P <= c, else c/P.
  double rank_share(int64_t ranks) const;
  // With shared_cores: a kernel on t threads (t = floor(c/P) > 1) runs at this fraction of t
  // single-threaded kernels, interpolated linearly in t between the measured thread counts; 1
  // with one thread or nothing measured.
  double thread_efficiency(bool backward, int64_t ranks) const;
  // Throughput on a block of `rows` rows relative to the efficiencies: block_rows interpolated in
  // log2 rows, the end values beyond the ends, 1 without points.
  double rows_factor(bool backward, int64_t rows) const;
  // A kernel call on q_rows x kv_rows of a block of block_rows rows: rows_factor x short_queries
  // (q_rows <= block_rows / 2) x short_keys (kv_rows <= block_rows / 2).
  double shape_factor(bool backward, int64_t block_rows, int64_t q_rows, int64_t kv_rows) const;
  // The floor of a call whose longest thread block reads `key_rows` keys at head dimension `dim`,
  // at `full_rate` FLOP/s on whole tiles (the call's rate, shape included); 0 without one.
  double forward_floor_s(int64_t dim, int64_t key_rows, double full_rate) const;
  // Seconds to move `bytes` through memory on one rank (elementwise work).
  double memory_seconds(double bytes, int64_t ranks) const;
  // Seconds for one rank to write `bytes` of memory it never touched before (0 when not modelled).
  double first_touch_seconds(double bytes, int64_t ranks) const;
};

struct Hardware {
  std::string name;         // the preset's name, or the JSON file's "name"
  std::string description;  // one line
  DeviceModel device;
  LinkClass intra_node, inter_node;
  int64_t ranks_per_node = 8;        // G: ranks p and q share a node iff p / G == q / G
  int64_t element_bytes = 2;         // q, k, v, out on the wire and in memory: 2 = bf16, 4 = fp32
  std::vector<std::string> sources;  // "what = value: where it comes from", one per number
};

// The preset names, in the order `--hw` lists them.
std::vector<std::string> hardware_preset_names();

// A preset by name. "cpu" measures this machine (sim/cost/cpu_calibration.hpp) on first use in
// the process, for head dimension `head_dim`, and reuses the figures after that. The GPU presets
// pick the FlashAttention-3 efficiencies published for the nearest head dimension (64 or 128).
// Throws UsageError naming the presets for an unknown name.
Hardware hardware_preset(const std::string& name, int64_t head_dim = 64);

// `--hw` argument: a preset name or the path of a JSON file describing a machine.
Hardware load_hardware(const std::string& preset_or_path, int64_t head_dim = 64);

// A machine from JSON (format: hardware_json_help()); `source` names the file in error messages.
// Throws UsageError with one line naming the field and the fix.
Hardware hardware_from_json(const nlohmann::json& document, const std::string& source, int64_t head_dim = 64);
nlohmann::json to_json(const Hardware& hardware);
// The JSON format, with an example, for error messages and --help.
std::string hardware_json_help();

// Processor sharing of one device: job i arrives at start[i] with work[i] seconds of the whole
// device; while k jobs are unfinished each progresses at 1/k. Returns each job's finish time.
// O(n log n). Jobs with no work finish at their start.
std::vector<double> processor_sharing(const std::vector<double>& start, const std::vector<double>& work);

// The FA3-style derivation of the masked-tile efficiency: the efficiency on diagonal tiles that
// makes a causal S x S attention with square tiles of `tile` rows run at `causal_efficiency`
// (visible FLOPs / time / peak), given `full_efficiency` on unmasked tiles.
double masked_tile_efficiency(double full_efficiency, double causal_efficiency, int64_t seq, int64_t tile);

}  // namespace ringlab
