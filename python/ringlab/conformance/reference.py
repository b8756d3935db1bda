"""A reference context-parallel attention in plain PyTorch: a ring of point-to-point messages.

    python3 -m ringlab.conformance run --impl ringlab.conformance.reference:attention --nproc 4 DIR

Each rank holds its rows of Q, K, V in whatever layout the harness sharded them (zig-zag by
default); K/V blocks travel around the ring (rank r sends to r + 1 and receives from r - 1) with
isend/irecv posted before the step's compute, so communication overlaps it. The mask is computed
from global positions (ctx.positions, ctx.doc_ids), so every layout, document packing, window and
padding is handled by the same code; a block that the mask hides entirely is skipped. The forward
keeps a running (out, lse) per row, merged in log space (never exp of an unshifted logit); the
backward recomputes each block's probabilities from the saved lse, and the dK/dV accumulators of a
block travel with that block and take one extra hop home after the last step. Ranks may hold
different numbers of rows (torch.chunk's uneven split). Compute and accumulation are float32 for
fp32/bf16/fp16 inputs (float64 for float64); out is returned in the input dtype, lse in float32.

The class's small methods (mask, merge, backward_kv, dkv_peers, accumulate) are the points where a
real implementation's mistakes live; the test suite subclasses them to make broken variants.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

KV_TAG, DKV_TAG = 11, 12


def gather_rows(q, ctx):
    """Every rank's row count, and its rows' positions and documents (None without documents), from an
    all_gather on the process group's device (NCCL collectives take CUDA tensors only)."""
    dev, world = q.device, ctx.world_size
    sizes = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([q.shape[1]], dtype=torch.int64, device=dev), group=ctx.group)
    sizes = [int(s) for s in sizes]
    mine = torch.full((2, max(sizes)), -1, dtype=torch.int64, device=dev)
    mine[0, : q.shape[1]] = ctx.positions.to(dev)
    if ctx.doc_ids is not None:
        mine[1, : q.shape[1]] = ctx.doc_ids.to(dev)
    everyone = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(everyone, mine, group=ctx.group)
    pos = [everyone[r][0, : sizes[r]] for r in range(world)]
    doc = [everyone[r][1, : sizes[r]] if ctx.doc_ids is not None else None for r in range(world)]
    return sizes, pos, doc


def position_mask(ctx, qpos, qdoc, kpos, kdoc):
    """(Sq, Sk) bool: which keys each query sees, by global position (padding rows: -1) and document."""
    m = (qpos[:, None] >= 0) & (kpos[None, :] >= 0)
    if qdoc is not None:
        m &= qdoc[:, None] == kdoc[None, :]
    diff = qpos[:, None] - kpos[None, :]
    if ctx.causal:
        m &= diff >= 0
    if ctx.window > 0:
        m &= (diff < ctx.window) if ctx.causal else (diff.abs() < ctx.window)
    return m


