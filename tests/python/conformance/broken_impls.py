"""Deliberately broken context-parallel attentions, one per real-world failure, for the harness tests.

Each is the reference ring (ringlab.conformance.reference) with exactly one of its small methods
changed the way a published implementation got it wrong. Test fixtures only: never shipped.
"""
import dataclasses
import math
import os
import signal
import time

import torch
import torch.distributed as dist

from ringlab.conformance import ulysses
from ringlab.conformance.reference import DKV_TAG, RingAttention, attention


class StaleKV(RingAttention):
    """The backward computes every step with the K/V chunk it held at step 0 (the rotated chunk's
    positions and mask, the first chunk's values) - the diffusion framework's ring backward."""

    def backward_kv(self, step, k_now, v_now, k_own, v_own):
        return k_own, v_own


class DkvReversed(RingAttention):
    """dK/dV accumulators sent to rank r - 1 while K/V travel to r + 1 (invisible at P = 2)."""

    def dkv_peers(self):
        return (self.rank - 1) % self.world, (self.rank + 1) % self.world


class TailTokenDropped(RingAttention):
    """Packing: a document of odd length is taken as one token shorter (7 read as 6), so its last
    real token is treated as padding - TransformerEngine #1930."""

    def mask(self, qpos, qdoc, kpos, kdoc):
        return super().mask(self._drop(qpos), qdoc, self._drop(kpos), kdoc)

    def _drop(self, pos):
        ends = []
        start = 0
        for length in self.ctx.docs or [self.ctx.seq]:
            if length % 2:
                ends.append(start + length - 1)
            start += length
        dropped = torch.zeros_like(pos, dtype=torch.bool)
        for e in ends:
            dropped |= pos == e
        return torch.where(dropped, torch.full_like(pos, -1), pos)


class WindowIgnored(RingAttention):
    """The context-parallel path runs full (causal) attention: the sliding window is dropped."""

    def mask(self, qpos, qdoc, kpos, kdoc):
        window, self.ctx.window = self.ctx.window, 0
        try:
            return super().mask(qpos, qdoc, kpos, kdoc)
        finally:
            self.ctx.window = window


class UnstableMerge(RingAttention):
    """Partials merged as exp(lse_a) out_a + exp(lse_b) out_b over exp(lse_a) + exp(lse_b): the exp of
    an unshifted log-sum-exp overflows float32 once logits pass about 88."""

    def merge(self, acc_out, acc_lse, part_out, part_lse):
        wa, wp = torch.exp(acc_lse), torch.exp(part_lse)
        total = wa + wp
        denom = torch.where(total == 0, torch.ones_like(total), total)
        out = (wa.transpose(1, 2).unsqueeze(-1) * acc_out + wp.transpose(1, 2).unsqueeze(-1) * part_out) \
            / denom.transpose(1, 2).unsqueeze(-1)
        return out, torch.log(total)


class Bf16DkvAccumulators(RingAttention):
    """dK/dV accumulated (and passed around the ring) in bfloat16: the error grows with P -
    ring-flash-attention #42."""

    def accumulator_dtype(self):
        return torch.bfloat16


class LaggingSend(RingAttention):
    """The forward's send buffer lags one step: from step 1 on it passes on the block it held before,
    so from step 2 on a rank computes with a block it already merged (the step trace's example)."""

    def kv_to_send(self, step, kv_now, kv_before):
        return kv_before if step >= 1 else kv_now


def _with_ring(ring, entry=attention):
    """A reference's entry point, fn(q, k, v, ctx), on a broken class: the ring's, or Ulysses' with
    entry=ulysses.attention."""
    def fn(q, k, v, ctx):
        return entry(q, k, v, ctx, ring)
    fn.__doc__ = ring.__doc__
    return fn


lagging_send = _with_ring(LaggingSend)
stale_kv_backward = _with_ring(StaleKV)
dkv_reversed = _with_ring(DkvReversed)
tail_token_dropped = _with_ring(TailTokenDropped)
window_ignored = _with_ring(WindowIgnored)
unstable_merge = _with_ring(UnstableMerge)
bf16_dkv_accumulators = _with_ring(Bf16DkvAccumulators)


# ---- implementations that break the harness's contract, not the math ----------------------------

def raises(q, k, v, ctx):
    if ctx.rank == ctx.world_size - 1:
        raise RuntimeError("flash kernel: unsupported head dimension")
    return attention(q, k, v, ctx)


def wrong_shape(q, k, v, ctx):
    out, lse = attention(q, k, v, ctx)
    return out.transpose(1, 2), lse  # (B, H, S, D): the layout of another API


def hangs(q, k, v, ctx):
    """Rank 0 waits for a message nobody sends (a receive posted on the wrong peer)."""
    if ctx.rank == 0:
        buf = torch.empty(1)
        dist.recv(buf, src=1 % ctx.world_size, group=ctx.group, tag=999)
    return attention(q, k, v, ctx)


