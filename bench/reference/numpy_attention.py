"""softmax(Q K^T * scale) V in float32 with NumPy: the baseline of bench_kernel.

Prints one line: 'numpy seconds=<best of --repeat> blas=<library NumPy calls>'.
Run with Debian's python3 (/usr/bin/python3), which has python3-numpy.
"""
import argparse
import time

import numpy as np


def blas_name():
    try:
        info = np.__config__.get_info("blas_opt_info")  # NumPy < 1.26
        libraries = info.get("libraries", [])
    except Exception:  # noqa: BLE001 - the config API differs across NumPy versions
        libraries = []
    import os
    for path in ("/etc/alternatives/libblas.so.3-x86_64-linux-gnu",):
        if os.path.exists(path):
            return os.path.realpath(path).split("/")[-2]  # e.g. 'openblas-pthread' or 'blas'
    return ",".join(libraries) or "unknown"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    shape = (args.heads, args.seq, args.dim)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
    scale = np.float32(1.0 / np.sqrt(args.dim))
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        s = (q @ k.transpose(0, 2, 1)) * scale  # (H, S, S)
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        out = s @ v
        best = min(best, time.perf_counter() - start)
    assert np.isfinite(out).all()
    print(f"numpy seconds={best:.6f} blas={blas_name()}")


if __name__ == "__main__":
    main()