class RingAttention:
    def __init__(self, q, k, v, ctx):
        self.ctx = ctx
        self.rank, self.world = ctx.rank, ctx.world_size
        self.group = ctx.group
        self.compute = torch.float64 if q.dtype == torch.float64 else torch.float32
        self.heads, self.kv_heads = q.shape[2], k.shape[2]
        if self.heads % self.kv_heads:
            raise ValueError(f"H = {self.heads} is not a multiple of HKV = {self.kv_heads}")
        self.group_size = self.heads // self.kv_heads
        # Every rank's row metadata (positions and documents), once: the mask of any block is known.
        self.sizes, self.pos, self.doc = gather_rows(q, ctx)

    # ---- the points where implementations go wrong --------------------------------------------
    def mask(self, qpos, qdoc, kpos, kdoc):
        """(Sq, Sk) bool: which keys each query sees (padding rows have position -1)."""
        return position_mask(self.ctx, qpos, qdoc, kpos, kdoc)

    def merge(self, acc_out, acc_lse, part_out, part_lse):
        """Combine two partial results: weights exp(lse_part - lse_new), all in log space."""
        new = torch.logaddexp(acc_lse, part_lse)
        safe = torch.where(torch.isfinite(new), new, torch.zeros_like(new))
        w_acc = torch.exp(acc_lse - safe).transpose(1, 2).unsqueeze(-1)
        w_part = torch.exp(part_lse - safe).transpose(1, 2).unsqueeze(-1)
        return w_acc * acc_out + w_part * part_out, new

    def backward_kv(self, step, k_now, v_now, k_own, v_own):
        """The K/V block the backward computes with at this step: the one that arrived."""
        return k_now, v_now

    def kv_to_send(self, step, kv_now, kv_before):
        """The K/V block the forward passes on at this step: the one it just used."""
        return kv_now

    def dkv_peers(self):
        """(send_to, receive_from) of the dK/dV accumulators: with their K/V block, forward."""
        return (self.rank + 1) % self.world, (self.rank - 1) % self.world

    def accumulator_dtype(self):
        return self.compute

    def accumulate(self, acc, part):
        return acc + part.to(acc.dtype)

    # ---- the ring ------------------------------------------------------------------------------
    def exchange(self, tensors, send_to, recv_from, recv_rows, tag):
        """Post a send of `tensors` (one buffer) and a receive of a block of `recv_rows` rows. With one rank
        the ring is that rank: its block comes back to it unsent (gloo cannot send a rank to itself)."""
        buf = torch.cat([t.reshape(t.shape[0], t.shape[1], -1) for t in tensors], dim=-1).contiguous()
        if self.world == 1:
            return [], buf, [t.shape[2:] for t in tensors], buf
        shape = list(buf.shape)
        shape[1] = recv_rows
        incoming = torch.empty(shape, dtype=buf.dtype, device=buf.device)
        reqs = [dist.isend(buf, send_to, group=self.group, tag=tag),
                dist.irecv(incoming, recv_from, group=self.group, tag=tag)]
        return reqs, incoming, [t.shape[2:] for t in tensors], buf

    @staticmethod
    def finish(posted):
        reqs, incoming, shapes, _ = posted
        for r in reqs:
            r.wait()
        parts, start = [], 0
        for s in shapes:
            n = 1
            for d in s:
                n *= d
            parts.append(incoming[..., start:start + n].reshape(incoming.shape[0], incoming.shape[1], *s))
            start += n
        return parts

    def expand(self, t):
        return t.repeat_interleave(self.group_size, dim=2) if self.group_size > 1 else t

    def block_forward(self, q, k, v, mask):
        scores = torch.einsum("bqhd,bkhd->bhqk", q, self.expand(k)) * self.ctx.scale
        scores = scores.masked_fill(~mask, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
        p = torch.exp(scores - safe.unsqueeze(-1))
        return torch.einsum("bhqk,bkhd->bqhd", p, self.expand(v)), lse

    def forward(self, q, k, v):
        r, P = self.rank, self.world
        q, k, v = q.to(self.compute), k.to(self.compute), v.to(self.compute)
        B, S, H, D = q.shape
        acc_out = torch.zeros(B, S, H, D, dtype=self.compute, device=q.device)
        acc_lse = torch.full((B, H, S), float("-inf"), dtype=self.compute, device=q.device)
        kc, vc = k, v
        before = (k, v)
        for t in range(P):
            origin = (r - t) % P
            posted = None
            if t < P - 1:
                send = self.kv_to_send(t, (kc, vc), before)
                before = (kc, vc)
                posted = self.exchange(list(send), (r + 1) % P, (r - 1) % P, self.sizes[(r - t - 1) % P], KV_TAG)
            mask = self.mask(self.pos[r], self.doc[r], self.pos[origin], self.doc[origin])
            if bool(mask.any()):
                part_out, part_lse = self.block_forward(q, kc, vc, mask)
                acc_out, acc_lse = self.merge(acc_out, acc_lse, part_out, part_lse)
            if self.ctx.trace is not None:
                self.ctx.trace(t, acc_out, acc_lse)
            if posted is not None:
                kc, vc = self.finish(posted)
        return acc_out, acc_lse

    def backward(self, q, k, v, out, lse, dout):
        r, P = self.rank, self.world
        q, k, v = q.to(self.compute), k.to(self.compute), v.to(self.compute)
        do, out = dout.to(self.compute), out.to(self.compute)
        delta = (do * out).sum(-1).transpose(1, 2)  # (B, H, S)
        safe_lse = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse)).to(self.compute)
        dq = torch.zeros_like(q)
        acc = self.accumulator_dtype()
        kc, vc = k, v
        dkc = torch.zeros(k.shape, dtype=acc, device=k.device)
        dvc = torch.zeros(v.shape, dtype=acc, device=v.device)
        send_to, recv_from = self.dkv_peers()
        B, S, H, D = q.shape
        # dQ = scale dS K, and every row of dS sums to zero over the keys it sees: subtracting one key vector
        # k_bar from all keys changes nothing in exact arithmetic, but removes the cancellation of a large
        # component the keys share (large logits), which would otherwise cost dQ digits.
        real = (self.pos[r] >= 0).to(self.compute)[None, :, None, None]
        k_bar = (k * real).sum(1, keepdim=True) / real.sum().clamp(min=1.0)
        for t in range(P):
            origin = (r - t) % P
            kv_posted = None
            if t < P - 1:
                kv_posted = self.exchange([kc, vc], (r + 1) % P, (r - 1) % P, self.sizes[(r - t - 1) % P], KV_TAG)
            mask = self.mask(self.pos[r], self.doc[r], self.pos[origin], self.doc[origin])
            if bool(mask.any()):
                ku, vu = self.backward_kv(t, kc, vc, k, v)
                kh, vh = self.expand(ku), self.expand(vu)
                scores = torch.einsum("bqhd,bkhd->bhqk", q, kh) * self.ctx.scale
                p = torch.exp(scores - safe_lse.unsqueeze(-1)).masked_fill(~mask, 0.0)
                dv_h = torch.einsum("bhqk,bqhd->bkhd", p, do)
                dp = torch.einsum("bqhd,bkhd->bhqk", do, vh)
                ds = p * (dp - delta.unsqueeze(-1))
                dq += torch.einsum("bhqk,bkhd->bqhd", ds, self.expand(ku - k_bar)) * self.ctx.scale
                dk_h = torch.einsum("bhqk,bqhd->bkhd", ds, q) * self.ctx.scale
                if self.group_size > 1:
                    dk_h = dk_h.reshape(B, -1, self.kv_heads, self.group_size, D).sum(3)
                    dv_h = dv_h.reshape(B, -1, self.kv_heads, self.group_size, D).sum(3)
                dkc, dvc = self.accumulate(dkc, dk_h), self.accumulate(dvc, dv_h)
            # The accumulators of the block held at step t go where that block goes next; after the
            # last step they take one more hop, home.
            rows_next = self.sizes[(r - t - 1) % P]
            dkv_posted = self.exchange([dkc, dvc], send_to, recv_from, rows_next, DKV_TAG)
            if kv_posted is not None:
                kc, vc = self.finish(kv_posted)
            dkc, dvc = self.finish(dkv_posted)
        return dq, dkc.to(self.compute), dvc.to(self.compute)


class _RingFunction(torch.autograd.Function):
    @staticmethod
    def forward(fctx, q, k, v, ring):
        out, lse = ring.forward(q, k, v)
        fctx.ring = ring
        fctx.save_for_backward(q, k, v, out, lse)
        fctx.mark_non_differentiable(lse)
        return out.to(q.dtype), lse.float()

    @staticmethod
    def backward(fctx, dout, _dlse):
        q, k, v, out, lse = fctx.saved_tensors
        dq, dk, dv = fctx.ring.backward(q, k, v, out, lse, dout)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def attention(q, k, v, ctx, ring_class=RingAttention):
    """The harness's contract: fn(q, k, v, ctx) -> (out, lse), backward through autograd."""
    return _RingFunction.apply(q, k, v, ring_class(q, k, v, ctx))
