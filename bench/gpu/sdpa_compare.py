#!/usr/bin/env python3
"""ringlab's production kernels side by side with PyTorch's scaled_dot_product_attention on the
same GPU, in the same invocation: TFLOP/s forward and backward for every (D, S, causal) of
bench_gpu_kernels, against the flash backend and (where this PyTorch has it) cuDNN, with the
ratios and FlashAttention-2 parity's targets: forward >= 1.0x flash (geomean over the shapes) with
no shape under 0.85x, backward >= 0.9x (geomean) with none under 0.75x. ringlab's forward is one
launch (the fused init and finalize, as SDPA is); the staged forward (init + attention + finalize,
what a ring step that merges into earlier steps runs) is shown beside it, timed in the same run.

  python3 bench/gpu/sdpa_compare.py --bench build-cuda/bench/gpu/bench_gpu_kernels [--strict]

FLOPs are counted as the FlashAttention papers (and bench_gpu_kernels) count them: 4 S^2 D H B
per forward, halved when causal, backward 2.5x the forward. Shapes: B x S = 16K tokens, H x D =
2048 (bench_gpu_kernels' defaults; pass --tokens/--hidden to change both). Times are medians of
CUDA-event timings after warm-up. Exit status: 0, or with --strict 1 when a target is missed (or a check failed);
2 when PyTorch or a GPU is missing (ringlab's own table is still printed when it can run).
"""
import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
import tempfile


def flops(b, h, s, d, causal, backward):
    forward = 4.0 * s * s * d * h * b / (2 if causal else 1)
    return 2.5 * forward if backward else forward