def spins(q, k, v, ctx):
    """Rank 0 never leaves its own code (a loop that does not end); the others wait for it in the
    reference's first collective."""
    if ctx.rank == 0:
        while True:
            time.sleep(0.05)
    return attention(q, k, v, ctx)


def group_timeout(q, k, v, ctx):
    """Raises with the process group's timeout (the store's: init_process_group gives both the same)."""
    seconds = dist.distributed_c10d._get_default_store().timeout.total_seconds()
    raise RuntimeError(f"process group timeout {seconds:g} s")


def killed(q, k, v, ctx):
    """Rank 1's process is killed (SIGKILL: the kernel's OOM killer); its peers lose their connections."""
    if ctx.rank == 1 % ctx.world_size:
        os.kill(os.getpid(), signal.SIGKILL)
    return attention(q, k, v, ctx)


def exits(q, k, v, ctx):
    """Rank 1's process exits with status 3 in the middle of the case (a library calling exit())."""
    if ctx.rank == 1 % ctx.world_size:
        os._exit(3)
    return attention(q, k, v, ctx)


def out_bf16(q, k, v, ctx):
    """out rounded to bfloat16 for float32 inputs: the contract is out in the inputs' dtype."""
    out, lse = attention(q, k, v, ctx)
    return out.to(torch.bfloat16), lse


def bf16_all_to_all(q, k, v, ctx):
    """An all_to_all of the inputs as they come (bfloat16 in a bf16 case), which gloo may refuse."""
    out = torch.empty_like(q)
    dist.all_to_all_single(out, q.contiguous(), group=ctx.group)
    return out * 0 + q


def lse_int(q, k, v, ctx):
    """lse returned as integers."""
    out, lse = attention(q, k, v, ctx)
    return out, lse.to(torch.int32)


def layout_trusting(q, k, v, ctx):
    """An adapter that computes its rows' positions from ctx.layout (as a real implementation knows its
    layout) and refuses to run when they are not the rows it was given."""
    from ringlab.conformance import conventions

    m = conventions.shard_map(ctx.layout, ctx.seq, ctx.world_size, ctx.docs, ctx.causal, ctx.window)
    mine = torch.as_tensor(m.positions[ctx.rank], dtype=torch.int64)
    if not torch.equal(mine, ctx.positions.cpu()):
        raise ValueError(f"ctx.layout '{ctx.layout}' puts positions {mine.tolist()[:8]}... on rank {ctx.rank}, "
                         f"the rows given are {ctx.positions.tolist()[:8]}...")
    return attention(q, k, v, ctx)


# ---- more mask and merge mistakes, each with its own cause --------------------------------------

class DocumentsIgnored(RingAttention):
    """Packed documents not applied on the context-parallel path: attention crosses documents."""

    def mask(self, qpos, qdoc, kpos, kdoc):
        return super().mask(qpos, None, kpos, None)


class PaddingAsKeys(RingAttention):
    """Positions taken from the padded tensor (the slot), padding rows included: the padding's zeros are
    keys that real queries see (TransformerEngine #3331's family)."""

    def __init__(self, q, k, v, ctx):
        padded = ctx.cu_seqlens_padded
        ctx.positions = ctx.slots.clone()
        ctx.doc_ids = torch.bucketize(ctx.slots, torch.tensor(padded[1:], device=ctx.slots.device), right=True) \
            if ctx.doc_ids is not None else None
        super().__init__(q, k, v, ctx)


class CausalOffset(RingAttention):
    """The causal test written j < i: a query does not see its own key."""

    def mask(self, qpos, qdoc, kpos, kdoc):
        m = super().mask(qpos, qdoc, kpos, kdoc)
        return m & (qpos[:, None] != kpos[None, :]) if self.ctx.causal else m


class MissingRescale(RingAttention):
    """The running output is not rescaled when a new block is merged (its lse is)."""

    def merge(self, acc_out, acc_lse, part_out, part_lse):
        new = torch.logaddexp(acc_lse, part_lse)
        safe = torch.where(torch.isfinite(new), new, torch.zeros_like(new))
        w_part = torch.exp(part_lse - safe).transpose(1, 2).unsqueeze(-1)
        first = torch.isneginf(acc_lse).transpose(1, 2).unsqueeze(-1)
        return torch.where(first, w_part * part_out, acc_out + w_part * part_out), new


class ForgetV(RingAttention):
    """The forward sends K around the ring and never V: every block's keys are weighed with the rank's own
    V rows (its lse, which K alone decides, is right; a plain-softmax merge would look the same to a test
    on which rows are wrong)."""

    def forward(self, q, k, v):
        self.v_own = v.to(self.compute)
        return super().forward(q, k, v)

    def block_forward(self, q, k, v, mask):
        return super().block_forward(q, k, self.v_own, mask)


