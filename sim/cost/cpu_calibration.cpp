#include "sim/cost/cpu_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "reference/flash_attention.hpp"
#include "reference/formulas.hpp"
#include "reference/inputs.hpp"
#include "sim/runtime/message.hpp"
#include "sim/runtime/world.hpp"

namespace ringlab {

namespace {

using Clock = std::chrono::steady_clock;

// The kernel's tiles (reference/flash_attention.cpp kQueryTile x kKeyTile): the model needs them
// to know which tiles of a diagonal block are computed; test_cost_model checks the tile
// accounting against the kernel's own behaviour through these calibrations.
constexpr int64_t kCpuQueryTile = 128;
constexpr int64_t kCpuKeyTile = 256;

// Median seconds of `repeat` runs after one warm-up run.
template <class F>
double median_seconds(int repeat, F&& work) {
  work();
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    const Clock::time_point start = Clock::now();
    work();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + repeat / 2, times.end());
  return times[repeat / 2];
}

struct KernelRates {
  double forward = 0, backward = 0;  // FLOP/s on the tile area
};

// One thread, one block of n x n rows, H heads. masked: q and k at the same positions under the
// causal mask with n <= one key tile, so every tile is cut by the diagonal; else no mask.
KernelRates measure_kernel(int64_t n, int64_t heads, int64_t dim, bool masked) {
  const AttentionDims dims{1, n, heads, heads, dim};
  const AttentionInputs<float> x = make_inputs(dims, 7, true);
  const std::vector<int64_t> positions = iota_positions(n);
  const MaskKind mask = masked ? MaskKind::causal : MaskKind::none;
  const KernelOptions one_thread{1, true};
  const RowRange rows{0, n};
  SoftmaxState<float> acc = make_accumulator(1, heads, n, dim);
  // Medians of five calls: a virtual machine's neighbours make single calls vary by 10% and more.
  const double forward_s = median_seconds(5, [&] {
    acc = make_accumulator(1, heads, n, dim);
    flash_forward_accumulate(x.q, x.k, x.v, positions, positions, rows, rows, mask, acc, one_thread);
  });
  const AttentionOutput<float> forward = finalize_accumulator(acc, 1, heads, n, dim);
  const Tensor<float> delta = softmax_delta(x.dout, forward.out);
  Tensor<float> dq(x.q.shape()), dk(x.k.shape()), dv(x.v.shape());
  const double backward_s = median_seconds(5, [&] {
    flash_backward_accumulate(x.q, x.k, x.v, x.dout, forward.lse, delta, positions, positions, rows, rows, mask, dq,
                              dk, dv, one_thread);
  });
  const double area = double(n) * double(n) * double(heads);  // every tile is computed whole
  return {area * double(kForwardFlopsPerPairPerDim * dim) / forward_s,
          area * double(kBackwardFlopsPerPairPerDim * dim) / backward_s};
}

// The same measurement on every core at once, one single-threaded kernel per core — the regime
// the simulator's rank threads run in (shared caches, memory bandwidth and clocks) — and the
// median per-core rate.
KernelRates measure_kernel_on_all_cores(int cores, int64_t n, int64_t heads, int64_t dim, bool masked) {
  std::vector<KernelRates> rates(static_cast<size_t>(cores));
  std::vector<std::thread> threads;
  for (int core = 0; core < cores; ++core) {
    threads.emplace_back([&, core] { rates[static_cast<size_t>(core)] = measure_kernel(n, heads, dim, masked); });
  }
  for (std::thread& t : threads) t.join();
  std::vector<double> forward, backward;
  for (const KernelRates& r : rates) forward.push_back(r.forward), backward.push_back(r.backward);
  std::sort(forward.begin(), forward.end());
  std::sort(backward.begin(), backward.end());
  return {forward[forward.size() / 2], backward[backward.size() / 2]};
}

// A send's copy into a payload from the world's pool (the simulator's steady state: its ranks give
// the blocks they are done with back to the pool), the receiver's checksum pass, and an elementwise
// add (dK/dV accumulation: reads 2, writes 1). All on 16 MiB, larger than the caches: in the
// simulator the data was written by another rank's thread or a kernel call long before, and comes
// from memory. (4 MiB would sit in cache and read two to three times faster.)
void measure_queue_copies(CpuCalibration& c) {
  const size_t floats = size_t{1} << 22;
  const std::vector<float> data(floats, 1.0f);
  BufferPool pool(size_t{1} << 30);
  Buffer payload;
  const double copy_s = median_seconds(5, [&] {
    (void)make_payload(pool, data, payload);
    pool.give_back(std::move(payload));
  });
  (void)make_payload(pool, data, payload);
  volatile uint64_t sink = 0;
  const double verify_s = median_seconds(5, [&] { sink = sink + checksum_of(payload).sum; });
  const double bytes = double(floats) * sizeof(float);
  c.copy_bandwidth_Bps = bytes / copy_s;
  c.verify_bandwidth_Bps = bytes / verify_s;
  std::vector<float> to(floats, 0.0f);
  const double add_s = median_seconds(3, [&] {
    for (size_t i = 0; i < floats; ++i) to[i] += data[i];
  });
  c.memory_bandwidth_Bps = 3 * bytes / add_s;
}

// Round trips of one-float messages between two ranks of a world: half a round trip is the
// latency of a message through the queues (post, match, wake the receiver).
double measure_message_latency() {
  constexpr int kRoundTrips = 200;
  WorldOptions options;
  options.ranks = 2;
  options.timeout_seconds = 30;
  double seconds = 0;
  const RunReport report = World(options).run([&](Communicator& comm) {
    const std::vector<float> one{1.0f};
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kRoundTrips; ++i) {
      if (comm.rank() == 0) {
        comm.send(1, i, one);
        (void)comm.recv(1, i);
      } else {
        (void)comm.recv(0, i);
        comm.send(0, i, one);
      }
    }
    if (comm.rank() == 0) seconds = std::chrono::duration<double>(Clock::now() - start).count();
  });
  report.throw_if_failed();
  return seconds / kRoundTrips / 2;
}

}  // namespace

