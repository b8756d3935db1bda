// The cpu preset's calibration (what it measures and why: cpu_calibration.hpp) and the preset
// built from it.
// Sections: [timing] [kernel] [queue and memory] [calibrate] [preset]
#include "sim/cost/cpu_calibration.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "reference/flash_attention.hpp"
#include "reference/formulas.hpp"
#include "reference/inputs.hpp"
#include "sim/ranks/message.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab {

namespace {

using Clock = std::chrono::steady_clock;

// The kernel's tiles (reference/flash_attention.cpp kQueryTile x kKeyTile): the model needs them
// to know which tiles of a diagonal block are computed; test_cost_model checks the tile
// accounting against the kernel's own behaviour through these calibrations.
constexpr int64_t kCpuQueryTile = 128;
constexpr int64_t kCpuKeyTile = 256;

// ---- [timing] --------------------------------------------------------------------------------

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

// The median of a few values (an odd count: the middle one).
double median_of(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
  return values[values.size() / 2];
}

// ---- [kernel] --------------------------------------------------------------------------------

struct KernelRates {
  double forward = 0, backward = 0;  // FLOP/s on the tile area
};

// One worker's kernel calls: a block of n x n rows, H heads, computed by calls on `threads` threads.
// masked: q and k at the same positions under the causal mask with n <= one key tile, so every
// tile is cut by the diagonal; else no mask. Built on the thread that runs it (first touch there,
// as a rank's tensors are).
class KernelWorkload {
 public:
  KernelWorkload(int64_t n, int64_t heads, int64_t dim, bool masked, int threads)
      : dims_{1, n, heads, heads, dim}, x_(make_inputs(dims_, 7, true)), positions_(iota_positions(n)),
        mask_(masked ? MaskKind::causal : MaskKind::none), options_{threads, true},
        acc_(make_accumulator(1, heads, n, dim)), dq_(x_.q.shape()), dk_(x_.k.shape()), dv_(x_.v.shape()) {}

  // The accumulator keeps merging the same block: it stays finite (the running max does not move).
  void forward() {
    flash_forward_accumulate(x_.q, x_.k, x_.v, positions_, positions_, rows(), rows(), mask_, acc_, options_);
  }
  // The backward needs the forward's lse and delta: made once, on the first call.
  void backward() {
    if (lse_.empty()) {
      SoftmaxState<float> once = make_accumulator(1, dims_.heads, dims_.seq, dims_.dim);
      flash_forward_accumulate(x_.q, x_.k, x_.v, positions_, positions_, rows(), rows(), mask_, once, options_);
      AttentionOutput<float> forward = finalize_accumulator(once, 1, dims_.heads, dims_.seq, dims_.dim);
      delta_ = softmax_delta(x_.dout, forward.out);
      lse_ = std::move(forward.lse);
    }
    flash_backward_accumulate(x_.q, x_.k, x_.v, x_.dout, lse_, delta_, positions_, positions_, rows(), rows(), mask_,
                              dq_, dk_, dv_, options_);
  }
  // FLOPs of one call on the tile area (every tile is computed whole).
  double flops(bool backward) const {
    const double area = double(dims_.seq) * double(dims_.seq) * double(dims_.heads);
    return area * double((backward ? kBackwardFlopsPerPairPerDim : kForwardFlopsPerPairPerDim) * dims_.dim);
  }

 private:
  RowRange rows() const { return {0, dims_.seq}; }

  AttentionDims dims_;
  AttentionInputs<float> x_;
  std::vector<int64_t> positions_;
  MaskKind mask_;
  KernelOptions options_;
  SoftmaxState<float> acc_;
  Tensor<float> lse_, delta_, dq_, dk_, dv_;
};

struct KernelShape {
  int64_t n = 1024, heads = 4, dim = 64;
  bool masked = false;
  int threads = 1;                            // per call
  int forward_calls = 2, backward_calls = 1;  // timed, per worker and pass
};

// Kernel calls of one shape on `workers` threads at once — the regime of the simulator's ranks:
// every core busy with a rank's kernel, shared caches, memory bandwidth and clocks, and whatever
// else the machine runs at the time. The threads and their workloads live from one pass to the
// next, as a rank's thread lives from one step to the next (its OpenMP team, the kernel's
// per-thread buffers, its data: the first call pays for them, untimed). A pass starts its workers
// together (a barrier), and a worker's rate is its calls' FLOPs over their whole time (a mean, not
// the best call: the simulator's steps pay for every interruption too).
class KernelTeam {
 public:
  KernelTeam(int workers, const KernelShape& shape)
      : shape_(shape), rates_(static_cast<size_t>(workers)), sync_(workers) {
    for (size_t worker = 0; worker < rates_.size(); ++worker) threads_.emplace_back([this, worker] { work(worker); });
  }
  KernelTeam(const KernelTeam&) = delete;
  KernelTeam& operator=(const KernelTeam&) = delete;
  ~KernelTeam() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // One pass: the mean rate over the workers, of one call (shape.threads threads together).
  KernelRates pass() {
    std::unique_lock lock(mutex_);
    finished_ = 0;
    ++pass_;
    start_.notify_all();
    done_.wait(lock, [&] { return finished_ == rates_.size(); });
    KernelRates mean;
    const double workers = double(rates_.size());
    for (const KernelRates& r : rates_) mean.forward += r.forward / workers, mean.backward += r.backward / workers;
    return mean;
  }

