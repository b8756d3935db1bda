// Calibrating the cost model on measured step times: the machine of P virtual ranks on one GPU
// (the gpu-streams executor), the per-step tables bench_gpu_ring prints, and a least-squares fit
// of the device model's kernel efficiencies to them.
//
// A step's time is what bench_gpu_ring measures: the span of the step's events over all ranks on
// the device; on the model's side, the dry executor's end of the step (the last rank's clock)
// minus the end of the step before (the phase's start for the first step).
//
// The fit (fit_device): the unknowns are, per pass the data hold, the efficiency on masked tiles,
// DeviceModel::block_rows' factor at each block size the data show, and the short_queries /
// short_keys factors where such calls occur. The base machine's own block_rows points are anchors,
// kept as they are (gpu_streams_machine's: the block the peak was measured on, at 1); without
// anchors, the largest block seen is fixed at 1 and the efficiency on unmasked tiles is fitted
// instead (the scale needs one or the other). The anchors come from a forward kernel, so with
// backward steps the backward efficiency on unmasked tiles is always fitted. A fitted block size
// gets a backward factor of its own only when the backward data also show an anchored size (a
// whole_block_backward table at the peak's rows): without one, that factor and the backward
// efficiency are the same unknown, and the factor stays at the base's value. It is never the
// forward's: on the H100 the backward's speed hardly changes with the block size (whole
// forward+backward runs at P = 1..8) where the forward's falls by 15% at 2048 rows. It
// minimises the sum over steps of log(predicted / measured)^2 with the dry executor itself as the
// model (Nelder-Mead in log space, deterministic), so what is fitted is exactly what `--hw FILE`
// will predict. An unknown the data do not constrain (no masked tile, one row count) is left at
// the base machine's value and not listed as fitted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/hardware.hpp"
#include "sim/plan/plan.hpp"

namespace ringlab {

// One measured per-step table: a schedule, the phase its steps belong to, seconds per step.
struct StepTable {
  std::string schedule;  // "ring zigzag, causal+skip"
  PlanSpec spec;
  std::string phase;             // the plan's phase name, "ring forward"
  std::vector<double> measured;  // seconds, step 0, 1, ...
  double flops_per_s = 0;        // the table's one-kernel FLOP rate ("simple model" line); 0 = not given
  double copy_Bps = 0;           // the table's device-to-device copy bandwidth; 0 = not given
};

// The backward of one whole block on the device: the P = 1 runs of a ring schedule, forward+backward
// and forward alone (seconds, medians), give one backward step, their difference, as a table of
// phase "ring backward" at P = 1, named "<schedule>, P=1 backward". It anchors the backward's speed
// at the whole sequence's block, as the forward's one-kernel rate anchors the forward's (see
// fit_device). `spec`: the schedule's, any P.
StepTable whole_block_backward(const std::string& schedule, PlanSpec spec, double forward_s, double both_s);

// The per-step tables in bench_gpu_ring's output (other lines are ignored), e.g.
//   per-step times: ring zigzag, causal+skip, P=4, B=1 S=8192 H=32 HKV=8 D=128, forward (...)
//   phase                   step    measured      simple meas/simp     dry run  meas/dry        GFLOP
//   ring forward               0       0.696       0.402      1.73       0.471      1.48       137.51
//   simple model: max(step FLOPs / 341.6 TFLOP/s, step bytes / 1439 GB/s), both measured in this run
// A table of a forward+backward run ("..., forward+backward (...)") lists its phases one after the
// other; each phase becomes a StepTable of its own. When the output also holds the ring-efficiency
// table ("efficiency on ...: T(one kernel, P=1) / T(P virtual ranks), B=1 S=8192 ..."), the T(1)
// columns of its ring schedules give whole_block_backward tables, one with the causal mask and
// one without (the first schedule of each), appended after the per-step tables. `element_bytes` is
// the run's dtype size (2: bf16). Throws UsageError naming `source` and the line when a table
// cannot be read, or when there is no per-step table.
std::vector<StepTable> parse_step_tables(const std::string& text, const std::string& source, int64_t element_bytes = 2);

// bench_gpu_ring's last table, one kernel by block size: P = 1 forward runs of the contiguous ring
// at S/8 .. S, full and causal, e.g.
//   one kernel by block size (P = 1 runs, median of 5; held out from the fit)
//         S  causal   measured    TFLOP/s    of peak   predicted     error
//      1024      no      0.086      198.9      0.565       0.068    -21.0%
// Each row becomes a table of phase "ring forward" at P = 1 with the efficiency table's dims at that
// S, named "one kernel, S=1024, full" (or "causal"). `sms`: the SM count the efficiency table's title
// names ("(sm_90, 132 SMs, 79.2 GiB)"), 0 when it names none. No such table: no rows. Throws
// UsageError naming `source` and the line when a row cannot be read.
struct KernelRows {
  int64_t sms = 0;
  std::vector<StepTable> tables;
};
KernelRows parse_kernel_rows(const std::string& text, const std::string& source, int64_t element_bytes = 2);

// The machine of P virtual ranks on one GPU from two measured figures: the FLOP rate of one
// whole kernel (efficiencies 1 against it) and the device-to-device copy bandwidth, P ranks
// sharing it, 5 us launches and message latency, elementwise work at twice the copy rate.
// shared_device: the ranks share the device by processor sharing (ranks_per_device = P); false:
// each rank gets 1/P of it throughout (shared_cores = 1), the model bench_gpu_ring used first.
// peak_rows > 0 (with shared_device): the query rows of the kernel the FLOP rate was measured on,
// an anchor of DeviceModel::block_rows at 1 (the fit then finds the other row counts' factors).
Hardware gpu_streams_machine(double flops_per_s, double copy_Bps, int64_t ranks, int64_t element_bytes,
                             const std::string& description, bool shared_device, int64_t peak_rows = 0);

// The model's time per step of `phase` (seconds, step 0, 1, ...) on `hardware`.
std::vector<double> predicted_steps(const PlanSpec& spec, const std::string& phase, const Hardware& hardware);

struct FitResult {
  Hardware hardware;                // the base with the fitted figures (and a source line for each)
  std::vector<std::string> fitted;  // "forward_full = 0.84", one per unknown the data constrain
  int points = 0;                   // measured steps used
  double max_abs_error = 0;         // max |predicted / measured - 1| over them
};

// Fits the base machine's kernel efficiencies to the tables (see the head comment). Throws
// UsageError when the tables hold no step or a step's plan cannot be built.
FitResult fit_device(const Hardware& base, const std::vector<StepTable>& tables);

// The forward kernels' floor (DeviceModel::forward_floor_s) on a fitted machine, from one-kernel
// rows: rows.sms SMs, ringlab's forward kernel's 2 thread blocks of 128 queries per SM (gpu/
// README.md), and the start-up that minimises the rows' squared log errors (a golden-section
// search over 0 .. 1 ms); everything else of `fitted` kept. Only the rows whose longest thread
// block outlasts their work constrain it (small S); the others it leaves alone. Throws UsageError
// without rows or without an SM count.
FitResult fit_floor(const Hardware& fitted, const KernelRows& rows);

}  // namespace ringlab
