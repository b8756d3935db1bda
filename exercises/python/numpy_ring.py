#!/usr/bin/env python3
"""A ring-attention forward as a student would write it in NumPy, checked by ringlab.verify.

P ranks are simulated by a loop: rank r holds the queries, keys and values of its tokens; at step t
it attends its queries to the block that started on rank r - t and merges the partial result with
the online-softmax rule. ringlab.verify compares the result with exact attention and, when it is
wrong, says which rows, which ranks and steps, and why.

    PYTHONPATH=build/python python3 exercises/python/numpy_ring.py            # the right ring
    PYTHONPATH=build/python python3 exercises/python/numpy_ring.py --bug stop-early
    PYTHONPATH=build/python python3 exercises/python/numpy_ring.py --bug local-mask

Exit 0 when the ring is right (or, with --bug, when ringlab finds the bug), 1 otherwise.
"""
import argparse
import sys

import numpy as np

import ringlab


def block_attention(q, k, v, q_pos, k_pos, causal):
    """Attention of q (B, n, H, D) to one block k, v (B, m, H, D): normalised out and lse (B, H, n)."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        scores = np.where(k_pos[None, None, None, :] <= q_pos[None, None, :, None], scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    safe_m = np.where(np.isfinite(m), m, 0.0)  # a row that sees no key stays empty, never NaN
    p = np.exp(scores - safe_m)
    l = p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", p / np.where(l > 0, l, 1.0), v)
    lse = np.where(l[..., 0] > 0, safe_m[..., 0] + np.log(np.where(l[..., 0] > 0, l[..., 0], 1.0)), -np.inf)
    return out, lse


def merge(out_a, lse_a, out_b, lse_b):
    """The online-softmax merge of two normalised partial results."""
    lse = np.logaddexp(lse_a, lse_b)
    safe = np.where(np.isfinite(lse), lse, 0.0)
    w_a = np.where(np.isfinite(lse_a), np.exp(lse_a - safe), 0.0)
    w_b = np.where(np.isfinite(lse_b), np.exp(lse_b - safe), 0.0)
    out = w_a.transpose(0, 2, 1)[..., None] * out_a + w_b.transpose(0, 2, 1)[..., None] * out_b
    return out, lse


def ring_forward(q, k, v, ranks, causal, bug=None):
    """Each rank's output, assembled in global token order (contiguous layout)."""
    B, S, H, D = q.shape
    n = S // ranks
    positions = [np.arange(r * n, (r + 1) * n) for r in range(ranks)]
    out = np.zeros_like(q)
    lse = np.full((B, H, S), -np.inf)
    for r in range(ranks):
        rows = positions[r]
        acc_out = np.zeros((B, n, H, D))
        acc_lse = np.full((B, H, n), -np.inf)
        steps = ranks - 1 if bug == "stop-early" else ranks
        for t in range(steps):
            g = (r - t) % ranks  # the block that started on rank g reaches rank r at step t
            keys = positions[g]
            q_pos = np.arange(n) if bug == "local-mask" else rows
            part_out, part_lse = block_attention(q[:, rows], k[:, keys], v[:, keys], q_pos, keys, causal)
            acc_out, acc_lse = merge(acc_out, acc_lse, part_out, part_lse)
        out[:, rows] = acc_out
        lse[:, :, rows] = acc_lse
    return out, lse


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=["stop-early", "local-mask"], help="run a wrong ring and let ringlab find it")
    parser.add_argument("--ranks", type=int, default=4)
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    B, S, H, D = 1, 64, 2, 16
    q, k, v = (rng.standard_normal((B, S, H, D)) for _ in range(3))
    out, lse = ring_forward(q, k, v, args.ranks, causal=True, bug=args.bug)

    report = ringlab.verify(q, k, v, out=out, lse=lse, ranks=args.ranks, causal=True)
    print(report)
    if args.bug is None:
        return 0 if report.ok else 1
    # A wrong ring: ringlab must say so, and say why.
    expected = {"stop-early": "missing", "local-mask": "mask"}[args.bug]
    found = not report.ok and expected in report.cause
    print(f"ringlab {'found' if found else 'did NOT find'} the {args.bug} bug")
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
