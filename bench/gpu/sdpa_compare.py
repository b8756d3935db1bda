#!/usr/bin/env python3
"""ringlab's production kernels side by side with PyTorch's scaled_dot_product_attention on the
same GPU, in the same invocation: TFLOP/s forward and backward for every (D, S, causal) of
bench_gpu_kernels, against the flash backend and (where this PyTorch has it) cuDNN, with the
ratios and the targets of the GPU issue: forward >= 0.8x flash, backward >= 0.6x flash.

  python3 bench/gpu/sdpa_compare.py --bench build-cuda/bench/gpu/bench_gpu_kernels [--strict]

FLOPs are counted as the FlashAttention papers (and bench_gpu_kernels) count them: 4 S^2 D H B
per forward, halved when causal, backward 2.5x the forward. Shapes: B x S = 16K tokens, H x D =
2048 (bench_gpu_kernels' defaults; pass --tokens/--hidden to change both). Times are medians of
CUDA-event timings after warm-up. Exit status: 0, or with --strict 1 when a target is missed;
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True, help="path to bench_gpu_kernels")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

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
    targets = {"fwd": 0.8, "bwd": 0.6}
    header = "%4s %6s %6s %4s | %9s %9s %9s | %7s %7s %7s  %s" % (
        "D", "S", "causal", "pass", "ringlab", "flash", "cudnn", "/flash", "/cudnn", "target", "verdict")
    print("\nTFLOP/s, %s (FLOPs = 4 S^2 D H B, causal /2, bwd 2.5x)" % args.dtype)
    print(header)
    print("%4s %6s %6s %4s | %9s %9s %9s | %7s %7s %7s" % ("", "", "", "", "[TFLOP/s]", "[TFLOP/s]", "[TFLOP/s]",
                                                            "", "", "[x]"))
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
        target = targets[which]
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

        print("%4d %6d %6s %4s | %9.1f %9s %9s | %7s %7s %7.1f  %s" % (
            d, s, "yes" if causal else "no", which, ours, fmt(flash, "%.1f"), fmt(cudnn, "%.1f"),
            fmt(ratio_flash, "%.2f"), fmt(ratio_cudnn, "%.2f"), target, verdict))
    for note in sorted(notes):
        print("note: " + note)
    print("-" * len(header))
    for which in ("fwd", "bwd"):  # one summary row per direction for scripts/bench
        ratios = ratios_by_direction.get(which, [])
        if ratios:
            geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            print("@row|gpu kernels|%s %s: ringlab TFLOP/s / PyTorch SDPA flash TFLOP/s, geomean (min) of %d shapes|"
                  "%.2fx (%.2fx)|>= %.1fx|%s" % (which, args.dtype, len(ratios), geomean, min(ratios), targets[which],
                                                "met" if min(ratios) >= targets[which] else "MISSED"))
    print("%s: %d of %d comparisons meet the target (forward >= 0.8x flash, backward >= 0.6x flash)"
          % ("PASS" if missed == 0 else "FAIL", met, compared))
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
