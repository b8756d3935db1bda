// The `cpu` preset: this machine measured, so that the cost model describes ringlab's own
// simulator (executors/sim/sim_executor.hpp) — P rank threads time-sharing the cores, each kernel call on
// max(1, cores/P) threads, messages copied into queues by the sending thread.
//
// What is measured (about a second on two cores, once per process and head dimension):
//   * the blockwise kernel of reference/flash_attention.hpp as the rank threads run it: one
//     single-threaded call on every core at once, forward and backward, on tiles computed whole
//     (no mask) and on tiles the causal mask cuts through — FLOP/s on the tile area, per core, the
//     mean over the calls (a run pays for every interruption, not only the best call's time);
//   * the same kernel on t = cores, cores/2, ... >= 2 threads per call (the simulator's threads
//     per rank at P = 1, 2, ...), cores/t calls at once, against t single-threaded calls: how far
//     from linear the kernel scales, measured rather than assumed;
//   * the per-call overhead of a tiny kernel call;
//   * the queue: a send's copy into a pooled payload (copy and checksum, sim/ranks/message.hpp
//     make_payload), the receiver's checksum pass, and the latency of a small message through a
//     2-rank world;
//   * memory bandwidth of an elementwise add (what dK/dV accumulation does), and the rate of
//     writing memory never touched before (page faults: what a run pays once for its peak memory
//     — all of it in `ringlab run`, a fresh process; a process that runs the simulator again and
//     again reuses part of it);
//   the copies and the add on 16 MiB, out of cache, as the simulator's data mostly is.
// P > cores time-shares the cores: a rank gets cores/P of one, with no loss measured for the
// switching (the simulator's kernel does as much work per CPU second at 4 rank threads per core
// as at one). Not modelled: thread wake-ups, the scheduler's placement of the first steps, and the
// other processes of a busy machine beyond what the calibration itself met
// (bench/cost/bench_cpu_model measures how close the model comes).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cost/hardware.hpp"

namespace ringlab {

struct CpuCalibration {
  int cores = 1;                    // std::thread::hardware_concurrency()
  int64_t head_dim = 64;            // D the kernel was measured at
  double forward_full_flops = 0;    // FLOP/s per core on unmasked tiles (4 D per pair)
  double forward_masked_flops = 0;  //                  on tiles cut by the causal mask
  double backward_full_flops = 0;   // (10 D per pair)
  double backward_masked_flops = 0;
  std::vector<ThreadScaling> thread_scaling;  // calls on t = cores, cores/2, ... >= 2 threads
  double kernel_call_s = 0;                   // overhead of one kernel call
  double copy_bandwidth_Bps = 0;              // a send's copy into a pooled queue payload
  double verify_bandwidth_Bps = 0;            // the receiver's checksum pass
  double message_latency_s = 0;               // one small message, send to receive, through the queues
  double memory_bandwidth_Bps = 0;            // bytes moved (read + written) per second, elementwise add
  double first_touch_Bps = 0;                 // bytes per second written to pages never touched (page faults)
  double seconds_spent = 0;                   // how long measuring took
};

// Measures now (never cached).
CpuCalibration calibrate_cpu(int64_t head_dim);
// Measures on the first call for this head dimension in the process, then returns the same
// figures (a cache of measurements, so that one command measures once).
CpuCalibration cached_cpu_calibration(int64_t head_dim);

// The `cpu` hardware from measured figures.
Hardware cpu_hardware(const CpuCalibration& calibration);

}  // namespace ringlab
