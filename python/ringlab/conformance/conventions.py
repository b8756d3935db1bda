"""Token-to-rank conventions of the common context-parallel implementations, as data.

A convention answers one question: given S tokens (packed into documents of the given lengths) and
P ranks, which global positions does each rank hold, in which local order, and where does the
implementation expect padding? The answer is a ShardMap. The harness shards inputs with it,
gathers outputs with it, and the diagnosis uses it to name the rank and the ring step that own a
wrong row.

Facts, each from the project's documentation or code (no code carried over):

- ring-flash-attention `zigzag_ring_flash_attn_func`: the sequence is cut into 2P equal chunks and
  rank r holds chunks r and 2P-1-r, in that order. `stripe_flash_attn_func`: rank r holds tokens
  r, r+P, r+2P, ... (its test splits the sequence into groups of P and takes the r-th token of
  each). `llama3_flash_attn_varlen_func`: the packed tokens (all documents, cu_seqlens) are cut
  into P equal contiguous pieces, total % P == 0. `zigzag_ring_flash_attn_varlen_func`: zig-zag
  inside each document, every document a multiple of 2P.
- PyTorch context_parallel: `_HeadTailLoadBalancer` pairs chunk r with chunk 2P-1-r of 2P chunks
  (needs S % 2P == 0; without it the default is no load balancing, torch.chunk's contiguous split
  with ceil(S/P) tokens per rank). `_PerDocumentHeadTailLoadBalancer` applies head-tail inside each
  document and lays the result out rank-major (each document a multiple of 2P).
  `_PTRRLoadBalancer` (processing-time round-robin): the sequence is cut into blocks, each query
  block costs the number of key blocks its mask touches, blocks are sorted by cost (descending,
  stable) and dealt to the P ranks in snake order (left to right, then right to left, ...), each
  rank's blocks kept in ascending order.
- TransformerEngine: context parallelism with load balancing (DualChunkSwap, bshd/sbhd) gives rank
  r chunks r and 2P-1-r of 2P; THD packing pads every sequence to a multiple of 2P
  (cu_seqlens_padded, padding at each sequence's end) and gives rank r chunks r and 2P-1-r of
  every sequence, sequence after sequence.

Padding: where a convention needs S (or a document) to be a multiple of something, the harness pads
at the end of the sequence (or of each document, where the convention pads per document) and marks
padding rows with position -1. The "slot" of a row is its index in the convention's padded
sequence: what an implementation that indexes the padded tensor believes the row's position is.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np


@dataclasses.dataclass
class ShardMap:
    """Which global positions each rank holds, in local order (-1 = padding)."""

    convention: str
    seq: int
    ranks: int
    positions: List[np.ndarray]  # per rank: global position of each local row, -1 for padding
    slots: List[np.ndarray]  # per rank: index of each local row in the padded sequence
    padded_docs: List[int]  # document lengths in the padded sequence (slot coordinates)
    note: str = ""

    @property
    def padded_length(self) -> int:
        return int(sum(self.padded_docs))

    def owner(self) -> np.ndarray:
        """(S,): the rank that holds each global position."""
        own = np.full(self.seq, -1, dtype=np.int64)
        for r, pos in enumerate(self.positions):
            real = pos[pos >= 0]
            own[real] = r
        return own

    def local_row(self) -> np.ndarray:
        """(S,): the local row index of each global position on its rank."""
        row = np.full(self.seq, -1, dtype=np.int64)
        for pos in self.positions:
            idx = np.nonzero(pos >= 0)[0]
            row[pos[idx]] = idx
        return row

    def validate(self) -> None:
        """Every real position held exactly once; slots distinct and inside the padded sequence."""
        seen = np.concatenate([p[p >= 0] for p in self.positions]) if self.positions else np.zeros(0)
        if len(seen) != self.seq or not np.array_equal(np.sort(seen), np.arange(self.seq)):
            raise ValueError(f"convention {self.convention}: positions do not cover 0..{self.seq - 1} exactly once")
        slots = np.concatenate(self.slots)
        if len(np.unique(slots)) != len(slots) or slots.min() < 0 or slots.max() >= self.padded_length:
            raise ValueError(f"convention {self.convention}: slots are not distinct indices of the padded sequence")


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _padded_layout(docs: Sequence[int], multiple: int, per_document: bool):
    """Pad each document (or only the sequence tail) to a multiple: (padded doc lengths, slot -> position)."""
    if per_document:
        padded = [_round_up(d, multiple) for d in docs]
    else:
        padded = list(docs)
        padded[-1] += _round_up(sum(docs), multiple) - sum(docs)
    slot_pos = np.full(sum(padded), -1, dtype=np.int64)
    start_slot = start_pos = 0
    for d, p in zip(docs, padded):
        slot_pos[start_slot:start_slot + d] = np.arange(start_pos, start_pos + d)
        start_slot += p
        start_pos += d
    return padded, slot_pos


def _finish(name: str, seq: int, ranks: int, slot_lists, padded, slot_pos, note="") -> ShardMap:
    slots = [np.asarray(s, dtype=np.int64) for s in slot_lists]
    positions = [slot_pos[s] for s in slots]
    m = ShardMap(name, seq, ranks, positions, slots, list(padded), note)
    m.validate()
    return m


def _zigzag_slots(start: int, length: int, ranks: int, rank: int) -> List[int]:
    chunk = length // (2 * ranks)
    a = list(range(start + rank * chunk, start + (rank + 1) * chunk))
    j = 2 * ranks - 1 - rank
    b = list(range(start + j * chunk, start + (j + 1) * chunk))
    return a + b


def contiguous(seq: int, ranks: int, docs: Sequence[int]) -> ShardMap:
    padded, slot_pos = _padded_layout(docs, ranks, per_document=False)
    n = len(slot_pos) // ranks
    return _finish("contiguous", seq, ranks, [range(r * n, (r + 1) * n) for r in range(ranks)], padded, slot_pos)


def torch_chunk(seq: int, ranks: int, docs: Sequence[int]) -> ShardMap:
    """torch.chunk along the sequence: ceil(S/P) tokens per rank, the last ranks shorter (or empty)."""
    n = -(-seq // ranks)
    slots = [range(min(r * n, seq), min((r + 1) * n, seq)) for r in range(ranks)]
    return _finish("torch-chunk", seq, ranks, slots, list(docs), np.arange(seq, dtype=np.int64),
                   "uneven split, no padding")


def zigzag(seq: int, ranks: int, docs: Sequence[int]) -> ShardMap:
    """Chunks r and 2P-1-r of 2P over the whole sequence (tail padded to a multiple of 2P)."""
    padded, slot_pos = _padded_layout(docs, 2 * ranks, per_document=False)
    return _finish("zigzag", seq, ranks, [_zigzag_slots(0, len(slot_pos), ranks, r) for r in range(ranks)], padded,
                   slot_pos)


def zigzag_per_document(seq: int, ranks: int, docs: Sequence[int]) -> ShardMap:
    """Chunks r and 2P-1-r of every document, each document padded to a multiple of 2P."""
    padded, slot_pos = _padded_layout(docs, 2 * ranks, per_document=True)
    slots = []
    for r in range(ranks):
        mine, start = [], 0
        for p in padded:
            mine += _zigzag_slots(start, p, ranks, r)
            start += p
        slots.append(mine)
    return _finish("zigzag-per-document", seq, ranks, slots, padded, slot_pos)


def striped(seq: int, ranks: int, docs: Sequence[int]) -> ShardMap:
    padded, slot_pos = _padded_layout(docs, ranks, per_document=False)
    return _finish("striped", seq, ranks, [range(r, len(slot_pos), ranks) for r in range(ranks)], padded, slot_pos)


def striped_per_document(seq: int, ranks: int, docs: Sequence[int]) -> ShardMap:
    """Tokens r, r+P, r+2P, ... of every document, each document padded to a multiple of P."""
    padded, slot_pos = _padded_layout(docs, ranks, per_document=True)
    slots = []
    for r in range(ranks):
        mine, start = [], 0
        for p in padded:
            mine += list(range(start + r, start + p, ranks))
            start += p
        slots.append(mine)
    return _finish("striped-per-document", seq, ranks, slots, padded, slot_pos)


def ptrr_schedule(cost: Sequence[float], ranks: int) -> List[List[int]]:
    """Processing-time round-robin: sort blocks by cost (descending, stable), deal them in snake order."""
    cost = np.asarray(cost)
    if len(cost) % ranks:
        raise ValueError(f"{len(cost)} blocks do not split over {ranks} ranks")
    order = sorted(range(len(cost)), key=lambda i: -cost[i])  # Python's sort is stable
    groups: List[List[int]] = [[] for _ in range(ranks)]
    for row in range(len(cost) // ranks):
        deal = order[row * ranks:(row + 1) * ranks]
        if row % 2:
            deal = deal[::-1]
        for g, block in enumerate(deal):
            groups[g].append(block)
    return [sorted(g) for g in groups]


def visible(qpos, kpos, qdoc, kdoc, causal: bool, window: int) -> np.ndarray:
    """The mask predicate on global positions (the one ringlab uses everywhere): (len(q), len(k)) bool."""
    qpos = np.asarray(qpos)[:, None]
    kpos = np.asarray(kpos)[None, :]
    m = (qpos >= 0) & (kpos >= 0)
    if qdoc is not None:
        m &= np.asarray(qdoc)[:, None] == np.asarray(kdoc)[None, :]
    if causal:
        m &= kpos <= qpos
    if window > 0:
        m &= (qpos - kpos < window) if causal else (np.abs(qpos - kpos) < window)
    return m


def doc_ids(seq: int, docs: Sequence[int]) -> np.ndarray:
    return np.repeat(np.arange(len(docs)), docs)[:seq]


def ptrr(seq: int, ranks: int, docs: Sequence[int], causal: bool = True, window: int = 0, block: int = 0) -> ShardMap:
    """PyTorch's processing-time round-robin balancer over blocks of `block` tokens (tail padded)."""
    if block <= 0:
        block = 128
        while block > 1 and _round_up(seq, block * ranks) - seq >= block:  # small inputs: smaller blocks
            block //= 2
    padded, slot_pos = _padded_layout(docs, block * ranks, per_document=False)
    nblocks = len(slot_pos) // block
    ids = np.full(len(slot_pos), -1)
    ids[slot_pos >= 0] = doc_ids(seq, docs)
    mask = visible(slot_pos, slot_pos, ids, ids, causal, window)
    touched = mask.reshape(nblocks, block, nblocks, block).any(axis=(1, 3))
    groups = ptrr_schedule(touched.sum(axis=1), ranks)
    slots = [[b * block + i for b in g for i in range(block)] for g in groups]
    return _finish("torch-ptrr", seq, ranks, slots, padded, slot_pos, f"blocks of {block} tokens")


