#!/usr/bin/env python3
"""How often forward_fa2's warps skip the online-softmax rescale, modelled on sdpa_compare.py's
random inputs.

A warp rescales its 16-row block's o by alpha = 2^(m_old - m_new) after each key tile; where no
row of the block got a new maximum, alpha = 1 in every lane and the warp skips it
(online_softmax_log2, gpu/kernels/forward_fa2.cuh). This draws 16-row blocks of independent
normal scores (what randn Q and K give a fixed query row, up to scale), walks their key tiles
in order (causal: up to each row's diagonal, a block at a random query tile), and prints the
share of all its tiles whose block's maxima all stayed put, for the kernel's key tiles at each head
dim (128 keys at D = 64, 64 at D = 128).

A prediction, not a measurement: real attention scores are not independent draws, and the time
saved depends on whether the loop is bound by issuing instructions.

  python3 bench/gpu/rescale_skip_model.py [--blocks N] [--seed S]
"""
import argparse

import numpy as np

ROWS = 16
TILES = {64: 128, 128: 64}  # head dim: keys per tile (ForwardFa2Tiles::kBlockK)


def skip_share(rng, seq, causal, blocks, tile):
    skipped = walked = 0
    for _ in range(blocks):
        q0 = int(rng.integers(0, seq // ROWS)) * ROWS if causal else 0
        keys = q0 + ROWS if causal else seq
        scores = rng.standard_normal((ROWS, keys)).astype(np.float32)
        if causal:
            for i in range(ROWS):
                scores[i, q0 + i + 1:] = -np.inf
        m = np.full(ROWS, -np.inf, dtype=np.float32)
        for k0 in range(0, keys, tile):
            fresh = np.maximum(m, scores[:, k0:k0 + tile].max(axis=1))
            walked += 1  # the first tile always rescales (alpha = 0 from m = -inf)
            skipped += k0 > 0 and bool(np.all(fresh == m))
            m = fresh
    return skipped / walked if walked else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=200, help="16-row blocks drawn per shape")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| D | keys per tile | S | tiles that skip the rescale, full | causal |")
    print("|---|---|---|---|---|")
    for dim, tile in TILES.items():
        for seq in (1024, 4096, 16384):
            full = skip_share(rng, seq, False, args.blocks, tile)
            causal = skip_share(rng, seq, True, args.blocks, tile)
            print(f"| {dim} | {tile} | {seq} | {full:.2f} | {causal:.2f} |")

if __name__ == "__main__":
    main()
