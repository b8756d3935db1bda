#!/bin/bash
# As run on the GPU machine from the repository root, 2026-11-27 (a record, not a tool: scripts/gpu-bundle
# and DIR/run are the tools). OUT: the folder whose files were brought back; build-gpubundle*: the
# bundle scripts/gpu-bundle built for the call.
# One device call: the bundle's whole check, then Nsight Compute on the short causal shape.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
b="$here/build-gpubundle"
s=$SECONDS
"$b/run" --out "$OUT" --budget "${BUDGET:-420}" > "$OUT/run-log.txt" 2>&1
echo "bundle run: exit $? in $((SECONDS - s)) s"
# Libraries for ringlab-gpu under ncu (ncu itself keeps a clean environment; it follows the child).
N=$(timeout 30 python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
fb=/tmp/fallback; mkdir -p $fb
for l in $(LD_LIBRARY_PATH=$N ldd "$b/bin/ringlab-gpu" | awk '/not found/ {print $1}'); do ln -sf "$b/lib/$l" $fb/$l; done
L="$N:$fb"
if command -v ncu >/dev/null; then
  s=$SECONDS
  timeout -k 5 100 ncu -k 'regex:forward_fa2_kernel|backward_mma_kernel' -c 2 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis \
    env LD_LIBRARY_PATH="$L" "$b/bin/ringlab-gpu" run --ranks 1 --batch 16 --seq 1024 --heads 32 --dim 64 \
    --causal --backward > "$OUT/ncu-short-d64-causal.txt" 2>&1
  echo "ncu: exit $? in $((SECONDS - s)) s"
fi
echo "---- report (head)"
head -c 9000 "$OUT/report.md"