 private:
  void work(size_t worker) {
    KernelWorkload workload(shape_.n, shape_.heads, shape_.dim, shape_.masked, shape_.threads);
    workload.forward();
    workload.backward();
    auto timed = [&](bool backward, int calls) {
      sync_.arrive_and_wait();
      const Clock::time_point start = Clock::now();
      for (int call = 0; call < calls; ++call) backward ? workload.backward() : workload.forward();
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      sync_.arrive_and_wait();  // no worker starts the next pass while another is still timing this one
      return workload.flops(backward) * calls / seconds;
    };
    int64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return stop_ || pass_ != seen; });
        if (stop_) return;
        seen = pass_;
      }
      const KernelRates rate{timed(false, shape_.forward_calls), timed(true, shape_.backward_calls)};
      std::lock_guard lock(mutex_);
      rates_[worker] = rate;
      if (++finished_ == rates_.size()) done_.notify_one();
    }
  }

  KernelShape shape_;
  std::vector<KernelRates> rates_;  // [worker], of the latest pass
  std::barrier<> sync_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  int64_t pass_ = 0;
  size_t finished_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// The thread counts the simulator gives a rank's kernel calls at P = 1, 2, 4, ... ranks
// (max(1, cores / P)), above one: each is measured; the model interpolates between them.
std::vector<int> thread_counts_to_measure(int cores) {
  std::vector<int> counts;
  for (int t = cores; t >= 2; t /= 2) counts.push_back(t);
  std::reverse(counts.begin(), counts.end());
  return counts;
}

// The kernel's rates: one single-threaded call on every core at once (P >= cores: one kernel
// thread per rank), on unmasked and on diagonal tiles; and calls on t threads, cores / t of them
// at once (P < cores), on enough heads that every thread has tasks, against t single-threaded
// calls. A multi-threaded call suffers more from an interruption (its threads wait for the one
// that was stopped), so the single- and multi-threaded passes alternate, in three rounds; each
// rate, and each scaling, is the median of the rounds' (one burst of another process's work
// spoils one round, not the figure; each round's own figure is a mean over its calls).
void measure_kernels(CpuCalibration& c) {
  KernelShape full_tiles;
  full_tiles.dim = c.head_dim;
  KernelTeam single(c.cores, full_tiles);
  struct Scaling {
    int threads;
    std::unique_ptr<KernelTeam> team;
    std::vector<double> forward, backward;  // per round
  };
  std::vector<Scaling> scalings;
  for (const int t : thread_counts_to_measure(c.cores)) {
    KernelShape shape = full_tiles;
    shape.threads = t;
    shape.heads = std::max<int64_t>(full_tiles.heads, t);
    const int calls_scale = static_cast<int>(t * full_tiles.heads / shape.heads);  // as long a pass as one thread's
    shape.forward_calls *= calls_scale, shape.backward_calls *= calls_scale;
    scalings.push_back({t, std::make_unique<KernelTeam>(c.cores / t, shape), {}, {}});
  }
  constexpr int kRounds = 3;
  constexpr int kOpenMpSettle = 20;                 // ms; libgomp spins for well under that by default
  std::vector<double> full_forward, full_backward;  // per round
  for (int round = 0; round < kRounds; ++round) {
    const KernelRates one = single.pass();
    full_forward.push_back(one.forward), full_backward.push_back(one.backward);
    for (Scaling& s : scalings) {
      const KernelRates many = s.team->pass();
      s.forward.push_back(many.forward / (s.threads * one.forward));
      s.backward.push_back(many.backward / (s.threads * one.backward));
      // An OpenMP team's threads spin for a while after its last region before they sleep: let
      // them, so that they do not take the cores from the next pass (no rank's kernel meets them).
      std::this_thread::sleep_for(std::chrono::milliseconds(kOpenMpSettle));
    }
  }
  c.forward_full_flops = median_of(full_forward);
  c.backward_full_flops = median_of(full_backward);
  for (const Scaling& s : scalings)
    c.thread_scaling.push_back({s.threads, median_of(s.forward), median_of(s.backward)});
  KernelShape diagonal_tiles = full_tiles;
  diagonal_tiles.n = kCpuKeyTile, diagonal_tiles.heads = 8, diagonal_tiles.masked = true;
  diagonal_tiles.forward_calls = 20, diagonal_tiles.backward_calls = 8;  // ~16x smaller calls
  KernelTeam diagonal(c.cores, diagonal_tiles);
  const KernelRates masked = diagonal.pass();
  c.forward_masked_flops = masked.forward;
  c.backward_masked_flops = masked.backward;
}

