#!/usr/bin/env python3
"""A zig-zag causal ring-attention forward in PyTorch, checked by ringlab.verify.

The same loop as numpy_ring.py, with torch tensors and the zig-zag layout (rank r holds chunks r
and 2P - 1 - r of 2P, which balances causal work): ringlab.verify is told the layout, so a wrong
row is named with the rank that owns it under zig-zag.

    PYTHONPATH=build/python python3 exercises/python/torch_ring.py

Exit 0 when the ring is right, 1 when not, 77 (skipped) when PyTorch is not installed.
"""
import sys

try:
    import torch
except ImportError:
    print("skipped: PyTorch is not installed (Debian python3-torch, or pip install torch)")
    sys.exit(77)

import ringlab


def zigzag_positions(seq, ranks):
    chunk = seq // (2 * ranks)
    return [torch.cat([torch.arange(r * chunk, (r + 1) * chunk),
                       torch.arange((2 * ranks - 1 - r) * chunk, (2 * ranks - r) * chunk)]) for r in range(ranks)]


def ring_forward(q, k, v, ranks):
    B, S, H, D = q.shape
    positions = zigzag_positions(S, ranks)
    out = torch.zeros_like(q)
    lse = torch.full((B, H, S), float("-inf"), dtype=q.dtype)
    for r in range(ranks):
        rows = positions[r]
        acc_out, acc_lse = torch.zeros(B, len(rows), H, D, dtype=q.dtype), None
        for t in range(ranks):
            keys = positions[(r - t) % ranks]
            scores = torch.einsum("bqhd,bkhd->bhqk", q[:, rows], k[:, keys]) / D ** 0.5
            scores = scores.masked_fill(keys[None, None, None, :] > rows[None, None, :, None], float("-inf"))
            part_lse = torch.logsumexp(scores, dim=-1)  # -inf for a row that sees no key here
            weights = torch.exp(scores - torch.where(torch.isfinite(part_lse), part_lse, 0)[..., None])
            part_out = torch.einsum("bhqk,bkhd->bqhd", weights, v[:, keys])
            if acc_lse is None:
                acc_out, acc_lse = part_out, part_lse
                continue
            new_lse = torch.logaddexp(acc_lse, part_lse)
            safe = torch.where(torch.isfinite(new_lse), new_lse, 0)
            w_acc = torch.exp(acc_lse - safe).transpose(1, 2)[..., None]
            w_part = torch.exp(part_lse - safe).transpose(1, 2)[..., None]
            acc_out, acc_lse = w_acc * acc_out + w_part * part_out, new_lse
        out[:, rows] = acc_out
        lse[:, :, rows] = acc_lse
    return out, lse


def main():
    torch.manual_seed(3)
    ranks, (B, S, H, D) = 4, (1, 64, 2, 16)
    q, k, v = (torch.randn(B, S, H, D, dtype=torch.float64) for _ in range(3))
    out, lse = ring_forward(q, k, v, ranks)
    report = ringlab.verify(q.numpy(), k.numpy(), v.numpy(), out=out.numpy(), lse=lse.numpy(), ranks=ranks,
                            layout="zigzag", causal=True)
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
