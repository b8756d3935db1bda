#!/usr/bin/env python3
"""The layout conventions of ringlab.conformance against the examples their projects document.

Each expected map below is written from the project's documentation or tests (quoted in words next
to it), not computed by the code under test; a negative control checks that a wrong map is caught.
Needs only NumPy (no torch, no compiled module).
"""
import sys

import numpy as np

from ringlab.conformance import conventions as cv

failures = []


def expect(name, got, want):
    got = [list(map(int, g)) for g in got]
    if got != want:
        failures.append(f"{name}: got {got}, documented {want}")
    else:
        print(f"ok   {name}")


def ranks_of(m):
    return [list(p) for p in m.positions]


# PyTorch _HeadTailLoadBalancer: "split sequence into 2*world_size chunks, then pair chunk r with chunk
# (2*world_size - 1 - r)"; Megatron's get_batch_on_this_cp_rank comment: "Assuming CP=2, we then get 4
# chunks, chunk_0 and chunk_3 are assigned to GPU0, chunk_1 and chunk_2 are assigned to GPU1".
for name in ("torch-head-tail", "te-dualchunkswap", "rfa-zigzag", "zigzag"):
    expect(f"{name}, CP=2, 4 chunks of 2", ranks_of(cv.shard_map(name, 8, 2)), [[0, 1, 6, 7], [2, 3, 4, 5]])
# Megatron-core's Mamba CP: "for cp_size=3, converts 123456 to 162534" (chunk i+1 of 6 -> rank order).
m = cv.shard_map("te-dualchunkswap", 6, 3)
expect("te-dualchunkswap, cp_size=3: 162534", [[p + 1 for p in np.concatenate(m.positions)]], [[1, 6, 2, 5, 3, 4]])

# TransformerEngine THD (PR #2129, get_thd_batch_on_this_cp_rank): "Sequence=[1, 2, 3, 4, 5, 6, 7, 8] ...
# cp0: [1, 2, 7, 8], cp1: [3, 4, 5, 6]"; sequences are padded to a multiple of 2*cp_size.
m = cv.shard_map("te-thd", 8, 2, [8])
expect("te-thd, one sequence of 8, cp=2", [[p + 1 for p in r] for r in ranks_of(m)], [[1, 2, 7, 8], [3, 4, 5, 6]])
m = cv.shard_map("te-thd", 10, 2, [7, 3])  # 7 -> 8 and 3 -> 4 slots, each cut in 4 chunks
expect("te-thd, sequences 7 and 3 padded to 8 and 4", ranks_of(m), [[0, 1, 6, -1, 7, -1], [2, 3, 4, 5, 8, 9]])
expect("te-thd padded cu_seqlens", [m.padded_docs], [[8, 4]])

# PyTorch _PerDocumentHeadTailLoadBalancer docstring: documents of 4, 8 and 4 tokens on 2 ranks; the
# mask picture gives rank 0 the rows 0, 3 | 4, 5, 10, 11 | 12, 15 and rank 1 the rest, rank-major.
m = cv.shard_map("torch-per-document-head-tail", 16, 2, [4, 8, 4])
expect("torch-per-document-head-tail, docs 4, 8, 4", ranks_of(m),
       [[0, 3, 4, 5, 10, 11, 12, 15], [1, 2, 6, 7, 8, 9, 13, 14]])

# PyTorch _PTRRLoadBalancer.ptrr_scheduling docstring: process_time [9, 14, 2, 20, 10, 15, 8, 14, 16, 19,
# 15, 3, 12, 1, 12, 10] in 4 groups -> [[3, 12, 13, 14], [2, 4, 7, 9], [1, 8, 11, 15], [0, 5, 6, 10]].
expect("torch round-robin (PTRR) scheduling example",
       cv.ptrr_schedule([9, 14, 2, 20, 10, 15, 8, 14, 16, 19, 15, 3, 12, 1, 12, 10], 4),
       [[3, 12, 13, 14], [2, 4, 7, 9], [1, 8, 11, 15], [0, 5, 6, 10]])
# ... and its _generate_indices example: a document causal mask of 16 blocks (documents of 4, 8, 4
# blocks) on 2 ranks gives the reorder indices [2, 3, 5, 6, 8, 11, 12, 13, 0, 1, 4, 7, 9, 10, 14, 15].
m = cv.shard_map("torch-round-robin:1", 16, 2, [4, 8, 4], causal=True)
expect("torch round-robin (PTRR) document-mask example", [np.concatenate(m.positions)],
       [[2, 3, 5, 6, 8, 11, 12, 13, 0, 1, 4, 7, 9, 10, 14, 15]])