def time_ms(torch, fn, warmup, iterations):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure_sdpa(torch, backend, b, h, s, d, causal, dtype, warmup, iterations):
    """(forward ms, backward ms) of SDPA restricted to one backend, or (None, None, why)."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    shape = (b, h, s, d)  # SDPA's layout; ringlab's is (B, S, H, D): the work is the same
    q = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    dout = torch.randn(shape, device="cuda", dtype=dtype)
    try:
        with sdpa_kernel([backend]):
            with torch.no_grad():
                forward_ms = time_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                     warmup, iterations)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            backward_ms = time_ms(
                torch, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), warmup, iterations)
        return forward_ms, backward_ms, ""
    except RuntimeError as error:  # backend not available for this shape / GPU / build
        return None, None, str(error).splitlines()[0][:80]
    finally:
        del q, k, v, dout
        torch.cuda.empty_cache()


def side_by_side(rows, measured, dtype_name, emit=print):
    """Prints ringlab's rows beside SDPA's (measured: (D, S, causal) -> {backend: (fwd ms, bwd ms, why)})
    and returns how many targets were missed: a shape under its floor, a failed check, a geomean
    under its target."""
    # FlashAttention-2 parity: the geomean of the ratios to flash over the shapes, and a floor that
    # no single shape may fall under.
    targets = {"fwd": (1.0, 0.85), "bwd": (0.9, 0.75)}
    header = "%4s %6s %6s %4s | %9s %9s %9s %9s | %7s %7s %7s  %s" % (
        "D", "S", "causal", "pass", "ringlab", "staged", "flash", "cudnn", "/flash", "/cudnn", "floor", "verdict")
    emit("\nTFLOP/s, %s (FLOPs = 4 S^2 D H B, causal /2, bwd 2.5x); staged: ringlab's 3-launch forward" % dtype_name)
    emit(header)
    emit("%4s %6s %6s %4s | %9s %9s %9s %9s | %7s %7s %7s" % ("", "", "", "", "[TFLOP/s]", "[TFLOP/s]", "[TFLOP/s]",
                                                                "[TFLOP/s]", "", "", "[x]"))
    ratios_by_direction = {}
    missed, met, compared = 0, 0, 0
    notes = set()
    for row in rows:
        d, s, causal, which = int(row["D"]), int(row["S"]), int(row["causal"]), row["pass"]
        b, h = int(row["batch"]), int(row["heads"])
        ours = float(row["tflops"])
        work = flops(b, h, s, d, bool(causal), which == "bwd")
        theirs = {}
        for name, (forward_ms, backward_ms, why) in measured[(d, s, causal)].items():
            ms = forward_ms if which == "fwd" else backward_ms
            theirs[name] = work / (ms * 1e-3) / 1e12 if ms else None
            if why:
                notes.add("%s unavailable for some shapes: %s" % (name, why))
        flash, cudnn = theirs.get("flash"), theirs.get("cudnn")
        ratio_flash = ours / flash if flash else None
        ratio_cudnn = ours / cudnn if cudnn else None
        target = targets[which][1]
        staged_ms = row.get("staged_ms") or ""
        staged = work / (float(staged_ms) * 1e-3) / 1e12 if staged_ms else None
        if row["checked"] != "1":
            verdict = "CHECK FAILED"  # bench_gpu_kernels' check before timing: the speed means nothing
            missed += 1
        elif ratio_flash is None:
            verdict = "no flash"
        else:
            compared += 1
            met += 1 if ratio_flash >= target else 0
            missed += 0 if ratio_flash >= target else 1
            verdict = "met" if ratio_flash >= target else "MISSED"
            ratios_by_direction.setdefault(which, []).append(ratio_flash)

        def fmt(x, pattern):
            return pattern % x if x is not None else "-"

        emit("%4d %6d %6s %4s | %9.1f %9s %9s %9s | %7s %7s %7.2f  %s" % (
            d, s, "yes" if causal else "no", which, ours, fmt(staged, "%.1f"), fmt(flash, "%.1f"), fmt(cudnn, "%.1f"),
            fmt(ratio_flash, "%.2f"), fmt(ratio_cudnn, "%.2f"), target, verdict))
    for note in sorted(notes):
        emit("note: " + note)
    emit("-" * len(header))
    for which in ("fwd", "bwd"):  # one summary row per direction for scripts/bench
        ratios = ratios_by_direction.get(which, [])
        if ratios:
            geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            mean_target, floor = targets[which]
            ok = geomean >= mean_target and min(ratios) >= floor
            missed += 0 if geomean >= mean_target else 1
            emit("@row|gpu kernels|%s %s: ringlab TFLOP/s / PyTorch SDPA flash TFLOP/s, geomean (min) of %d shapes|"
                 "%.2fx (%.2fx)|>= %.2fx (%.2fx)|%s" % (which, dtype_name, len(ratios), geomean, min(ratios),
                                                       mean_target, floor, "met" if ok else "MISSED"))
    emit("%s: %d of %d shapes above the floor (forward geomean >= %.2fx flash, none under %.2fx; backward "
         ">= %.2fx, none under %.2fx)" % (("PASS" if missed == 0 else "FAIL", met, compared) + targets["fwd"] +
                                         targets["bwd"]))
    return missed


def self_test():
    """The verdicts without a GPU: synthetic rows against synthetic SDPA times. Each case must end
    as stated, or the self-test fails (exit 1)."""
    def rows_for(fwd_ratio, bwd_ratio, checked="1"):
        # Two shapes; SDPA takes 1 ms each way, so ringlab's TFLOP/s are ratio x SDPA's.
        rows, measured = [], {}
        for i, s in enumerate((1024, 4096)):
            b, h, d = 16384 // s, 32, 64
            measured[(d, s, 1)] = {"flash": (1.0, 1.0, "")}
            for which, ratio in (("fwd", fwd_ratio[i]), ("bwd", bwd_ratio[i])):
                work = flops(b, h, s, d, True, which == "bwd")
                tflops = ratio * work / 1e-3 / 1e12
                rows.append({"D": str(d), "S": str(s), "batch": str(b), "heads": str(h), "causal": "1",
                             "pass": which, "tflops": str(tflops), "checked": checked,
                             "staged_ms": "2.0" if which == "fwd" else ""})
        return rows, measured

    cases = [  # (what, forward ratios, backward ratios, checked, expected verdict)
        ("at parity", (1.0, 1.1), (0.9, 0.95), "1", "PASS"),
        ("a forward geomean under 1.0x, no shape under its floor", (0.9, 1.0), (0.9, 0.95), "1", "FAIL"),
        ("a backward shape under 0.75x, geomean met", (1.0, 1.1), (0.74, 1.2), "1", "FAIL"),
        ("a failed check, ratios met", (1.0, 1.1), (0.9, 0.95), "0", "FAIL"),
    ]
    failures = 0
    for what, fwd, bwd, checked, expected in cases:
        lines = []
        rows, measured = rows_for(fwd, bwd, checked)
        missed = side_by_side(rows, measured, "bf16", lines.append)
        verdict = lines[-1].split(":")[0]
        if verdict != expected or (missed == 0) != (expected == "PASS"):
            failures += 1
            print("self-test: %s: got %s (missed %d), expected %s" % (what, verdict, missed, expected))
            print("\n".join(lines))
    print("sdpa_compare self-test: %d of %d cases as expected" % (len(cases) - failures, len(cases)))
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", help="path to bench_gpu_kernels")
    parser.add_argument("--self-test", action="store_true", help="check the verdicts on synthetic rows (no GPU)")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.bench:
        parser.error("--bench PATH is required (the bench_gpu_kernels binary), or --self-test")

    # 1. ringlab, through its own benchmark (which checks every configuration before timing it).
    with tempfile.TemporaryDirectory() as tmp:
        rows_path = os.path.join(tmp, "ringlab.csv")
        command = [args.bench, "--dims", args.dims, "--seqs", args.seqs, "--tokens", str(args.tokens), "--hidden",
                   str(args.hidden), "--dtype", args.dtype, "--warmup", str(args.warmup), "--iterations",
                   str(args.iterations), "--csv", rows_path]
        print("$ " + " ".join(command), flush=True)
        status = subprocess.run(command).returncode
        if not os.path.exists(rows_path):
            print("sdpa_compare: bench_gpu_kernels produced no rows (exit %d)" % status)
            return 2
        with open(rows_path) as f:
            rows = list(csv.DictReader(f))

    # 2. PyTorch on the same GPU.
    try:
        import torch
        from torch.nn.attention import SDPBackend
    except ImportError as error:
        print("\nsdpa_compare: PyTorch is not importable (%s); install torch with CUDA to compare" % error)
        return 2
    if not torch.cuda.is_available():
        print("\nsdpa_compare: torch.cuda.is_available() is False; nothing to compare on")
        return 2
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    backends = [("flash", SDPBackend.FLASH_ATTENTION)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        backends.append(("cudnn", SDPBackend.CUDNN_ATTENTION))
    print("\nPyTorch %s, %s, cuDNN %s" % (torch.__version__, torch.cuda.get_device_name(0),
                                         torch.backends.cudnn.version()))

    measured = {}
    for row in rows:
        key = (int(row["D"]), int(row["S"]), int(row["causal"]))
        if key in measured:
            continue
        b, h = int(row["batch"]), int(row["heads"])
        d, s, causal = key[0], key[1], bool(key[2])
        measured[key] = {name: measure_sdpa(torch, backend, b, h, s, d, causal, dtype, args.warmup, args.iterations)
                         for name, backend in backends}

    # 3. Side by side.
    missed = side_by_side(rows, measured, args.dtype)
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