@dataclasses.dataclass(frozen=True)
class Convention:
    name: str
    project: str
    summary: str
    build: Callable[..., ShardMap]
    needs_mask: bool = False  # the map depends on the mask (PTRR)
    parameter: str = ""  # the name of its ":N" parameter (a positive integer), or "" when it takes none


def _head_tail_default(seq, ranks, docs):
    if seq % (2 * ranks) == 0:
        return dataclasses.replace(zigzag(seq, ranks, docs), convention="torch-default")
    return dataclasses.replace(torch_chunk(seq, ranks, docs), convention="torch-default")


CONVENTIONS: Dict[str, Convention] = {
    c.name: c for c in [
        Convention("contiguous", "ringlab", "rank r holds tokens [r*S/P, (r+1)*S/P); tail padded to a multiple of P",
                   contiguous),
        Convention("zigzag", "ringlab", "rank r holds chunks r and 2P-1-r of 2P; tail padded to a multiple of 2P",
                   zigzag),
        Convention("striped", "ringlab", "rank r holds tokens r, r+P, r+2P, ...; tail padded to a multiple of P",
                   striped),
        Convention("zigzag-per-document", "ringlab",
                   "chunks r and 2P-1-r of 2P of every document, each padded to a multiple of 2P (the cases' zig-zag "
                   "with documents)", zigzag_per_document),
        Convention("striped-per-document", "ringlab",
                   "tokens r, r+P, r+2P, ... of every document, each padded to a multiple of P (the cases' striped "
                   "with documents)", striped_per_document),
        Convention("rfa-zigzag", "ring-flash-attention", "zigzag_ring_flash_attn_func: chunks r and 2P-1-r of 2P",
                   zigzag),
        Convention("rfa-stripe", "ring-flash-attention", "stripe_flash_attn_func: tokens r, r+P, r+2P, ...",
                   striped),
        Convention("rfa-llama3-varlen", "ring-flash-attention",
                   "llama3_flash_attn_varlen_func: the packed tokens cut into P equal contiguous pieces", contiguous),
        Convention("rfa-zigzag-varlen", "ring-flash-attention",
                   "zigzag_ring_flash_attn_varlen_func: zig-zag inside each document (each padded to 2P)",
                   zigzag_per_document),
        Convention("torch-head-tail", "PyTorch context_parallel",
                   "_HeadTailLoadBalancer: chunks r and 2P-1-r of 2P (tail padded to a multiple of 2P)", zigzag),
        Convention("torch-default", "PyTorch context_parallel",
                   "enable_load_balance: head-tail when S % 2P == 0, else torch.chunk's uneven contiguous split",
                   _head_tail_default),
        Convention("torch-per-document-head-tail", "PyTorch context_parallel",
                   "_PerDocumentHeadTailLoadBalancer: head-tail inside each document (each padded to 2P)",
                   zigzag_per_document),
        Convention("torch-round-robin", "PyTorch context_parallel",
                   "_PTRRLoadBalancer: blocks dealt by mask work in snake round-robin order (:BLOCK sets the block "
                   "size in tokens)", ptrr, needs_mask=True, parameter="BLOCK"),
        Convention("te-dualchunkswap", "TransformerEngine",
                   "load-balanced CP (bshd/sbhd): chunks r and 2P-1-r of 2P", zigzag),
        Convention("te-thd", "TransformerEngine",
                   "THD packing: every sequence padded to a multiple of 2P, chunks r and 2P-1-r of each",
                   zigzag_per_document),
    ]
}