// ---- [queue and memory] ----------------------------------------------------------------------

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

// Writing memory the process never touched: each page faults in (and is zeroed) on its first
// write, which on a virtual machine costs microseconds — ten times a write to warm memory. Fresh
// pages straight from the kernel (mmap), as a new allocation of a few MiB gets them.
double measure_first_touch() {
  const size_t bytes = size_t{16} << 20;
  const double seconds = median_seconds(5, [&] {
    void* fresh = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED) throw std::runtime_error("cpu calibration: mmap of 16 MiB failed");
    std::memset(fresh, 1, bytes);
    munmap(fresh, bytes);
  });
  return double(bytes) / seconds;
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

// ---- [calibrate] -----------------------------------------------------------------------------

CpuCalibration calibrate_cpu(int64_t head_dim) {
  const Clock::time_point start = Clock::now();
  CpuCalibration c;
  c.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  c.head_dim = std::clamp<int64_t>(head_dim, 8, 512);
  measure_kernels(c);
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
  c.first_touch_Bps = measure_first_touch();
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

// ---- [preset] --------------------------------------------------------------------------------

Hardware cpu_hardware(const CpuCalibration& c) {
  Hardware hw;
  hw.name = "cpu";
  hw.description = "this machine running ringlab's simulator: " + std::to_string(c.cores) +
                   " cores shared by the rank threads, fp32 blockwise kernel, in-process queues";
  hw.element_bytes = 4;  // the simulator computes and sends fp32
  DeviceModel& d = hw.device;
  d.name = "blockwise CPU kernel (reference/flash_attention.cpp), per core";
  // "Peak" is the fastest of the four measured rates (the backward's full tiles can beat the
  // forward's per FLOP), so every efficiency is a fraction of it, as a machine file requires.
  d.peak_flops =
      std::max({c.forward_full_flops, c.forward_masked_flops, c.backward_full_flops, c.backward_masked_flops});
  d.forward_full_efficiency = c.forward_full_flops / d.peak_flops;
  d.forward_masked_efficiency = c.forward_masked_flops / d.peak_flops;
  d.backward_full_efficiency = c.backward_full_flops / d.peak_flops;
  d.backward_masked_efficiency = c.backward_masked_flops / d.peak_flops;
  d.q_tile = kCpuQueryTile;
  d.kv_tile = kCpuKeyTile;
  d.kernel_launch_s = c.kernel_call_s;
  d.memory_bandwidth_Bps = c.memory_bandwidth_Bps;
  d.first_touch_Bps = c.first_touch_Bps;
  d.shared_cores = c.cores;
  d.thread_scaling = c.thread_scaling;
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
  for (const ThreadScaling& s : c.thread_scaling) {
    std::snprintf(line, sizeof line,
                  "kernel on %lld threads = %.3f (forward), %.3f (backward) x %lld one-thread calls: measured, "
                  "cores/%lld such calls at once",
                  static_cast<long long>(s.threads), s.forward, s.backward, static_cast<long long>(s.threads),
                  static_cast<long long>(s.threads));
    hw.sources.emplace_back(line);
  }
  source("kernel call overhead", c.kernel_call_s * 1e6, "us", "measured on an 8-row block");
  source("queue copy", c.copy_bandwidth_Bps / 1e9, "GB/s", "measured: 16 MiB into a pooled payload, copy + checksum");
  source("queue checksum at the receiver", c.verify_bandwidth_Bps / 1e9, "GB/s", "measured on 16 MiB");
  source("queue latency", c.message_latency_s * 1e6, "us", "measured: half a round trip of a 1-float message");
  source("memory (elementwise add)", c.memory_bandwidth_Bps / 1e9, "GB/s moved", "measured on 16 MiB arrays");
  source("memory written for the first time", c.first_touch_Bps / 1e9, "GB/s",
         "measured: 16 MiB of fresh pages (page faults); a run pays it for each rank's peak memory");
  source("cores", c.cores, "", "std::thread::hardware_concurrency(); kernels use max(1, cores/P) threads");
  source("kernel tile", double(kCpuQueryTile), "x 256 rows", "reference/flash_attention.cpp kQueryTile x kKeyTile");
  return hw;
}

}  // namespace ringlab
