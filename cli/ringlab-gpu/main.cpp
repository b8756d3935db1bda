// ringlab-gpu — see cli/ringlab-gpu/gpu_command.hpp. Under mpirun (and when built with MPI) every process
// runs one rank of gpu-nccl; otherwise one process runs everything.
#include <iostream>

#include "cli/ringlab-gpu/gpu_command.hpp"
#include "gpu/device.hpp"
#ifdef RINGLAB_WITH_MPI
#include "cli/ringlab-gpu/mpi_bootstrap.hpp"
#endif

int main(int argc, char** argv) {
  ringlab::gpu::request_hardware_queues();  // before any CUDA call: gpu-streams' 2 P streams, a queue each
#ifdef RINGLAB_WITH_MPI
  if (ringlab::gpu::launched_by_mpirun()) return ringlab::gpu::mpi_main(argc, argv);
#endif
  return ringlab::gpu::gpu_main(argc, argv, std::cout, std::cerr);
}