def parse_name(name: str):
    """(convention, parameter or 0) of a name such as "zigzag" or "torch-round-robin:16". KeyError for an
    unknown convention, ValueError (one line) for a parameter that is not a positive integer or that the
    convention does not take."""
    base, colon, arg = name.partition(":")
    if base not in CONVENTIONS:
        raise KeyError(f"unknown layout convention '{name}' (known: {', '.join(CONVENTIONS)})")
    conv = CONVENTIONS[base]
    if not colon:
        return conv, 0
    if not conv.parameter:
        raise ValueError(f"layout '{name}': convention {base} takes no parameter (use '{base}')")
    if not (arg.isascii() and arg.isdigit()) or int(arg) < 1:
        raise ValueError(f"layout '{name}': the {conv.parameter} of {base}:{conv.parameter} must be a positive "
                         f"integer, not '{arg}'")
    return conv, int(arg)


def shard_map(name: str, seq: int, ranks: int, docs: Optional[Sequence[int]] = None, causal: bool = False,
              window: int = 0) -> ShardMap:
    """The ShardMap of convention `name` ("torch-round-robin:16" sets PTRR's block size)."""
    conv, arg = parse_name(name)
    docs = list(docs) if docs else [seq]
    if sum(docs) != seq or min(docs) < 1:
        raise ValueError(f"document lengths {docs} do not sum to S = {seq}")
    if conv.needs_mask:
        m = conv.build(seq, ranks, docs, causal=causal, window=window, block=arg)
    else:
        m = conv.build(seq, ranks, docs)
    return dataclasses.replace(m, convention=name)


def from_positions(name: str, seq: int, docs: Optional[Sequence[int]], positions: Sequence[Sequence[int]]) -> ShardMap:
    """A ShardMap from explicit per-rank positions (a case's own layout); padding slots follow the real tokens."""
    docs = list(docs) if docs else [seq]
    pos = [np.asarray(p, dtype=np.int64) for p in positions]
    slot_pos = np.arange(seq, dtype=np.int64)
    extra = sum(int((p < 0).sum()) for p in pos)
    slot_pos = np.concatenate([slot_pos, np.full(extra, -1, dtype=np.int64)])
    nxt = seq
    slots = []
    for p in pos:
        s = p.copy()
        for i in np.nonzero(p < 0)[0]:
            s[i] = nxt
            nxt += 1
        slots.append(s)
    padded = list(docs)
    padded[-1] += extra
    m = ShardMap(name, seq, len(pos), pos, slots, padded)
    m.validate()
    return m


def describe() -> str:
    width = max(len(n) for n in CONVENTIONS)
    return "\n".join(f"  {n:<{width}}  {c.project}: {c.summary}" for n, c in CONVENTIONS.items())

