"""NumPy side of the .npy interop test: writes inputs, and later checks ringlab's outputs.

  numpy_interop.py write DIR   q.npy k.npy v.npy (float32, GQA shapes) into DIR
  numpy_interop.py check DIR   compares DIR/out/out.npy and lse.npy with NumPy's own attention
Exit status 0 when the check passes; prints the max errors.
"""
import sys

import numpy as np

B, S, H, HKV, D = 2, 96, 4, 2, 16


def attention(q, k, v):
    """softmax(q k^T / sqrt(D)) v with a causal mask, in float64; q (B,S,H,D), k, v (B,S,HKV,D)."""
    group = H // HKV
    k = np.repeat(k, group, axis=2).astype(np.float64)
    v = np.repeat(v, group, axis=2).astype(np.float64)
    s = np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64), k) / np.sqrt(D)
    s = np.where(np.tril(np.ones((S, S), dtype=bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", p / l, v)
    lse = (m + np.log(l))[..., 0]
    return out, lse


def main():
    mode, directory = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(5)
    q = rng.standard_normal((B, S, H, D)).astype(np.float32)
    k = rng.standard_normal((B, S, HKV, D)).astype(np.float32)
    v = rng.standard_normal((B, S, HKV, D)).astype(np.float32)
    if mode == "write":
        for name, array in (("q", q), ("k", k), ("v", v)):
            np.save(f"{directory}/{name}.npy", array)
        return 0
    out = np.load(f"{directory}/out/out.npy")
    lse = np.load(f"{directory}/out/lse.npy")
    assert out.dtype == np.float32 and out.shape == (B, S, H, D), (out.dtype, out.shape)
    assert lse.shape == (B, H, S), lse.shape
    want_out, want_lse = attention(q, k, v)
    out_error = np.abs(out - want_out).max()
    lse_error = np.abs(lse - want_lse).max()
    print(f"max |out - numpy| = {out_error:.3e}, max |lse - numpy| = {lse_error:.3e}")
    return 0 if out_error < 1e-4 and lse_error < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
