#!/usr/bin/env python3
"""The GPU bundle's run script (scripts/gpu-bundle-run) on its paths that need no device, with a
fake bundle: fake binaries (shell scripts) in bin/, and a fake nvidia-smi, compute-sanitizer and
python3 first on PATH. No CUDA build is needed (CI never builds a bundle).

  python3 tests/scripts/test_gpu_bundle_run.py --root .

Checks: scripts/gpu-bundle refuses a missing or non-empty folder before building; no driver
(nvidia-smi absent) and no GPU (nvidia-smi fails) are one clear line and exit 2,
with no report; with a (fake) device, a failing case and a case whose filter matches nothing are
reported as FAIL and not counted as passed, a name with commas is escaped so that it runs, the
report and at most a handful of files are written, and the exit status is 1.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

FAKE_GPU_TESTS = r"""#!/bin/bash
# A stand-in for gpu_tests: four cases, one failing, one whose name has commas (it runs only when
# the filter escapes them, as Catch2 needs), one whose filter never matches (as an unescaped name).
if [ "$1" = "--list-test-names-only" ]; then
  printf 'alpha passes\nbeta, with, commas\ngamma fails\ndelta matches nothing\n\n'
  exit 4
fi
case "$1" in
  "alpha passes") echo "All tests passed (3 assertions in 1 test case)"; exit 0 ;;
  'beta\, with\, commas') echo "All tests passed (1 assertion in 1 test case)"; exit 0 ;;
  "gamma fails") echo "test.cpp:9: FAILED: CHECK( 1 == 2 )"; echo "test cases: 1 | 1 failed"; exit 1 ;;
  *) echo "No test cases matched '$1'"; echo "==============="; echo "No tests ran"; exit 0 ;;
esac
"""

FAKE_RINGLAB_GPU = r"""#!/bin/bash
echo "fake ringlab-gpu $*"
while [ $# -gt 0 ]; do
  if [ "$1" = "--trace" ]; then echo '{"traceEvents": []}' > "$2"; fi
  shift
done
exit 0
"""

# The ring benchmark's fake also prints one efficiency row, its value the hardware queues it ran
# under, so that the queues' A/B summary has something to put side by side.
FAKE_BENCH = r"""#!/bin/bash
echo "fake $(basename "$0") $* (queues ${CUDA_DEVICE_MAX_CONNECTIONS:-unset})"
if [ "$(basename "$0")" = bench_gpu_ring ]; then
  echo "@row|gpu ring|ring zigzag, causal+skip P=8 fwd: T(P=1) / T(P)|${CUDA_DEVICE_MAX_CONNECTIONS:-0}.5% (1 / 2 ms)|>= 85%|MISSED"
  while [ $# -gt 0 ]; do [ "$1" = --write-hw ] && echo '{"name": "fake"}' > "$2"; shift; done
fi
exit 0
"""

FAKE_NVIDIA_SMI_OK = r"""#!/bin/bash
if [ "$1" = "-L" ]; then echo "GPU 0: Fake H100 (UUID: GPU-0)"; exit 0; fi
echo "name, memory.total [MiB], driver_version, clocks.max.sm [MHz]"
echo "Fake H100, 81559 MiB, 580.00, 1980 MHz"
"""

FAKE_NVIDIA_SMI_FAILS = r"""#!/bin/bash
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
exit 9
"""

FAKE_SANITIZER = r"""#!/bin/bash
echo "========= COMPUTE-SANITIZER"
echo "========= ERROR SUMMARY: 0 errors"
exit 0
"""

# python3 on the fake PATH: PyTorch is missing, but the bundle's own scripts run.
FAKE_PYTHON = r"""#!/bin/bash
case "$1" in *ncu_digest.py) exec /usr/bin/python3 "$@" ;; esac
echo 'No module named torch' >&2
exit 1
"""

# A stand-in for Nsight Compute. Profiling (-o REPORT): says which kernel and program it was given
# and writes REPORT.ncu-rep. Importing (-i REPORT.ncu-rep): the details page with headline metrics
# the way ncu prints them, the raw page (CSV: metric names, units, one launch) and the source page
# (CSV: one row per SASS instruction).
FAKE_NCU = r"""#!/bin/bash
kernel="" rep="" in="" page=details
while [ $# -gt 0 ]; do
  case "$1" in
    -k) kernel="$2"; shift 2 ;;
    -o) rep="$2"; shift 2 ;;
    -i) in="$2"; shift 2 ;;
    --page) page="$2"; shift 2 ;;
    --set | -c | --print-source) shift 2 ;;
    -f | --csv) shift ;;
    *) break ;;
  esac
done
if [ -n "$rep" ]; then
  echo "==PROF== Profiling $kernel of $*"
  echo "fake report" > "$rep.ncu-rep"
  exit 0