class DkvNoHome(RingAttention):
    """The dK/dV accumulators travel with their K/V block but never take the last hop home: each rank
    returns the accumulator of the block it held last (visible at P = 2 too, unlike a direction bug)."""

    def exchange(self, tensors, send_to, recv_from, recv_rows, tag):
        if tag == DKV_TAG:
            self.dkv_hops = getattr(self, "dkv_hops", 0) + 1
            if self.dkv_hops == self.world:  # the hop after the last step: left out, the accumulator stays
                buf = torch.cat([t.reshape(t.shape[0], t.shape[1], -1) for t in tensors], dim=-1).contiguous()
                return [], buf, [t.shape[2:] for t in tensors], buf
        return super().exchange(tensors, send_to, recv_from, recv_rows, tag)


documents_ignored = _with_ring(DocumentsIgnored)
padding_as_keys = _with_ring(PaddingAsKeys)
causal_offset = _with_ring(CausalOffset)
missing_rescale = _with_ring(MissingRescale)
forget_v = _with_ring(ForgetV)
dkv_no_home = _with_ring(DkvNoHome)


class KvWrongDirection(RingAttention):
    """The K/V blocks (and their dK/dV accumulators, which go with them) sent to rank r - 1 and received
    from r + 1, while the mask of step t is still that of rank r - t's block (invisible at P = 2, where
    both neighbours are the same rank, and without a causal mask or window, where order does not matter)."""

    def exchange(self, tensors, send_to, recv_from, recv_rows, tag):
        return super().exchange(tensors, recv_from, send_to, recv_rows, tag)


class OnlineNoRescale(RingAttention):
    """A flash-style online softmax (running max m, sum l, unnormalised output) that never rescales what it
    summed before by exp(m_old - m_new) when a later block raises the running max: out and lse both wrong."""

    def forward(self, q, k, v):
        self.running = None
        return super().forward(q, k, v)

    def block_forward(self, q, k, v, mask):
        scores = torch.einsum("bqhd,bkhd->bhqk", q, self.expand(k)) * self.ctx.scale
        self.block_scores = scores.masked_fill(~mask, float("-inf"))
        self.v_block = v
        return super().block_forward(q, k, v, mask)

    def merge(self, acc_out, acc_lse, part_out, part_lse):
        s = self.block_scores
        if self.running is None:
            m = torch.full(s.shape[:3], float("-inf"), dtype=s.dtype)
            total, acc = torch.zeros(s.shape[:3], dtype=s.dtype), torch.zeros_like(acc_out.transpose(1, 2))
        else:
            m, total, acc = self.running
        m = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)).unsqueeze(-1))
        acc = acc + torch.einsum("bhqk,bkhd->bhqd", p, self.expand(self.v_block))
        total = total + p.sum(-1)
        self.running = (m, total, acc)
        out = (acc / torch.where(total > 0, total, torch.ones_like(total)).unsqueeze(-1)).transpose(1, 2)
        lse = torch.where(total > 0, m + torch.log(total), torch.full_like(total, float("-inf")))
        return out, lse


class MaskByLocalIndex(RingAttention):
    """The mask compares the rows' indices within their shards (0, 1, ... on every rank), not their
    global positions: right on a rank's own block, wrong on every other (invisible without a causal
    mask or window)."""

    def mask(self, qpos, qdoc, kpos, kdoc):
        return super().mask(self._local(qpos), qdoc, self._local(kpos), kdoc)

    @staticmethod
    def _local(pos):
        return torch.where(pos >= 0, torch.arange(len(pos), dtype=pos.dtype), pos)


