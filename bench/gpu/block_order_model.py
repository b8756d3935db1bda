#!/usr/bin/env python3
"""The causal forward's block order, modelled: how long one launch takes when its thread blocks
start in the plain grid order (query tiles fastest, then B x H) and in forward_launch's
heaviest-first order (gpu/kernels/kernel_params.hpp), on sdpa_compare.py's shapes.

A prediction, not a measurement. The model is list scheduling: the SMs hold `--slots` blocks at
once (132 SMs x 2 forward blocks on an H100), a block starts on the first slot to free up, in
launch order, and lasts `--fixed` + its key tiles (BQ = 128 query rows, BK = 64 keys: query tile
i of a causal S x S block sees 2 (i + 1) key tiles; the prologue and epilogue are counted as
`--fixed` key tiles). The unit is 64 keys' work at both head dims: the D = 64 kernel's 128-key
tiles (since 2026-11-28) are two units each, which changes no ratio the model prints. Sections of heads are forward_launch's (K and V of a section's heads within
24 MiB). What the model leaves out: L2 and DRAM traffic, the masked tiles' extra cost, the
blocks' different speeds when they share an SM.

  python3 bench/gpu/block_order_model.py [--slots N] [--fixed F] [--backward]
  python3 bench/gpu/block_order_model.py --self-test
"""
import argparse
import heapq
import sys

BQ, BK = 128, 64
SECTION_BYTES = 24 << 20  # kOrderSectionBytes


def makespan(works, slots):
    """List scheduling: each work starts, in order, on the slot that frees up first."""
    free = [0.0] * slots
    for w in works:
        heapq.heapreplace(free, free[0] + w)
    return max(free)


def order_section(batch_heads, keys, dim):
    """forward_launch's heads per section (no GQA): the largest divisor of B H within the budget."""
    most = max(1, SECTION_BYTES // (keys * dim * 2 * 2))
    return max(d for d in range(1, batch_heads + 1) if batch_heads % d == 0 and d <= most)


def launch_orders(seq, batch_heads, dim, fixed, causal=True):
    """The blocks' works in the plain and the heaviest-first launch order."""
    tiles = (seq + BQ - 1) // BQ

    def work(tile):
        keys = min(seq, (tile + 1) * BQ) if causal else seq
        return fixed + (keys + BK - 1) // BK

    plain = [work(t) for _ in range(batch_heads) for t in range(tiles)]
    if not causal:
        return plain, plain
    section = order_section(batch_heads, seq, dim)
    heavy = [work(tiles - 1 - t) for _ in range(batch_heads // section) for t in range(tiles) for _ in range(section)]
    return plain, heavy


def backward_orders(seq, batch_heads, dim, fixed):
    """The backward's blocks (128 keys each; query tiles of 128 rows at D = 64, 64 at D = 128): key
    block j of a causal S x S block sees the query tiles from its own on. Its launch order already
    starts each head's heaviest block first (key blocks along x); the alternative: every head at a
    key block before the next (one section)."""
    bq = 128 if dim == 64 else 64
    blocks = (seq + 127) // 128

    def work(j):
        return fixed + (seq - 128 * j + bq - 1) // bq

    plain = [work(j) for _ in range(batch_heads) for j in range(blocks)]
    heads_first = [work(j) for j in range(blocks) for _ in range(batch_heads)]
    return plain, heads_first


def self_test():
    # Without the mask every block is equal: both orders take the same time.
    plain, heavy = launch_orders(4096, 16, 128, 2, causal=False)
    assert makespan(plain, 264) == makespan(heavy, 264)
    # Both orders hold the same blocks.
    plain, heavy = launch_orders(4096, 16, 128, 2)
    assert sorted(plain) == sorted(heavy)
    # Heaviest first is never later than the plain order on these shapes, and strictly earlier
    # where the tail matters (few blocks per slot).
    for seq, bh, dim in [(1024, 512, 64), (16384, 32, 64), (1024, 256, 128), (4096, 64, 128), (16384, 16, 128)]:
        plain, heavy = launch_orders(seq, bh, dim, 2)
        assert makespan(heavy, 264) <= makespan(plain, 264), (seq, bh, dim)
    plain, heavy = launch_orders(4096, 64, 128, 2)
    assert makespan(heavy, 264) < 0.95 * makespan(plain, 264)
    # The backward's two orders hold the same blocks.
    plain, other = backward_orders(4096, 64, 128, 2)
    assert sorted(plain) == sorted(other)
    # The list scheduler itself: 3 equal jobs on 2 slots take 2 units.
    assert makespan([1, 1, 1], 2) == 2
    # Sections: one kv head of 16K keys at D = 128 is 8 MiB, so 3 heads fit 24 MiB; of 16, 2 divides.
    assert order_section(16, 16384, 128) == 2
    assert order_section(512, 1024, 64) == 64  # 96 heads fit; the largest divisor of 512 up to 96
    print("block_order_model: self-test passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=264, help="blocks in flight: SMs x blocks per SM (H100: 132 x 2)")
    parser.add_argument("--fixed", type=float, default=2.0, help="a block's prologue and epilogue, in key tiles")
    parser.add_argument("--backward", action="store_true",
                        help="the backward's launch (132 slots: one 8-warp block per SM) against a heads-first order")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    # sdpa_compare.py's causal shapes: B x S = 16K tokens, H x D = 2048.
    shapes = [(64, 1024), (64, 16384), (128, 1024), (128, 4096), (128, 16384)]
    if args.backward:
        slots, unit, orders, other = args.slots // 2, "query tile", backward_orders, "heads 1st"
    else:
        slots, unit, orders, other = args.slots, "key tile", launch_orders, "heavy 1st"
    print(f"causal {'backward' if args.backward else 'forward'}, one launch: modelled time in {unit} units, "
          f"{slots} slots, {args.fixed:g} {unit}s per block besides its own (B x S = 16K tokens, H x D = 2048)")
    print(f"{'D':>4} {'S':>6} {'B x H':>6} {'blocks':>7} {'section':>8} {'plain':>9} {other:>10} {'ratio':>7}")
    for dim, seq in shapes:
        batch_heads = (16384 // seq) * (2048 // dim)
        plain, reordered = orders(seq, batch_heads, dim, args.fixed)
        a, b = makespan(plain, slots), makespan(reordered, slots)
        blocks = len(plain) // batch_heads
        section = batch_heads if args.backward else order_section(batch_heads, seq, dim)
        print(f"{dim:>4} {seq:>6} {batch_heads:>6} {blocks:>7} {section:>8} {a:>9.0f} {b:>10.0f} {b / a:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
