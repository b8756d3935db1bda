"""The per-rank context handed to an implementation: fn(q, k, v, ctx) -> out | (out, lse)."""
from __future__ import annotations

import dataclasses
from typing import Any, List, Optional


@dataclasses.dataclass
class Context:
    """What one rank knows about the case it runs.

    rank, world_size, group: this rank in the torch.distributed process group.
    positions: LongTensor (S_local,): the global position of each local row, -1 for padding.
    doc_ids: LongTensor (S_local,): the document of each row (-1 for padding), or None.
    causal, window (0 = none: causal i-W < j <= i, else |i-j| < W), scale (softmax scale).
    layout: the convention the inputs were sharded by.
    seq: S, the real tokens of the whole sequence; docs: document lengths (None without documents).
    cu_seqlens: [0, L0, L0+L1, ...] of the real documents (the whole sequence is one without docs).
    cu_seqlens_padded: the same in the padded sequence (where the convention pads per document).
    slots: LongTensor (S_local,): each row's index in the convention's padded sequence.
    trace: None, or (with `run --trace`) a callable trace(step, out, lse) the implementation may call
    after merging each ring step's block, with its running out (B, S_local, H, D) and lse
    (B, H, S_local); the harness names the first (rank, step) whose partial is not what the ring
    should hold by then.
    """

    rank: int
    world_size: int
    group: Any
    positions: Any
    doc_ids: Optional[Any]
    causal: bool
    window: int
    scale: float
    layout: str
    seq: int
    docs: Optional[List[int]]
    cu_seqlens: List[int]
    cu_seqlens_padded: List[int]
    slots: Any
    case: str = ""
    trace: Optional[Any] = None