fi
[ -f "$in" ] || { echo "==ERROR== cannot open $in"; exit 1; }
case "$page" in
  details)
    echo "    Duration                         us       551.55"
    echo "    Registers Per Thread             register/thread             240"
    echo "    Achieved Occupancy                        %        12.39"
    echo "    L2 Hit Rate                                      %        61.93" ;;
  raw)
    echo '"ID","Kernel Name","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"'
    echo '"","","ratio","ratio","ratio"'
    echo '"0","kernel","2.40","1.10","0.50"' ;;
  source)
    echo '"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed","Thread Instructions Executed"'
    echo '"0x100","HMMA.16816.F32.BF16 R0, R4, R8, R0 ;","120","90","1000","32000"'
    echo '"0x110","@!P0 LDSM.16.M88.4 R4, [R2] ;","40","30","500","16000"'
    echo '"0x120","FMUL R3, R3, 0.5 ;","10","5","1500","48000"' ;;
esac
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


def make_bundle(root, where, gpu_tests=FAKE_GPU_TESTS):
    os.makedirs(os.path.join(where, "bin"))
    shutil.copy(os.path.join(root, "scripts", "gpu-bundle-run"), os.path.join(where, "run"))
    shutil.copy(os.path.join(root, "bench", "gpu", "ncu_digest.py"), os.path.join(where, "ncu_digest.py"))
    write(os.path.join(where, "bin", "gpu_tests"), gpu_tests)
    write(os.path.join(where, "bin", "ringlab-gpu"), FAKE_RINGLAB_GPU)
    for name in ("bench_gpu_kernels", "bench_gpu_ladder", "bench_gpu_ring"):
        write(os.path.join(where, "bin", name), FAKE_BENCH)
    write(os.path.join(where, "BUILD.txt"), "fake bundle for the run script's test\n")
    write(os.path.join(where, "STATIC.txt"), "| backward_mma_kernel<__nv_bfloat16, 128> | 3848 | 2393 | 320 |\n")


def fake_path(tmp, nvidia_smi, ncu=False):
    tools = os.path.join(tmp, "tools-" + ("none" if nvidia_smi is None else str(hash(nvidia_smi) & 0xFFFF)) +
                         ("-ncu" if ncu else ""))
    os.makedirs(tools, exist_ok=True)
    if nvidia_smi is not None:
        write(os.path.join(tools, "nvidia-smi"), nvidia_smi)
    if ncu:
        write(os.path.join(tools, "ncu"), FAKE_NCU)
    write(os.path.join(tools, "compute-sanitizer"), FAKE_SANITIZER)
    write(os.path.join(tools, "python3"), FAKE_PYTHON)
    return tools + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")


def run(bundle, path, out, budget=200, extra=(), env_extra=None):
    env = dict(os.environ, PATH=path, RINGLAB_NCCL_DIR=os.path.dirname(out), **(env_extra or {}))
    env.pop("LD_LIBRARY_PATH", None)
    return subprocess.run(["bash", os.path.join(bundle, "run"), "--out", out, "--budget", str(budget), *extra],
                          env=env, capture_output=True, text=True, timeout=120)


failures = []