# ring-flash-attention's stripe test: value.split(world_size) stacked and transposed, rank r's slice:
# tokens r, r + P, r + 2P, ...
expect("rfa-stripe, 8 tokens on 4 ranks", ranks_of(cv.shard_map("rfa-stripe", 8, 4)),
       [[0, 4], [1, 5], [2, 6], [3, 7]])
# ring-flash-attention's llama3 varlen test: cu_seqlens [0, 120, 1248, 4232], local_length =
# total // world_size, rank r takes [r * local_length, (r + 1) * local_length).
m = cv.shard_map("rfa-llama3-varlen", 4232, 8, [120, 1128, 2984])
expect("rfa-llama3-varlen, cu_seqlens [0, 120, 1248, 4232] on 8 ranks",
       [[int(p[0]), int(p[-1]) + 1] for p in m.positions], [[529 * r, 529 * (r + 1)] for r in range(8)])
# PyTorch's default (enable_load_balance) without S % 2P == 0: no balancer, torch.chunk: ceil(S/P) rows.
m = cv.shard_map("torch-default", 10, 4)
expect("torch-default, S = 10 on 4 ranks: torch.chunk", [[len(p) for p in m.positions]], [[3, 3, 3, 1]])

# Tail padding: S not a multiple of 2P leaves the last rank's tail chunk with padding (-1).
m = cv.shard_map("zigzag", 10, 2)
expect("zigzag, S = 10 on 2 ranks, padded to 12", ranks_of(m), [[0, 1, 2, 9, -1, -1], [3, 4, 5, 6, 7, 8]])

# ringlab's own layouts with documents (`ringlab conformance cases --help`: "each document padded at its end
# to a multiple of 2P (zig-zag) / P (striped) ... the padded documents are then laid out one after another").
m = cv.shard_map("zigzag-per-document", 10, 2, [7, 3])
expect("zigzag-per-document, documents 7 and 3 on 2 ranks (= te-thd)", ranks_of(m),
       [[0, 1, 6, -1, 7, -1], [2, 3, 4, 5, 8, 9]])
m = cv.shard_map("striped-per-document", 32, 4, [9, 2, 21])  # the quick suite's docs-striped-p4
expect("striped-per-document, documents 9, 2, 21 on 4 ranks", ranks_of(m),
       [[0, 4, 8, 9, 11, 15, 19, 23, 27, 31], [1, 5, -1, 10, 12, 16, 20, 24, 28, -1],
        [2, 6, -1, -1, 13, 17, 21, 25, 29, -1], [3, 7, -1, -1, 14, 18, 22, 26, 30, -1]])
for name in ("zigzag-per-document", "striped-per-document"):
    if name not in cv.describe():
        failures.append(f"`layouts` does not list {name}")
    else:
        print(f"ok   `layouts` lists {name}")

# A convention's parameter: only torch-round-robin takes one, a positive integer (the PTRR block size).
for bad in ("torch-round-robin:abc", "torch-round-robin:0", "torch-round-robin:-4", "torch-round-robin:",
            "zigzag:7", "te-thd:2"):
    try:
        cv.shard_map(bad, 16, 2, causal=True)
        failures.append(f"layout '{bad}' was accepted")
    except ValueError as e:
        print(f"ok   layout '{bad}' is refused: {e}")
expect("torch-round-robin:4 takes its block size", [[len(p) for p in cv.shard_map("torch-round-robin:4", 16, 2,
                                                                                 causal=True).positions]], [[8, 8]])

# Negative controls: the checks above can fail.
try:
    cv.ShardMap("broken", 4, 2, [np.array([0, 1]), np.array([1, 3])], [np.array([0, 1]), np.array([2, 3])],
                [4]).validate()
    failures.append("a map holding position 1 twice passed validation")
except ValueError:
    print("ok   a map holding a position twice is refused")
before = len(failures)
expect("negative control (must be reported)", [[0, 1]], [[1, 0]])
if len(failures) != before + 1:
    failures.append("the comparison did not catch a wrong map")
else:
    failures.pop()
    print("ok   a wrong map is reported")
try:
    cv.shard_map("no-such-layout", 8, 2)
    failures.append("an unknown convention was accepted")
except KeyError:
    print("ok   an unknown convention is refused")

for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
