// gpu-nccl with one process per rank (under mpirun): the executor behind
// `mpirun -np P ringlab-gpu run --executor nccl`. Each process runs its own rank with
// run_nccl_rank (nccl_executor.hpp); the results travel to rank 0 as bytes, and rank 0 alone
// verifies and reports. Every rank passes through the same collectives whatever fails where, so
// a failure on one rank is reported, never a hang.
#pragma once

#include <memory>

#include "executors/gpu/executor.hpp"
#include "executors/gpu/multi_process.hpp"

namespace ringlab::gpu {

std::unique_ptr<Executor> make_nccl_processes_executor(GpuRunOptions options, const MultiProcess& mp);

}  // namespace ringlab::gpu