def check(condition, what, detail=""):
    if not condition:
        failures.append(what + (": " + detail if detail else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="the ringlab source tree")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    with tempfile.TemporaryDirectory(prefix="ringlab-bundle-test-") as tmp:
        bundle = os.path.join(tmp, "bundle")
        make_bundle(root, bundle)

        # No driver: nvidia-smi is not on PATH (only where this machine has none itself).
        if shutil.which("nvidia-smi") is None:
            out = os.path.join(tmp, "out-nodriver")
            r = run(bundle, fake_path(tmp, None), out)
            check(r.returncode == 2, "no driver: exit 2", f"got {r.returncode}: {r.stderr}")
            check(r.stderr.count("\n") == 1 and "no NVIDIA driver" in r.stderr, "no driver: one clear line", r.stderr)
            check(not os.path.exists(os.path.join(out, "report.md")), "no driver: no report")

        # No GPU: nvidia-smi fails.
        out = os.path.join(tmp, "out-nogpu")
        r = run(bundle, fake_path(tmp, FAKE_NVIDIA_SMI_FAILS), out)
        check(r.returncode == 2, "no GPU: exit 2", f"got {r.returncode}: {r.stderr}")
        check(r.stderr.count("\n") == 1 and "no NVIDIA GPU visible" in r.stderr and "NVIDIA-SMI has failed" in r.stderr,
              "no GPU: one clear line naming nvidia-smi's complaint", r.stderr)
        check(not os.path.exists(os.path.join(out, "report.md")), "no GPU: no report")

        # scripts/gpu-bundle's own usage errors come before any build: no folder, a folder not empty.
        builder = os.path.join(root, "scripts", "gpu-bundle")
        r = subprocess.run(["bash", builder], capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and "name the folder" in r.stderr, "gpu-bundle without DIR: exit 2", r.stderr)
        r = subprocess.run(["bash", builder, bundle], capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and "is not empty" in r.stderr and r.stderr.count("\n") == 1,
              "gpu-bundle into a folder that is not empty: exit 2, one line", r.stderr)

        # A bad option: exit 2, one line.
        r = subprocess.run(["bash", os.path.join(bundle, "run"), "--budget", "soon"], capture_output=True, text=True)
        check(r.returncode == 2 and "--budget" in r.stderr, "bad --budget: exit 2 naming it", r.stderr)

        # A (fake) device: every case in its own process, failures reported and not counted.
        out = os.path.join(tmp, "out-device")
        r = run(bundle, fake_path(tmp, FAKE_NVIDIA_SMI_OK), out)
        report_path = os.path.join(out, "report.md")
        check(r.returncode == 1, "a failing case: exit 1", f"got {r.returncode}: {r.stdout[-400:]} {r.stderr[-400:]}")
        check(os.path.exists(report_path), "the report is written")
        report = open(report_path).read() if os.path.exists(report_path) else ""
        check("device test cases: 2 passed, 2 failed" in report, "2 passed, 2 failed", report[:600])
        check("ok  " in report and "beta, with, commas" in report and "FAIL  " not in report.split("beta, with, commas")[0][-40:],
              "the name with commas runs (escaped filter)", report[:1500])
        check("gamma fails (exit 1)" in report, "the failing case is listed with its exit status", report[:1500])
        check("delta matches nothing (the filter matched no case)" in report,
              "a filter that matches nothing is a failure, not a pass", report[:1500])
        check("**FAIL**" in report, "the verdict is FAIL", report[:400])
        check("FAILED: CHECK( 1 == 2 )" in report, "the failing case's output is in the report")
        check("compute-sanitizer" in report and "memcheck-d128: exit 0" in report, "the sanitizers ran", report[-3000:])
        check("fake bench_gpu_ring --seq 8192" in report, "the speed tables ran", report[-3000:])
        ab = "fake bench_gpu_ring --seq 8192 --ranks 8 --forward-only --no-steps (queues "
        check(ab + "8)" in report and ab + "32)" in report, "the hardware queues' A/B ran at 8, then 32 queues",
              report[-4000:])
        check(re.search(r"ring zigzag, causal\+skip P=8 fwd +8\.5% +32\.5%", report) is not None,
              "the A/B's summary puts each schedule's two efficiencies side by side", report[-4000:])
        check(re.search(r"fake bench_gpu_ring --seq 16384 --ranks 8 --step-ranks 8 --forward-only --hw \S*"
                        r"gpu-streams-machine\.json", report) is not None,
              "the fitted machine file predicts S = 16384 out of sample", report[-4000:])
        check("PyTorch with CUDA is not importable" in report, "no PyTorch: said so, kernel table alone")
        files = sorted(os.listdir(out))
        check(len(files) <= 5, "at most a handful of files", str(files))
        check("ring-zigzag-p8.trace.json" in files, "the trace is kept", str(files))
        if "details.tar.gz" in files:
            with tarfile.open(os.path.join(out, "details.tar.gz")) as t:
                names = t.getnames()
            check("fail-1.txt" in names and "fail-2.txt" in names, "each failing case's output is archived", str(names))
        else:
            check(False, "details.tar.gz is written", str(files))

        # All passing: exit 0 and PASS (the negative of the above: the same script can pass).
        passing = FAKE_GPU_TESTS.replace('printf \'alpha passes\\nbeta, with, commas\\ngamma fails\\ndelta matches nothing\\n\\n\'',
                                         'printf \'alpha passes\\nbeta, with, commas\\n\'')
        check(passing != FAKE_GPU_TESTS, "the passing fake differs")
        bundle2 = os.path.join(tmp, "bundle2")
        make_bundle(root, bundle2, passing)
        out = os.path.join(tmp, "out-pass")
        r = run(bundle2, fake_path(tmp, FAKE_NVIDIA_SMI_OK), out)
        report = open(os.path.join(out, "report.md")).read() if os.path.exists(os.path.join(out, "report.md")) else ""
        check(r.returncode == 0, "all passing: exit 0", f"got {r.returncode}: {report[:800]}")
        check("**PASS**" in report and "device test cases: 2 passed, 0 failed" in report, "all passing: PASS", report[:600])
        check("Nsight Compute" not in report and not any(f.startswith("ncu-") for f in os.listdir(out)),
              "without --profile: no profiles", str(os.listdir(out)))
        check("## The kernels as compiled" in report and "backward_mma_kernel<__nv_bfloat16, 128> | 3848" in report,
              "the bundle's static counts are in the report", report[-600:])

        # --profile: one forward and one backward launch under ncu, each report in a file of its own
        # and its headline lines (not the rest) in the report; still PASS.
        out = os.path.join(tmp, "out-profile")
        r = run(bundle2, fake_path(tmp, FAKE_NVIDIA_SMI_OK, ncu=True), out, extra=["--profile"])
        report = open(os.path.join(out, "report.md")).read() if os.path.exists(os.path.join(out, "report.md")) else ""
        check(r.returncode == 0 and "**PASS**" in report, "--profile: exit 0, PASS", f"{r.returncode}: {report[:600]}")
        for name, kernel, shape in (("forward", "regex:forward_fa2", "--seq 1024 --heads 32 --dim 64 --causal"),
                                    ("backward", "regex:backward_mma", "--seq 4096 --heads 16 --dim 128 --backward")):
            path = os.path.join(out, f"ncu-{name}.txt")
            text = open(path).read() if os.path.exists(path) else ""
            check(f"Profiling {kernel} of" in text and "ringlab-gpu run --ranks 1" in text and shape in text,
                  f"--profile: ncu-{name}.txt profiles {kernel} at its shape", text[:300])
            # ncu_digest.py's tables from the report's raw and source pages: the stall reasons largest
            # first, the opcodes by executed count (3000 in all, one HMMA), the hot spots by samples.
            digest = text.split("---- ncu_digest.py ----")[-1] if "---- ncu_digest.py ----" in text else ""
            check(digest.find("wait") < digest.find("short_scoreboard") < digest.find("barrier") and
                  "(sum)                       4.00" in digest, f"--profile: ncu-{name}.txt's stall reasons", digest[:600])
            check("3,000 in all" in digest and "instructions per tensor-core instruction: 3.00" in digest and
                  digest.find("FMUL") < digest.find("HMMA") < digest.find("LDSM"),
                  f"--profile: ncu-{name}.txt's instructions by opcode", digest[:900])
            hot = digest.split("SASS hot spots")[-1]
            check(hot.find("HMMA.16816") < hot.find("LDSM") < hot.find("FMUL") and "70.6%" in hot,
                  f"--profile: ncu-{name}.txt's hot spots", hot[:600])
        section = report.split("Nsight Compute: forward")[-1] if "Nsight Compute: forward" in report else ""
        check("Registers Per Thread" in section and "Achieved Occupancy" in section and "L2 Hit Rate" not in section
              and "instructions per tensor-core instruction" in section and "HMMA.16816" not in section,
              "--profile: the headline lines in the report, not the whole profile", section[:600])
        check(len(os.listdir(out)) <= 7 and "ring-contiguous-p4.trace.json" in os.listdir(out),
              "--profile: still a handful of files, the contiguous trace among them", str(os.listdir(out)))
        # An ncu that writes no report: the profile stage fails, said in the report.
        out = os.path.join(tmp, "out-profile-no-report")
        broken = os.path.join(tmp, "ncu-no-report")
        write(broken, "#!/bin/bash\necho '==ERROR== the profiling failed'\nexit 3\n")
        r = run(bundle2, fake_path(tmp, FAKE_NVIDIA_SMI_OK), out, extra=["--profile"], env_extra={"RINGLAB_NCU": broken})
        report = open(os.path.join(out, "report.md")).read() if os.path.exists(os.path.join(out, "report.md")) else ""
        check(r.returncode == 1 and "Nsight Compute: backward" in report.split("**FAIL**")[-1].split("##")[0] and
              "no report written (ncu exit 3)" in open(os.path.join(out, "ncu-backward.txt")).read(),
              "--profile with a failing ncu: FAIL, exit 1", f"{r.returncode}: {report[:600]}")
        # Asked for but no ncu: said so, and the check itself still passes.
        out = os.path.join(tmp, "out-profile-no-ncu")
        r = run(bundle2, fake_path(tmp, FAKE_NVIDIA_SMI_OK), out, extra=["--profile"],
                env_extra={"RINGLAB_NCU": os.path.join(tmp, "no-such-ncu")})
        report = open(os.path.join(out, "report.md")).read() if os.path.exists(os.path.join(out, "report.md")) else ""
        check(r.returncode == 0 and "_not run: ncu not found" in report, "--profile without ncu: said, exit 0",
              f"{r.returncode}: {report[-600:]}")

    if failures:
        for f in failures:
            print("FAILED:", f)
        return 1
    print("gpu-bundle run script: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
