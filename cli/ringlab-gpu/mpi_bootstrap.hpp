// The mpirun bootstrap of gpu-nccl (built when MPI is found): MPI only carries NCCL's unique id
// from rank 0 to the others (MPI_Bcast, as nccl-tests do) and gathers the ranks' results to
// rank 0 for verification; every byte of attention traffic goes through NCCL.
#pragma once

namespace ringlab::gpu {

// True when this process was started by mpirun / srun (their environment variables are set):
// only then is MPI initialised, so a plain `ringlab-gpu run` never touches MPI.
bool launched_by_mpirun();

// MPI_Init, gpu_main with the MultiProcess hooks (only rank 0 prints tables), MPI_Finalize.
// Every process returns rank 0's exit status.
int mpi_main(int argc, char** argv);

}  // namespace ringlab::gpu
