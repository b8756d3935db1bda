// How one process of a multi-process run reaches the others (mpirun): the hooks the gpu-nccl
// processes executor needs, filled in by the command's MPI bootstrap.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ringlab::gpu {

// How one `ringlab-gpu` process reaches the others under mpirun; filled in by
// cli/ringlab-gpu/mpi_bootstrap.cpp, absent (nullptr) in a single process.
struct MultiProcess {
  int rank = 0, size = 1;
  int local_rank = 0;                      // rank among the processes of this machine: picks the device
  std::function<bool(bool ok)> all_agree;  // true when every rank says ok
  std::function<void(void* data, size_t bytes)> broadcast;                  // from rank 0
  std::function<std::vector<std::string>(const std::string& mine)> gather;  // to rank 0 (empty elsewhere)
};

}  // namespace ringlab::gpu
