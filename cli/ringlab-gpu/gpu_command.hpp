// `ringlab-gpu`: the GPU executors behind the same command line as `ringlab run`.
//
//   ringlab-gpu run [the flags of ringlab run] [--executor streams|nccl] [--dtype bf16|fp16|fp32]
//   ringlab-gpu info                         devices, CUDA, NCCL, and what gpu-nccl can run here
//   mpirun -np P ringlab-gpu run --executor nccl ...   one process per rank (when built with MPI)
//
// run verifies against exact attention (float64) computed on the inputs rounded to --dtype, with
// the tolerances of gpu/dtype.hpp, and prints the same tables, JSON and trace as `ringlab run`
// (trace times from CUDA events). Exit status: 0 verified, 1 mismatch, 2 bad input or usage (also
// "no CUDA device"), 3 deadlock or communication fault.
#pragma once

#include <iosfwd>

#include "executors/gpu/multi_process.hpp"

namespace ringlab::gpu {

// The whole command line: parses argv, runs, writes tables or JSON to `out` and one-line errors
// to `err`, and returns the exit status. Never exits the process itself.
int gpu_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
             const MultiProcess* multi_process = nullptr);

}  // namespace ringlab::gpu
