#!/bin/bash
# As run on the GPU machine from the repository root, 2026-11-27 (a record, not a tool: scripts/gpu-bundle
# and DIR/run are the tools). OUT: the folder whose files were brought back; build-gpubundle*: the
# bundle scripts/gpu-bundle built for the call.
# Second device call: re-check what the first found (a test's init flag, the ladder's workspace),
# the fp16 SDPA table with room, ring steps under the new step definition, two full profiles.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
b="$here/build-gpubundle2"
N=$(timeout 30 python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
fb=/tmp/fallback; mkdir -p $fb
for l in $(LD_LIBRARY_PATH=$N ldd "$b/bin/ringlab-gpu" "$b/bin/gpu_tests" | awk '/not found/ {print $1}' | sort -u); do ln -sf "$b/lib/$l" $fb/$l; done
L="$N:$fb"
w=/tmp/wrap; mkdir -p $w
for f in "$b"/bin/*; do printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$L" "$f" > $w/$(basename $f); chmod +x $w/$(basename $f); done
export RINGLAB_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
log=$OUT/run2-log.txt
st() { local t=$1; shift; local s=$SECONDS; echo "=== $* (cap $t s)" | tee -a $log; timeout -k 5 $t "$@" >> $log 2>&1; echo "=== exit $? in $((SECONDS - s)) s" | tee -a $log; }
st 60 $w/gpu_tests 'gpu kernels: forward and backward vs the reference kernel\, every precision and D'
st 60 $w/gpu_tests 'gpu ladder: every version matches the reference'
st 30 $w/gpu_tests 'gpu kernels: unsupported sizes are refused with the fix'
st 40 $w/bench_gpu_ladder --seq 2048
st 100 $w/bench_gpu_ring --seq 8192 --write-hw $OUT/gpu-streams-machine-2.json
st 130 env -u LD_LIBRARY_PATH python3 "$b/sdpa_compare.py" --bench $w/bench_gpu_kernels --seqs 1024,16384 --dtype fp16
st 70 $w/bench_gpu_ring --seq 8192 --step-ranks 8 --hw $OUT/gpu-streams-machine-2.json --no-step-backward
sec="--set full"
s=$SECONDS; timeout -k 5 60 ncu -k regex:forward_fa2 -c 1 $sec env LD_LIBRARY_PATH="$L" $b/bin/ringlab-gpu run --ranks 1 --batch 16 --seq 1024 --heads 32 --dim 64 --causal > $OUT/ncu-fwd-d64-s1k-causal.txt 2>&1; echo "=== ncu forward: exit $? in $((SECONDS - s)) s" | tee -a $log
s=$SECONDS; timeout -k 5 80 ncu -k regex:backward_mma -c 1 $sec env LD_LIBRARY_PATH="$L" $b/bin/ringlab-gpu run --ranks 1 --batch 1 --seq 4096 --heads 16 --dim 128 --backward > $OUT/ncu-bwd-d128-s4k.txt 2>&1; echo "=== ncu backward: exit $? in $((SECONDS - s)) s" | tee -a $log
echo "---- summary"; grep -E "^=== |test cases|PASS|FAIL|@row" $log | head -80
