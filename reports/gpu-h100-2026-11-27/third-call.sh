#!/bin/bash
# As run on the GPU machine, 2026-11-27 (a record, not a tool). ring_old: bench_gpu_ring at 25a337b+fixes
# (events created per record); ring_new: the same with Timeline pooling its events (not kept: see the
# report); kernels_new: bench_gpu_kernels with its inputs made once per table. OUT: the folder brought back.
# Third device call: gpu-streams with events created per record (old) and pooled (new), side by side.
set -u
d=$(cd "$(dirname "$0")" && pwd)
N=$(timeout 20 python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$N
for b in ring_old ring_new; do
  s=$SECONDS; timeout -k 3 65 $d/$b --seq 8192 --no-step-backward > $OUT/$b.txt 2>&1
  echo "=== $b: exit $? in $((SECONDS - s)) s"; grep -E "^(ring|allgather|ulysses).* (2|4|8) +fwd" $OUT/$b.txt
done
s=$SECONDS; timeout -k 3 35 $d/kernels_new --dims 64,128 --seqs 1024,4096,16384 > $OUT/kernels_new.txt 2>&1
echo "=== kernels_new: exit $? in $((SECONDS - s)) s"
