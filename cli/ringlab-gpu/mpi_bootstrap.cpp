#include "cli/ringlab-gpu/mpi_bootstrap.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cli/ringlab-gpu/gpu_command.hpp"

namespace ringlab::gpu {
namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

// Every rank's bytes to rank 0 (empty parts elsewhere). MPI counts are int: the lengths travel as
// 64-bit numbers, the bytes in rounds of MPI_Gatherv moving at most INT_MAX / size bytes per rank
// (INT_MAX in all) — so a rank's result may pass 2 GiB. Every rank takes part in the same number
// of rounds (set by the longest result).
std::vector<std::string> gather_to_rank0(const std::string& mine, int rank, int size) {
  const uint64_t length = mine.size();
  std::vector<uint64_t> lengths(static_cast<size_t>(size));
  MPI_Gather(&length, 1, MPI_UINT64_T, lengths.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  uint64_t longest = length;
  MPI_Allreduce(&length, &longest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  const uint64_t round = static_cast<uint64_t>(std::numeric_limits<int>::max() / size);
  std::vector<std::string> parts(rank == 0 ? static_cast<size_t>(size) : 0);
  for (size_t r = 0; r < parts.size(); ++r) parts[r].resize(lengths[r]);
  std::vector<int> counts(static_cast<size_t>(size)), displacements(static_cast<size_t>(size));
  std::string received;
  for (uint64_t offset = 0; offset < longest; offset += round) {
    const int count = static_cast<int>(std::min(round, length - std::min(length, offset)));
    if (rank == 0) {
      int total = 0;
      for (size_t r = 0; r < counts.size(); ++r) {
        counts[r] = static_cast<int>(std::min(round, lengths[r] - std::min(lengths[r], offset)));
        displacements[r] = total;
        total += counts[r];
      }
      received.resize(static_cast<size_t>(total));
    }
    MPI_Gatherv(mine.data() + std::min(length, offset), count, MPI_BYTE, received.data(), counts.data(),
                displacements.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
    for (size_t r = 0; r < parts.size(); ++r)
      if (counts[r] > 0)
        received.copy(parts[r].data() + offset, static_cast<size_t>(counts[r]), static_cast<size_t>(displacements[r]));
  }
  return parts;
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
  mp.all_agree = [](bool ok) {
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all != 0;
  };
  mp.broadcast = [](void* data, size_t bytes) {
    if (bytes > static_cast<size_t>(std::numeric_limits<int>::max())) std::abort();  // a unique id: 128 bytes
    MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
  };
  mp.gather = [rank, size](const std::string& mine) { return gather_to_rank0(mine, rank, size); };
  std::ostringstream discard;  // only rank 0 prints tables; errors print on every rank
  int status = gpu_main(argc, argv, rank == 0 ? std::cout : discard, std::cerr, &mp);
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}

}  // namespace ringlab::gpu