CpuCalibration calibrate_cpu(int64_t head_dim) {
  const Clock::time_point start = Clock::now();
  CpuCalibration c;
  c.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  c.head_dim = std::clamp<int64_t>(head_dim, 8, 512);
  const KernelRates full = measure_kernel_on_all_cores(c.cores, 1024, 4, c.head_dim, false);
  const KernelRates masked = measure_kernel_on_all_cores(c.cores, kCpuKeyTile, 8, c.head_dim, true);
  c.forward_full_flops = full.forward;
  c.backward_full_flops = full.backward;
  c.forward_masked_flops = masked.forward;
  c.backward_masked_flops = masked.backward;
  // A tiny call: the fixed cost of one kernel call (tiles, the OpenMP region).
  {
    const AttentionDims tiny{1, 8, 1, 1, c.head_dim};
    const AttentionInputs<float> x = make_inputs(tiny, 3, false);
    const std::vector<int64_t> positions = iota_positions(8);
    SoftmaxState<float> acc = make_accumulator(1, 1, 8, c.head_dim);
    c.kernel_call_s = median_seconds(21, [&] {
      flash_forward_accumulate(x.q, x.k, x.v, positions, positions, {0, 8}, {0, 8}, MaskKind::none, acc, {1, true});
    });
  }
  measure_queue_copies(c);
  c.message_latency_s = measure_message_latency();
  c.seconds_spent = std::chrono::duration<double>(Clock::now() - start).count();
  return c;
}

CpuCalibration cached_cpu_calibration(int64_t head_dim) {
  static std::mutex mutex;
  static std::map<int64_t, CpuCalibration> measured;  // by head dimension
  std::lock_guard lock(mutex);
  const auto found = measured.find(head_dim);
  if (found != measured.end()) return found->second;
  return measured.emplace(head_dim, calibrate_cpu(head_dim)).first->second;
}

Hardware cpu_hardware(const CpuCalibration& c) {
  Hardware hw;
  hw.name = "cpu";
  hw.description = "this machine running ringlab's simulator: " + std::to_string(c.cores) +
                   " cores shared by the rank threads, fp32 blockwise kernel, in-process queues";
  hw.element_bytes = 4;  // the simulator computes and sends fp32
  DeviceModel& d = hw.device;
  d.name = "blockwise CPU kernel (reference/flash_attention.cpp), per core";
  d.peak_flops = c.forward_full_flops;
  d.forward_full_efficiency = 1;
  d.forward_masked_efficiency = c.forward_masked_flops / c.forward_full_flops;
  d.backward_full_efficiency = c.backward_full_flops / c.forward_full_flops;
  d.backward_masked_efficiency = c.backward_masked_flops / c.forward_full_flops;
  d.q_tile = kCpuQueryTile;
  d.kv_tile = kCpuKeyTile;
  d.kernel_launch_s = c.kernel_call_s;
  d.memory_bandwidth_Bps = c.memory_bandwidth_Bps;
  d.shared_cores = c.cores;
  LinkClass queue;
  queue.name = "in-process message queue (copy + checksum by the sending thread)";
  queue.latency_s = c.message_latency_s;
  queue.bandwidth_Bps = c.copy_bandwidth_Bps;
  queue.host_copy = true;
  queue.verify_bandwidth_Bps = c.verify_bandwidth_Bps;
  hw.intra_node = hw.inter_node = queue;
  hw.ranks_per_node = int64_t{1} << 40;  // one machine
  char line[200];
  auto source = [&](const char* what, double value, const char* unit, const char* how) {
    std::snprintf(line, sizeof line, "%s = %.4g %s: %s", what, value, unit, how);
    hw.sources.emplace_back(line);
  };
  const std::string at = "measured at D=" + std::to_string(c.head_dim) + ", one thread on each core at once";
  source("kernel forward, unmasked tiles", c.forward_full_flops / 1e9, "GFLOP/s per core", at.c_str());
  source("kernel forward, diagonal tiles", c.forward_masked_flops / 1e9, "GFLOP/s per core", at.c_str());
  source("kernel backward, unmasked tiles", c.backward_full_flops / 1e9, "GFLOP/s per core", at.c_str());
  source("kernel backward, diagonal tiles", c.backward_masked_flops / 1e9, "GFLOP/s per core", at.c_str());
  source("kernel call overhead", c.kernel_call_s * 1e6, "us", "measured on an 8-row block");
  source("queue copy", c.copy_bandwidth_Bps / 1e9, "GB/s", "measured: 16 MiB into a pooled payload, copy + checksum");
  source("queue checksum at the receiver", c.verify_bandwidth_Bps / 1e9, "GB/s", "measured on 16 MiB");
  source("queue latency", c.message_latency_s * 1e6, "us", "measured: half a round trip of a 1-float message");
  source("memory (elementwise add)", c.memory_bandwidth_Bps / 1e9, "GB/s moved", "measured on 16 MiB arrays");
  source("cores", c.cores, "", "std::thread::hardware_concurrency(); kernels use max(1, cores/P) threads");
  source("kernel tile", double(kCpuQueryTile), "x 256 rows", "reference/flash_attention.cpp kQueryTile x kKeyTile");
  return hw;
}

}  // namespace ringlab