class ZigzagChunksSwapped(RingAttention):
    """On a zig-zag shard, the mask takes the rank's late chunk (2P - 1 - r) for its first rows and the
    early one (r) for its last: each row masked with the other chunk's positions."""

    def mask(self, qpos, qdoc, kpos, kdoc):
        return super().mask(self._swap(qpos), qdoc, self._swap(kpos), kdoc)

    @staticmethod
    def _swap(pos):
        n = len(pos)
        if n % 2 or bool((pos < 0).any()):
            return pos
        return torch.cat([pos[n // 2:], pos[:n // 2]])


mask_by_local_index = _with_ring(MaskByLocalIndex)
zigzag_chunks_swapped = _with_ring(ZigzagChunksSwapped)


class DkvKeptLocal(RingAttention):
    """Each rank adds the dK/dV it computes at every step into its own block's accumulator, whatever
    block it holds: the contributions never travel (right only where every rank's queries see its
    own block alone)."""

    def backward(self, q, k, v, out, lse, dout):
        self.kept, self.calls = None, 0
        dq, _, _ = super().backward(q, k, v, out, lse, dout)
        if self.kept is None:
            return dq, torch.zeros_like(k, dtype=self.compute), torch.zeros_like(v, dtype=self.compute)
        return dq, self.kept[0].to(self.compute), self.kept[1].to(self.compute)

    def accumulate(self, acc, part):  # called for dK, then dV, at each step that computes
        if self.kept is None:
            self.kept = [torch.zeros_like(acc), torch.zeros_like(acc)]
        self.kept[self.calls % 2] += part.to(acc.dtype)
        self.calls += 1
        return acc


dkv_kept_local = _with_ring(DkvKeptLocal)


class ScaleIgnored(RingAttention):
    """The scores are never multiplied by the softmax scale (q k^T taken as the logits)."""

    def __init__(self, q, k, v, ctx):
        super().__init__(q, k, v, dataclasses.replace(ctx, scale=1.0))


class PaddingKeysVisible(RingAttention):
    """The mask tests the queries' positions for padding (-1) but not the keys': a padding key at -1
    passes j <= i, so every query also sees the zero keys and values of the padding."""

    def mask(self, qpos, qdoc, kpos, kdoc):
        real = torch.where(kpos >= 0, kpos, torch.full_like(kpos, -1))
        m = super().mask(qpos, qdoc, real.clamp(min=0), kdoc)  # everything but the padding test ...
        diff = qpos[:, None] - real[None, :]  # ... recomputed for the padding keys at position -1
        pad = (qpos[:, None] >= 0) & (kpos[None, :] < 0)
        if qdoc is not None:
            pad &= qdoc[:, None] == kdoc[None, :]
        if self.ctx.causal:
            pad &= diff >= 0
        if self.ctx.window > 0:
            pad &= (diff < self.ctx.window) if self.ctx.causal else (diff.abs() < self.ctx.window)
        return torch.where((kpos >= 0)[None, :], m, pad)


scale_ignored = _with_ring(ScaleIgnored)
padding_keys_visible = _with_ring(PaddingKeysVisible)


class UlyssesShardOrderMask(ulysses.UlyssesAttention):
    """Ulysses that masks the gathered rows by their index in rank order (rank 0's rows, then rank 1's)
    as if they were the sequence in position order: right only on a contiguous layout."""

    def gathered_positions(self):
        return torch.where(self.pos >= 0, torch.arange(len(self.pos)), self.pos)


class UlyssesHeadsInterleaved(ulysses.UlyssesAttention):
    """Ulysses whose second all-to-all lays the returned heads out head-major (rank j's head i at i P + j)
    while the first sent them rank-major (j h + i): the heads come back permuted wherever a rank holds
    more than one."""

    def heads_back(self, y, rows):
        P, (B, _, h, D) = self.world, y.shape
        flat = ulysses._AllToAll.apply(y.permute(1, 0, 2, 3), self.sizes, [rows] * P, self.group)
        return flat.reshape(P, rows, B, h, D).permute(2, 1, 3, 0, 4).reshape(B, rows, h * P, D)


class UlyssesRowsInterleaved(ulysses.UlyssesAttention):
    """Ulysses whose second all-to-all splits the gathered rows as (rows, P) instead of (P, rows): rank j
    gets rows j, P + j, 2P + j, ... of the sequence in rank order instead of its own (equal shards)."""

    def heads_back(self, y, rows):
        P, (B, _, h, D) = self.world, y.shape
        if len(set(self.sizes)) == 1:
            y = y.reshape(B, rows, P, h, D).transpose(1, 2).reshape(B, P * rows, h, D)
        return super().heads_back(y, rows)


class UlyssesGqaTiled(ulysses.UlyssesAttention):
    """Ulysses that repeats the K/V heads for GQA by tiling (head h reads K/V head h mod HKV) instead of
    grouping (h // (H / HKV)): the same where HKV = 1."""

    def kv_for_heads(self, t):
        return t.repeat(1, 1, self.group_size, 1) if self.group_size > 1 else t


ulysses_shard_order_mask = _with_ring(UlyssesShardOrderMask, ulysses.attention)
ulysses_heads_interleaved = _with_ring(UlyssesHeadsInterleaved, ulysses.attention)
ulysses_gqa_tiled = _with_ring(UlyssesGqaTiled, ulysses.attention)
ulysses_rows_interleaved = _with_ring(UlyssesRowsInterleaved, ulysses.attention)


def _lse_log2(q, k, v, ctx):
    """A kernel that works with exp2 and returns its lse in base 2 (out right, lse / ln 2)."""
    out, lse = attention(q, k, v, ctx)
    return out, lse / math.log(2)


kv_wrong_direction = _with_ring(KvWrongDirection)
online_no_rescale = _with_ring(OnlineNoRescale)
lse_log2 = _lse_log2
