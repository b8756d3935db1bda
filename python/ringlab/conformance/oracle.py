"""Exact attention in float64 on NumPy arrays, for any boolean mask: the diagnosis's what-if engine.

q, out, dout, dq: (B, S, H, D); k, v, dk, dv: (B, S, HKV, D); lse: (B, H, S), natural log. A row that
sees no key has out = 0 and lse = -inf, and gives no gradient.
"""
from __future__ import annotations

import numpy as np


def _heads(h: int, hkv: int):
    group = h // hkv
    return [(i, i // group) for i in range(h)]


def forward(q, k, v, mask, scale):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    b, s, h, d = q.shape
    out = np.zeros_like(q)
    lse = np.full((b, h, s), -np.inf)
    any_key = mask.any(axis=1)
    for bi in range(b):
        for hi, kh in _heads(h, k.shape[2]):
            scores = np.where(mask, scale * q[bi, :, hi] @ k[bi, :, kh].T, -np.inf)
            mx = np.where(any_key, scores.max(axis=1), 0.0)
            p = np.exp(scores - mx[:, None])
            total = p.sum(axis=1)
            safe = np.where(any_key, total, 1.0)
            out[bi, :, hi] = (p / safe[:, None]) @ v[bi, :, kh]
            lse[bi, hi] = np.where(any_key, mx + np.log(safe), -np.inf)
    return out, lse


def backward(q, k, v, dout, mask, scale, within=None):
    """Gradients of sum(out * dout). `within` (a sub-mask): only the contributions of those (query, key)
    pairs, still normalised by the full mask's softmax - one block's share of the ring's gradients."""
    q, k, v, dout = (np.asarray(a, dtype=np.float64) for a in (q, k, v, dout))
    out, lse = forward(q, k, v, mask, scale)
    part = mask if within is None else (mask & within)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    b, _, h, _ = q.shape
    for bi in range(b):
        for hi, kh in _heads(h, k.shape[2]):
            l = np.where(np.isfinite(lse[bi, hi]), lse[bi, hi], 0.0)
            scores = scale * q[bi, :, hi] @ k[bi, :, kh].T
            p = np.where(part, np.exp(scores - l[:, None]), 0.0)
            dv[bi, :, kh] += p.T @ dout[bi, :, hi]
            dp = dout[bi, :, hi] @ v[bi, :, kh].T
            delta = (dout[bi, :, hi] * out[bi, :, hi]).sum(axis=1)
            ds = p * (dp - delta[:, None])
            dq[bi, :, hi] = scale * ds @ k[bi, :, kh]
            dk[bi, :, kh] += scale * ds.T @ q[bi, :, hi]
    return dq, dk, dv
