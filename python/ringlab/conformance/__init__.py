"""ringlab.conformance: verify a torch.distributed context-parallel attention against ringlab's cases.

    ringlab conformance cases DIR                 # the cases (inputs, float64 oracle, tolerances)
    python3 -m ringlab.conformance run --impl my_module:attention --nproc 4 DIR

The implementation is a per-rank function fn(q, k, v, ctx) -> out or (out, lse); see Context.
Two references pass every case: ringlab.conformance.reference:attention (a ring of point-to-point
messages) and ringlab.conformance.ulysses:attention (Ulysses: two all-to-alls).
"""
from .context import Context
from .conventions import CONVENTIONS, ShardMap, shard_map

__all__ = ["Context", "CONVENTIONS", "ShardMap", "shard_map"]
