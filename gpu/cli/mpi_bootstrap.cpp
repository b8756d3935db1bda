#include "gpu/cli/mpi_bootstrap.hpp"

#include <mpi.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/cli/gpu_command.hpp"

namespace ringlab::gpu {
namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

}  // namespace

bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "SLURM_STEP_NUM_TASKS"})
    if (std::getenv(name)) return true;
  return false;
}

int mpi_main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MultiProcess mp;
  mp.rank = rank;
  mp.size = size;
  mp.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", env_int("SLURM_LOCALID", rank)));
  mp.broadcast = [](void* data, size_t bytes) {
    MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
  };
  mp.gather = [rank, size](const std::string& mine) {
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<size_t>(size)), displacements(static_cast<size_t>(size));
    MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::string all;
    if (rank == 0) {
      int total = 0;
      for (int r = 0; r < size; ++r)
        displacements[static_cast<size_t>(r)] = total, total += lengths[static_cast<size_t>(r)];
      all.resize(static_cast<size_t>(total));
    }
    MPI_Gatherv(mine.data(), length, MPI_BYTE, all.data(), lengths.data(), displacements.data(), MPI_BYTE, 0,
                MPI_COMM_WORLD);
    std::vector<std::string> parts;
    if (rank == 0) {
      for (int r = 0; r < size; ++r)
        parts.push_back(all.substr(static_cast<size_t>(displacements[static_cast<size_t>(r)]),
                                   static_cast<size_t>(lengths[static_cast<size_t>(r)])));
    }
    return parts;
  };
  std::ostringstream discard;  // only rank 0 prints tables; errors print on every rank
  int status = gpu_main(argc, argv, rank == 0 ? std::cout : discard, std::cerr, &mp);
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}

}  // namespace ringlab::gpu
