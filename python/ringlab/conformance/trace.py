"""Step trace: each rank's running (out, lse) after every ring step, against what the ring should hold.

After step t, rank r should have merged the K/V blocks that started on ranks r, r-1, ..., r-t (K/V
travel from rank r to r + 1; an implementation that sends them the other way holds r, r+1, ...,
r+t, and is judged by that direction when its step 1 says so). The expected partial is exact
attention of the rank's rows over the keys of those blocks only, under the case's mask. The first
(step, rank) whose partial is outside the case's out/lse tolerance is named: for a forward bug, the
step where it enters.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from . import oracle
from .conventions import ShardMap, visible


def _expected(case, smap: ShardMap, rank: int, origins: List[int]):
    a = case.arrays()
    pos = smap.positions[rank]
    real = pos >= 0
    owner = smap.owner()
    keys = np.isin(owner, origins)
    docs = case.doc_ids()
    allpos = np.arange(case.S)
    mask = visible(allpos, allpos, docs, docs, case.causal, case.window) & keys[None, :]
    out, lse = oracle.forward(a["q"], a["k"], a["v"], mask, case.scale)
    return out[:, pos[real]], lse[:, :, pos[real]], real


def _matches(case, out_e, lse_e, out_g, lse_g) -> bool:
    tol_o, tol_l = case.tolerances["out"], case.tolerances["lse"]
    seen = np.isfinite(lse_e)  # (B, H, rows): rows that have keys by this step
    lse_bad = np.where(seen, np.abs(lse_g - lse_e) > tol_l["abs"] + tol_l["rel"] * np.abs(np.where(seen, lse_e, 0)),
                       ~(np.isneginf(lse_g) | (lse_g < -1e4)))
    lse_bad |= np.isnan(lse_g)
    if lse_bad.any():
        return False
    seen_o = np.transpose(seen, (0, 2, 1))[..., None]
    err = np.where(seen_o, np.abs(out_g - out_e), 0.0)
    return bool((err <= tol_o["abs"] + tol_o["rel"] * np.abs(out_e)).all())


def check_trace(case, smap: ShardMap, results: List[Dict[str, Any]]) -> Optional[str]:
    """One line: where the first partial differs, or that every traced step matches (None: no trace)."""
    P = smap.ranks
    traces = [{step: (o, l) for step, o, l in res.get("partials", [])} for res in results]
    if not any(traces):
        return None
    direction = -1
    steps = sorted({s for t in traces for s in t})
    for t in steps:
        for r in range(P):
            if t not in traces[r]:
                continue
            o, l = traces[r][t]
            real = smap.positions[r] >= 0
            o, l = o[:, real], l[:, :, real]
            for d in ([direction] if t != 1 else [direction, -direction]):
                origins = sorted({(r + d * s) % P for s in range(t + 1)})
                out_e, lse_e, _ = _expected(case, smap, r, origins)
                if _matches(case, out_e, lse_e, o, l):
                    direction = d
                    break
            else:
                origins = [(r + direction * s) % P for s in range(t + 1)]
                return (f"step trace: the first partial that differs is rank {r} after step {t}: it should hold the "
                        f"merge of the K/V blocks of ranks {', '.join(map(str, origins))}")
    way = "r - 1 (K/V sent to r + 1)" if direction == -1 else "r + 1 (K/V sent to r - 1)"
    return f"step trace: every partial matches the ring through step {steps[-1]} (blocks arriving from rank {way})"
