"""A reference Ulysses context-parallel attention in plain PyTorch: two all-to-alls around one attention.

    python3 -m ringlab.conformance run --impl ringlab.conformance.ulysses:attention --nproc 4 DIR

Each rank holds its rows of every head, in whatever layout the harness sharded them. An all-to-all
gives each rank every row of H/P heads, the rows in rank order (rank 0's, then rank 1's, ...), not
in position order; the rank attends over the whole sequence with the mask taken from the gathered
rows' global positions (ctx.positions, ctx.doc_ids), so every layout, document packing, window and
padding is handled alike. A second all-to-all returns each rank its own rows of every head. Where P
does not divide the heads, zero heads pad them to a multiple of P and their results are dropped;
where P does not divide the K/V heads, K and V are first repeated to one head per query head (GQA).
The backward runs through autograd: an all-to-all's gradient is the same exchange the other way.
Compute is float32 for fp32/bf16/fp16 inputs (float64 for float64); out is returned in the input
dtype, lse in float32.

The class's small methods (mask, gathered_positions, kv_for_heads, heads_back) are where real
implementations go wrong; the test suite subclasses them to make broken variants.
"""
from __future__ import annotations

from typing import List

import torch
import torch.distributed as dist

from .reference import gather_rows, position_mask


class _AllToAll(torch.autograd.Function):
    """Rows along dim 0: `send[j]` of them go to rank j, `recv[i]` arrive from rank i, in rank order."""

    @staticmethod
    def forward(fctx, x, send: List[int], recv: List[int], group):
        fctx.send, fctx.recv, fctx.group = send, recv, group
        if len(send) == 1:
            return x.clone()
        out = x.new_empty((sum(recv),) + tuple(x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), output_split_sizes=recv, input_split_sizes=send, group=group)
        return out

    @staticmethod
    def backward(fctx, grad):
        if len(fctx.send) == 1:
            return grad.clone(), None, None, None
        back = grad.new_empty((sum(fctx.send),) + tuple(grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), output_split_sizes=fctx.send, input_split_sizes=fctx.recv,
                               group=fctx.group)
        return back, None, None, None


class UlyssesAttention:
    def __init__(self, q, k, v, ctx):
        self.ctx = ctx
        self.rank, self.world, self.group = ctx.rank, ctx.world_size, ctx.group
        self.compute = torch.float64 if q.dtype == torch.float64 else torch.float32
        self.heads, self.kv_heads = q.shape[2], k.shape[2]
        if self.heads % self.kv_heads:
            raise ValueError(f"H = {self.heads} is not a multiple of HKV = {self.kv_heads}")
        self.group_size = self.heads // self.kv_heads
        P = self.world
        self.padded_heads = -(-self.heads // P) * P
        # Every rank's row count, positions and documents: the gathered rows' metadata, in rank order.
        self.sizes, pos, doc = gather_rows(q, ctx)
        self.pos = torch.cat(pos)
        self.doc = torch.cat(doc) if ctx.doc_ids is not None else None

    # ---- the points where implementations go wrong --------------------------------------------
    def mask(self, qpos, qdoc, kpos, kdoc):
        """(Sq, Sk) bool: which keys each query sees (padding rows have position -1)."""
        return position_mask(self.ctx, qpos, qdoc, kpos, kdoc)

    def gathered_positions(self):
        """The global position of each gathered row (rank order), -1 for padding."""
        return self.pos

    def kv_for_heads(self, t):
        """K or V with one head per query head: head h reads K/V head h // (H / HKV)."""
        return t.repeat_interleave(self.group_size, dim=2) if self.group_size > 1 else t

    def heads_back(self, y, rows):
        """(B, S_all, h, D) of this rank's h heads -> (B, rows, P h, D): its own rows of every head."""
        P, (B, _, h, D) = self.world, y.shape
        flat = _AllToAll.apply(y.permute(1, 0, 2, 3), self.sizes, [rows] * P, self.group)
        return flat.reshape(P, rows, B, h, D).permute(2, 1, 0, 3, 4).reshape(B, rows, P * h, D)

    # ---- the exchange and the attention ---------------------------------------------------------
    def pad_heads(self, t):
        extra = self.padded_heads - t.shape[2]
        if extra == 0:
            return t
        return torch.cat([t, t.new_zeros(t.shape[:2] + (extra,) + t.shape[3:])], dim=2)

    def heads_to(self, x):
        """(B, rows, P h, D), this rank's rows of every head -> (B, S_all, h, D): every row of its h heads."""
        P, (B, rows, heads, D) = self.world, x.shape
        h = heads // P
        flat = x.reshape(B, rows, P, h, D).permute(2, 1, 0, 3, 4).reshape(P * rows, B, h, D)
        return _AllToAll.apply(flat, [rows] * P, self.sizes, self.group).permute(1, 0, 2, 3)

    def forward(self, q, k, v):
        P, rows = self.world, q.shape[1]
        q, k, v = q.to(self.compute), k.to(self.compute), v.to(self.compute)
        if self.kv_heads % P or self.heads % P:  # K/V heads cannot be split over P as they are: one per query
            k, v = self.pad_heads(self.kv_for_heads(k)), self.pad_heads(self.kv_for_heads(v))
        qh, kh, vh = self.heads_to(self.pad_heads(q)), self.heads_to(k), self.heads_to(v)
        group = qh.shape[2] // kh.shape[2]
        if group > 1:
            kh, vh = kh.repeat_interleave(group, dim=2), vh.repeat_interleave(group, dim=2)
        pos = self.gathered_positions()
        mask = self.mask(pos, self.doc, pos, self.doc)
        empty = ~mask.any(dim=1)  # rows that see no key: out 0, lse -inf, no gradient
        scores = torch.einsum("bqhd,bkhd->bhqk", qh, kh) * self.ctx.scale
        scores = scores.masked_fill(~mask, float("-inf")).masked_fill(empty[:, None], 0.0)
        lse = torch.logsumexp(scores, dim=-1)
        p = torch.exp(scores - lse.unsqueeze(-1)) * (~empty)[:, None].to(scores.dtype)
        out = self.heads_back(torch.einsum("bhqk,bkhd->bqhd", p, vh), rows)[:, :, : self.heads]
        lse = lse.masked_fill(empty, float("-inf"))
        B, h = lse.shape[0], lse.shape[1]
        lse_rows = _AllToAll.apply(lse.detach().permute(2, 0, 1), self.sizes, [rows] * P, self.group)
        lse_rows = lse_rows.reshape(P, rows, B, h).permute(2, 0, 3, 1).reshape(B, P * h, rows)[:, : self.heads]
        return out, lse_rows


def attention(q, k, v, ctx, ulysses_class=UlyssesAttention):
    """The harness's contract: fn(q, k, v, ctx) -> (out, lse), backward through autograd."""
    out, lse = ulysses_class(q, k, v, ctx).forward(q, k, v)
    return out.to(q.dtype), lse.float()
