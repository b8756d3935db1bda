"""Why a case failed: the wrong rows, the ranks and ring steps that own them, and the likely cause.

The ring the diagnosis assumes is the common one: K/V blocks travel from rank r to r + 1, so at
step t rank r computes with the block that started on rank (r - t) mod P. The cause is derived
from the error pattern against the case's structure, in this order:

1. non-finite values: in rows whose logits are large (an exp of an unshifted logit or lse
   overflowed: the merge is unstable), or in rows that see no key (a fully masked row's
   exp(-inf - (-inf))).
2. the forward is wrong. With out right and lse wrong, the lse alone is judged (log2 units, the
   lse of unscaled logits). Otherwise what-if outputs, each exact attention with one rule of the mask broken
   (window ignored, documents ignored, causal ignored, causal off by one, padding read as keys,
   the last token of a document dropped), and exact attention in which each rank weighs every
   block's keys with its own V rows (K sent around the ring, V not), and the ring's online softmax
   without the rescale by exp(m_old - m_new); the implementation's output
   matching one within the case's tolerance names it. Otherwise the ring steps every wrong row
   sees, against the rows that are right.
3. only the backward is wrong: an error small against the gradients' size and spread over most
   rows is low-precision accumulation; a wrong dQ exactly in the rows that see keys from other
   ranks is a stale K/V chunk; a right dQ with wrong dK/dV where each rank's dK/dV is exactly the
   whole gradient of another rank's block is dK/dV not brought home (the last hop missing); any
   other right dQ with wrong dK/dV is dK/dV sent against the K/V direction, and a least-squares fit
   of the error on the per-(rank, block) contributions names which contributions are missing and
   which are extra.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np

from . import oracle
from .conventions import ShardMap, visible

PRECISION_REL = 0.05  # an error below this fraction of the tensor's largest value is rounding, not logic


@dataclasses.dataclass
class Diagnosis:
    cause: str  # a short name: "window ignored", "stale K/V chunk in the backward", ...
    explanation: str  # one sentence
    details: List[str] = dataclasses.field(default_factory=list)

    def lines(self) -> List[str]:
        return [f"likely cause: {self.cause} - {self.explanation}"] + self.details

    def to_json(self):
        return {"cause": self.cause, "explanation": self.explanation, "details": self.details}


def _within(got, ref, tol) -> bool:
    """Every element of got within the tolerance of ref: |got - ref| <= abs + rel |ref| (NaN never)."""
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(got - ref) <= tol["abs"] + tol["rel"] * np.abs(ref)))


def ranges(xs, limit=8) -> str:
    """Sorted integers as runs ("0-3, 7"); past `limit` runs (None: no limit), the rest counted."""
    xs = sorted(int(x) for x in xs)
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(f"{xs[i]}" if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    if limit is not None and len(out) > limit:
        return ", ".join(out[:limit]) + f", ... ({len(xs)} in all)"
    return ", ".join(out)


class _Ctx:
    """The case's structure, computed once."""

    def __init__(self, case, smap: ShardMap, outputs: Dict[str, np.ndarray]):
        self.case, self.smap, self.outputs = case, smap, outputs
        self.a = case.arrays()
        self.P = smap.ranks
        self.owner = smap.owner()
        self.docs = case.doc_ids()
        pos = np.arange(case.S)
        self.mask = visible(pos, pos, self.docs, self.docs, case.causal, case.window)
        # steps[i] = set of ring steps at which row i's rank computes with a block holding its keys
        self.row_steps = []
        for i in range(case.S):
            srcs = np.unique(self.owner[self.mask[i]])
            self.row_steps.append({int((self.owner[i] - s) % self.P) for s in srcs})

    def row_ratio(self, name: str) -> np.ndarray:
        """(S,): max over batch, heads and dim of |err| / allowed at each position (inf for NaN)."""
        got, ref = self.outputs[name], self.a[name]
        tol = self.case.tolerances[name]
        err = np.abs(got - ref)
        if name == "lse":
            empty = np.isneginf(ref)
            err = np.where(empty, np.where(np.isneginf(got) | (got < -1e4), 0.0, np.inf), err)
            ratio = err / (tol["abs"] + tol["rel"] * np.abs(np.where(empty, 0, ref)))
            ratio = np.where(np.isnan(ratio), np.inf, ratio)
            return ratio.max(axis=(0, 1))
        ratio = err / (tol["abs"] + tol["rel"] * np.abs(ref))
        ratio = np.where(np.isnan(ratio), np.inf, ratio)
        return ratio.max(axis=(0, 2, 3))

    def wrong(self, name: str) -> np.ndarray:
        if name not in self.outputs:
            return np.zeros(0, dtype=np.int64)
        return np.nonzero(self.row_ratio(name) > 1)[0]

    def nonfinite(self, name: str) -> np.ndarray:
        if name not in self.outputs:
            return np.zeros(0, dtype=np.int64)
        x = self.outputs[name]
        bad = ~np.isfinite(x)
        if name == "lse":
            bad &= ~np.isneginf(x)
            return np.nonzero(bad.any(axis=(0, 1)))[0]
        return np.nonzero(bad.any(axis=(0, 2, 3)))[0]

    def where(self, rows) -> str:
        ranks = sorted({int(self.owner[i]) for i in rows})
        return f"positions {ranges(rows)} on rank{'s' if len(ranks) > 1 else ''} {ranges(ranks)}"

    def steps_of(self, rows) -> List[int]:
        s = set()
        for i in rows:
            s |= self.row_steps[i]
        return sorted(s)

    def ratio_against(self, name: str, what_if: np.ndarray) -> float:
        got = self.outputs[name]
        tol = self.case.tolerances[name]
        err = np.abs(got - what_if)
        r = err / (tol["abs"] + tol["rel"] * np.abs(what_if))
        r = np.where(np.isnan(r), np.inf, r)
        return float(r.max())


def diagnose(case, smap: ShardMap, outputs: Dict[str, np.ndarray], comparisons) -> Diagnosis:
    c = _Ctx(case, smap, outputs)
    wrong = {name: c.wrong(name) for name in ("out", "lse", "dq", "dk", "dv")}
    summary = ["wrong rows: " + "; ".join(f"{n} {len(w)} of {case.S}" for n, w in wrong.items() if len(w))]
    forward_wrong = len(wrong["out"]) or len(wrong["lse"])
    if not any(len(w) for w in wrong.values()):
        return _rms_only(c, comparisons)
    # With out right, no what-if on out can tell anything apart (each matches it as well as the oracle
    # does), so an error in lse alone is judged on lse: its units and scale.
    lse_only = not len(wrong["out"]) and len(wrong["lse"])
    for find in (_nonfinite, _lse_only if lse_only else _forward if forward_wrong else _backward):
        d = find(c, wrong)
        if d is not None:
            d.details = summary + d.details
            return d
    return Diagnosis("unrecognised", "the error matches none of the known patterns; the rows and steps below "
                     "locate it", summary)


def _rms_only(c: _Ctx, comparisons) -> Diagnosis:
    """Every element within its bound, but the RMS error over its bound: rounding that accumulates."""
    over = [x for x in comparisons if x.rms_bound > 0 and x.rms > x.rms_bound]
    names = [x.output for x in over]
    single = {n: c.case.tolerances[n].get("rms_single_device", 0.0) for n in names}
    details = [f"every element within its tolerance; the RMS error is over its bound for {', '.join(names)}"]
    details += [f"{x.output}: RMS {x.rms:.3g}, {x.rms / single[x.output]:.2g} times the single-device RMS "
                f"{single[x.output]:.3g} (bound {x.rms_bound:.3g})" for x in over if single[x.output] > 0]
    which = "dK/dV are" if set(names) <= {"dk", "dv"} else "partial results are"
    return Diagnosis("low-precision accumulation",
                     f"{which} accumulated across ring steps in a low-precision type: each element stays close but "
                     "the error as a whole is larger than one device's and grows with P; keep the accumulators in "
                     "float32 and round once at the end", details)


# ---- 1. NaN / inf --------------------------------------------------------------------------------

def _nonfinite(c: _Ctx, wrong) -> Optional[Diagnosis]:
    rows = sorted(set().union(*[set(c.nonfinite(n).tolist()) for n in ("out", "lse", "dq", "dk", "dv")]))
    if not rows:
        return None
    lse = c.a["lse"].max(axis=(0, 1))
    limit = 11.0 if c.case.dtype == "fp16" else 88.0  # log of the largest finite value of the compute type
    fwd_rows = sorted(set(c.nonfinite("out").tolist()) | set(c.nonfinite("lse").tolist()))
    first = fwd_rows or rows
    empty = [i for i in first if np.isneginf(lse[i])]
    big = [i for i in first if np.isfinite(lse[i]) and lse[i] > limit]
    where = c.where(first)
    if big and len(big) == len(first):
        return Diagnosis(
            "unstable exp merge",
            f"the partial results are combined with exp of an unshifted log-sum-exp (or logit), which overflows "
            f"past {limit:g}; combine them as exp(lse_part - lse_new), or with log-sigmoid",
            [f"non-finite values in {where}; the oracle's lse there is {lse[big].min():.1f} to {lse[big].max():.1f}",
             f"every row with a finite oracle lse below {limit:g} is finite"])
    if empty and len(empty) == len(first):
        return Diagnosis(
            "NaN in rows that see no key",
            "a fully masked row takes exp(-inf - (-inf)); such a row's out must be 0 and its lse -inf",
            [f"NaN in {where}: each of these rows sees no key under the case's mask"])
    return Diagnosis("non-finite values", "NaN or inf in rows that neither overflow nor see no key",
                     [f"non-finite values in {where}"])


# ---- 2. the forward ------------------------------------------------------------------------------

def _lse_only(c: _Ctx, wrong) -> Diagnosis:
    """out is right and lse is not: the attention is right, the lse returned is in other units."""
    case, a = c.case, c.a
    got, ref = c.outputs["lse"], a["lse"]
    grads = [n for n in ("dq", "dk", "dv") if n in c.outputs]
    grads_ok = grads and not any(len(wrong[n]) for n in grads)
    details = [f"out{', ' + ', '.join(grads) if grads_ok else ''} within tolerance; wrong: lse at "
               f"{c.where(wrong['lse'])}"]
    real = np.isfinite(ref)
    tol = case.tolerances["lse"]

    def matches(what_if) -> bool:
        return _within(got[real], what_if[real], tol)

    if matches(ref / np.log(2)):
        return Diagnosis("lse in log2 units", "the returned lse is log2 of the sum of exponentials (a kernel that "
                         "works with exp2 keeps its lse in base 2): the harness expects the natural log; multiply "
                         "it by ln 2 before returning it", details)
    _, unscaled = oracle.forward(a["q"], a["k"], a["v"], c.mask, 1.0)
    if matches(unscaled):
        return Diagnosis("lse of unscaled logits", "the returned lse is log-sum-exp of q.k without the softmax "
                         "scale, while out used the scaled scores: return the lse of scale * q.k", details)
    rows = wrong["lse"]
    details += _step_lines(c, rows)
    return Diagnosis("lse alone wrong", "out is right, so the attention is right, but the lse returned is not "
                     "log(sum_j exp(scale q_i.k_j)) over the keys each row sees: check its base (natural log), "
                     "its layout (B, H, S_local) and that it is the final merged lse, not one step's", details)


def _what_if_masks(c: _Ctx, wrong_out) -> List[Tuple[str, str, np.ndarray, Optional[np.ndarray]]]:
    """(cause, explanation, mask, rows forced to zero) for each rule of the mask broken on its own."""
    case = c.case
    pos = np.arange(case.S)
    hyps = []
    if case.window > 0:
        hyps.append(("window ignored", "the output is exact attention without the sliding window: the "
                     "context-parallel path drops the window (full causal attention)",
                     visible(pos, pos, c.docs, c.docs, case.causal, 0), None))
    if c.docs is not None:
        hyps.append(("document boundaries ignored", "the output is attention across documents: the packed "
                     "documents (cu_seqlens) are not applied on this path",
                     visible(pos, pos, None, None, case.causal, case.window), None))
    if case.causal:
        hyps.append(("causal mask ignored", "the output is non-causal attention: the causal flag is lost on this "
                     "path (or a load balancer reordered tokens and the mask followed local order)",
                     visible(pos, pos, c.docs, c.docs, False, case.window), None))
        m = visible(pos, pos, c.docs, c.docs, True, case.window) & (pos[:, None] != pos[None, :])
        hyps.append(("causal offset", "the output is causal attention that excludes the diagonal (j < i instead of "
                     "j <= i): the causal offset between a query block and a key block is off by one", m, None))
        m = visible(pos, pos, c.docs, c.docs, True, case.window) | (
            (pos[None, :] == pos[:, None] + 1) & _same_doc(c))
        hyps.append(("causal offset", "the output is causal attention that also sees the next token (j <= i + 1): "
                     "the causal offset between a query block and a key block is off by one", m, None))
    if (case.causal or case.window > 0) and c.P > 1:
        # The mask fed each shard's row indices (0, 1, ... on every rank) instead of global positions:
        # right on a rank's own block, wrong on every block from another rank.
        local = c.smap.local_row()
        hyps.append(("mask by local row index", "the output is attention masked by the rows' indices within "
                     "their shards (i >= j locally) instead of their global positions: right on each rank's own "
                     "block, wrong on every block from another rank; take the mask from the positions each "
                     "block holds (its origin rank and the layout)",
                     visible(local, local, c.docs, c.docs, case.causal, case.window), None))
        # The rows masked by their index in the ranks' concatenation (rank 0's rows, then rank 1's: what
        # an all-to-all or all-gather returns) as if that were position order: right on a contiguous layout.
        offsets = np.cumsum([0] + [len(held) for held in c.smap.positions[:-1]])
        concatenated = offsets[c.owner] + local
        if not np.array_equal(concatenated, pos):
            hyps.append(("mask in shard order", "the output is attention masked by each row's index in the ranks' "
                         "concatenation (rank 0's rows, then rank 1's, ...: what an all-to-all or all-gather "
                         f"returns) as if that were position order, which holds only for a contiguous layout, not "
                         f"{c.smap.convention}: mask the gathered rows by their global positions (or put them in "
                         "position order first)",
                         visible(concatenated, concatenated, c.docs, c.docs, case.causal, case.window), None))
        if "zigzag" in c.smap.convention:
            # Each rank's two chunks taken in the other order: the mask gives row l the position of row
            # l + n/2 (mod n), n the rank's rows.
            swapped = np.arange(case.S)
            for held in c.smap.positions:
                n = len(held)
                if n % 2 == 0 and (held >= 0).all():
                    swapped[held] = held[(np.arange(n) + n // 2) % n]
            if not np.array_equal(swapped, pos):
                hyps.append(("zig-zag chunks swapped", "the output is attention masked as if each rank's two "
                             "zig-zag chunks were held in the other order (the late chunk first): the rows are "
                             "right but the mask gives each row the other chunk's positions; a rank r holds "
                             "chunk r first, then chunk 2P - 1 - r",
                             visible(swapped, swapped, c.docs, c.docs, case.causal, case.window), None))
    # The last real token of a document taken for padding (a length rounded down).
    docs = c.case.docs or [case.S]
    ends = np.cumsum(docs) - 1
    # The dropped tokens' own rows are wrong (their output is lost); under a causal mask nothing else is.
    dropped = np.intersect1d(wrong_out, ends)
    if len(dropped):
        m = visible(pos, pos, c.docs, c.docs, case.causal, case.window)
        m[:, dropped] = False
        m[dropped, :] = False
        hyps.append(("last token of a document dropped", "the last real token of the documents ending at "
                     f"{ranges(dropped)} is treated as padding (a length rounded down to a multiple, e.g. 7 read as "
                     "6): its own output is lost and no query sees it", m, dropped))
    return hyps


def _same_doc(c: _Ctx) -> np.ndarray:
    if c.docs is None:
        return np.ones((c.case.S, c.case.S), dtype=bool)
    return c.docs[:, None] == c.docs[None, :]


def _padding_what_if(c: _Ctx):
    """Exact attention on the convention's padded sequence, padding rows (zeros) read as real keys."""
    smap, case = c.smap, c.case
    n = smap.padded_length
    if n == case.S:
        return None
    slot_pos = np.full(n, -1)
    for p, s in zip(smap.positions, smap.slots):
        slot_pos[s] = p
    real = np.nonzero(slot_pos >= 0)[0]
    pdocs = np.repeat(np.arange(len(smap.padded_docs)), smap.padded_docs) if c.docs is not None else None
    slots = np.arange(n)
    mask = visible(slots, slots, pdocs, pdocs, case.causal, case.window)
    padded = {}
    for name in ("q", "k", "v"):
        g = c.a[name]
        a = np.zeros((g.shape[0], n) + g.shape[2:])
        a[:, real] = g[:, slot_pos[real]]
        padded[name] = a
    out, _ = oracle.forward(padded["q"], padded["k"], padded["v"], mask, case.scale)
    order = np.argsort(slot_pos[real])
    return out[:, real[order]]


def _heads_permuted_what_if(c: _Ctx):
    """The exact output with its heads permuted, and the permutation in words, where each output head
    equals exactly one head of the exact output and they are not all in place."""
    got, ref = c.outputs["out"], c.a["out"]
    tol = c.case.tolerances["out"]
    H = ref.shape[2]
    if H < 2:
        return None
    source = []
    for h in range(H):
        fits = [g for g in range(H) if _within(got[:, :, h], ref[:, :, g], tol)]
        if not fits:
            return None
        source.append(h if h in fits else fits[0])
    if source == list(range(H)) or len(set(source)) != H:
        return None
    moved = [f"{h} <- {g}" for h, g in enumerate(source) if h != g]
    return ref[:, :, source], "head " + ", ".join(moved[:8]) + (" ..." if len(moved) > 8 else "")


def _rows_permuted_what_if(c: _Ctx, rows):
    """The exact output with each wrong row taken from another row, and the moves in words, where every
    wrong row equals another row of the exact output, or is zero (a padding row's place), and at least
    two equal real rows. Rows that tie (large logits: one key dominates) take the first that fits."""
    got, ref = c.outputs["out"], c.a["out"]
    tol = c.case.tolerances["out"]
    if len(rows) < 2:
        return None
    what_if = ref.copy()
    moves = []
    for i in rows:
        fits = [j for j in range(ref.shape[1]) if j != i and _within(got[:, i], ref[:, j], tol)]
        if fits:
            what_if[:, i] = ref[:, fits[0]]
            moves.append(f"row {i} holds row {fits[0]}'s")
        elif (np.abs(got[:, i]) <= tol["abs"]).all():
            what_if[:, i] = 0.0
        else:
            return None
    if len(moves) < 2:
        return None
    return what_if, "; ".join(moves[:4]) + (" ..." if len(moves) > 4 else "")


def _scale_what_if(c: _Ctx, scale: float):
    """Exact attention with another softmax scale (None where it is the case's)."""
    if abs(scale - c.case.scale) <= 1e-12 * abs(c.case.scale):
        return None
    a = c.a
    out, _ = oracle.forward(a["q"], a["k"], a["v"], c.mask, scale)
    return out


def _padding_keys_visible_what_if(c: _Ctx):
    """Exact attention with the padding rows (zero keys and values, position -1) seen as keys by every query
    the mask's other rules let through: each adds exp(0) to the softmax's sum and nothing to its values."""
    smap, case = c.smap, c.case
    n_pad = sum(int((held < 0).sum()) for held in smap.positions)
    if n_pad == 0 or not (case.causal or case.window > 0):
        return None  # without a causal mask or window it is padding read as keys (_padding_what_if)
    a = c.a
    pos = np.arange(case.S)
    sees = np.ones(case.S, dtype=bool)
    if c.docs is not None:
        return None  # padding has no document: a document test already hides it
    if case.window > 0:
        sees &= (pos + 1 < case.window)
    out, lse = oracle.forward(a["q"], a["k"], a["v"], c.mask, case.scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        grown = np.logaddexp(lse, np.where(sees[None, None, :], np.log(n_pad), -np.inf))
        factor = np.where(np.isfinite(grown), np.exp(lse - grown), 0.0)  # (B, H, S)
    return out * factor.transpose(0, 2, 1)[..., None]


def _gqa_tiled_what_if(c: _Ctx):
    """Exact attention with query head h reading K/V head h mod HKV."""
    a = c.a
    H, HKV = a["q"].shape[2], a["k"].shape[2]
    if HKV < 2 or H == HKV:
        return None
    heads = [h % HKV for h in range(H)]
    out, _ = oracle.forward(a["q"], a["k"][:, :, heads], a["v"][:, :, heads], c.mask, c.case.scale)
    return out


def _own_v_what_if(c: _Ctx):
    """Exact attention in which each rank weighs the keys of every block with its own V rows, laid row for
    row under that block's positions: what a ring that sends K and never V computes (its lse is right)."""
    smap, case, a = c.smap, c.case, c.a
    if c.P < 2 or len({len(p) for p in smap.positions}) != 1:
        return None
    out = np.zeros_like(a["q"])
    for r in range(c.P):
        mine = smap.positions[r]
        v = np.zeros_like(a["v"])
        for y in range(c.P):
            theirs = smap.positions[y]
            held = theirs >= 0
            src = mine[held]
            v[:, theirs[held]] = np.where((src >= 0)[None, :, None, None], a["v"][:, np.maximum(src, 0)], 0.0)
        rows = np.nonzero(c.owner == r)[0]
        if len(rows):
            out[:, rows], _ = oracle.forward(a["q"][:, rows], a["k"], v, c.mask[rows], case.scale)
    return out


def _online_no_rescale_what_if(c: _Ctx):
    """The ring's online softmax (running max m, sum l, unnormalised output) with the rescale by
    exp(m_old - m_new) left out: each block's exponentials are taken against the running max of its step,
    and what was summed before is never brought to the new max. Blocks in ring order (origin (r - t) mod P)."""
    case, a, P = c.case, c.a, c.P
    if P < 2:
        return None
    q, k, v = a["q"], a["k"], a["v"]
    group = q.shape[2] // k.shape[2]
    out = np.zeros(q.shape)
    for r in range(P):
        rows = np.nonzero(c.owner == r)[0]
        if not len(rows):
            continue
        B, H = q.shape[0], q.shape[2]
        m = np.full((B, H, len(rows)), -np.inf)
        total = np.zeros((B, H, len(rows)))
        acc = np.zeros((B, H, len(rows), q.shape[3]))
        for t in range(P):
            keys = np.nonzero(c.owner == (r - t) % P)[0]
            vis = c.mask[np.ix_(rows, keys)]
            if not vis.any():
                continue
            kx, vx = np.repeat(k[:, keys], group, axis=2), np.repeat(v[:, keys], group, axis=2)
            s = case.scale * np.einsum("bqhd,bkhd->bhqk", q[:, rows], kx)
            s = np.where(vis[None, None], s, -np.inf)
            m = np.maximum(m, s.max(axis=-1))
            p = np.where(vis[None, None], np.exp(s - np.where(np.isfinite(m), m, 0.0)[..., None]), 0.0)
            acc += np.einsum("bhqk,bkhd->bhqd", p, vx)
            total += p.sum(axis=-1)
        out[:, rows] = (acc / np.where(total > 0, total, 1.0)[..., None]).transpose(0, 2, 1, 3)
    return out


def _forward(c: _Ctx, wrong) -> Optional[Diagnosis]:
    case = c.case
    a = c.a
    rows = wrong["out"] if len(wrong["out"]) else wrong["lse"]
    best = None

    def consider(what_if, cause, why):  # keeps the what-if output closest to the implementation's
        nonlocal best
        if what_if is None:
            return
        r = c.ratio_against("out", what_if)
        if r <= 1 and (best is None or r < best[0]):
            best = (r, cause, why)

    for cause, why, mask, zero_rows in _what_if_masks(c, wrong["out"]):
        out, _ = oracle.forward(a["q"], a["k"], a["v"], mask, case.scale)
        if zero_rows is not None:
            out[:, zero_rows] = c.outputs["out"][:, zero_rows]  # whatever the implementation put there
        consider(out, cause, why)
    consider(_padding_what_if(c), "padding read as keys",
             f"the output is exact attention with the {c.smap.padded_length - case.S} padding rows of layout "
             f"{c.smap.convention} taken as real tokens: mask them (position -1, or cu_seqlens without the padding)")
    consider(_own_v_what_if(c), "V not sent with K",
             "the output is attention with the right weights over the wrong values: each rank multiplies the keys "
             "that arrived from other ranks with its own V rows; V must travel around the ring with K (the lse, "
             "which depends on K alone, is right)")
    moved = _rows_permuted_what_if(c, rows)
    if moved is not None:
        consider(moved[0], "rows returned to the wrong place",
                 f"each wrong output row is exactly the result of another row, or zero where a padding row's "
                 f"went ({moved[1]}): the attention is "
                 "right but its rows go back to the wrong rank or local row (the exchange that returns the "
                 "sequence lays it out in another order than the one that gathered it: (P, rows) against (rows, P))")
    consider(_scale_what_if(c, 1.0), "softmax scale not applied",
             f"the output is exact attention with the scores not multiplied by the scale ({case.scale:.4g}): "
             "apply ctx.scale (1/sqrt(D) by default) to q k^T")
    consider(_padding_keys_visible_what_if(c), "padding keys visible",
             "the output is exact attention in which every query also sees the padding rows as keys (zero keys, "
             "zero values, at position -1, which passes a causal test j <= i): mask keys whose position is -1")
    permuted = _heads_permuted_what_if(c)
    if permuted is not None:
        consider(permuted[0], "heads permuted",
                 f"output head h holds the exact result of another head ({permuted[1]}): the exchange that "
                 "returns the heads to their ranks lays them out in another order than the one that sent them "
                 "(rank-major against head-major)")
    consider(_gqa_tiled_what_if(c), "GQA heads grouped wrong",
             "the output is exact attention with query head h reading K/V head h mod HKV (the K/V heads tiled) "
             "instead of h // (H / HKV) (each K/V head repeated for its group of query heads): repeat_interleave, "
             "not repeat")
    consider(_online_no_rescale_what_if(c), "missing rescale",
             "the output is the ring's online softmax with the running sum and output never rescaled by "
             "exp(m_old - m_new) when a later block raises the running max m: multiply both by it before adding "
             "the new block")
    details = [f"wrong output rows: {c.where(rows)}"]
    details += _step_lines(c, rows)
    if best is not None:
        details.append(f"the implementation's out matches that what-if within {best[0]:.2g} of the tolerance")
        return Diagnosis(best[1], best[2], details)
    fit = _forward_block_fit(c, rows)
    if fit is not None:
        cause, why, lines = fit
        return Diagnosis(cause, why, details + lines)
    # A merge that forgets to rescale: rows whose keys span several steps are wrong, single-step rows right.
    multi = np.array([len(s) > 1 for s in c.row_steps])
    wrong_set = np.zeros(case.S, dtype=bool)
    wrong_set[rows] = True
    if wrong_set.any() and np.array_equal(wrong_set, multi) and not len(wrong["lse"]):
        return Diagnosis("missing rescale", "exactly the rows that merge partial results from several ring steps "
                         "are wrong while their lse is right: the running output is not rescaled by "
                         "exp(lse_old - lse_new) when a new block is merged", details)
    return Diagnosis("wrong forward blocks", "no single broken mask rule explains the output; the lines below "
                     "say which ranks hold the wrong rows and which ranks' K/V blocks their keys sit in (the ring "
                     "steps at which a ring meets them; an all-to-all implementation meets them all at once)", details)


def _forward_block_fit(c: _Ctx, rows):
    """Which K/V blocks each rank merged, from its lse: exp(lse) = sum of exp(lse) of the merged blocks.

    The candidates for a rank are, for every ring step, the block it should merge there and - where the
    ranks hold equally many rows and S is small - every other block's K/V laid row for row under that
    step's positions and mask (what a stale or lagging buffer gives). Counts (non-negative integers,
    shared by all the rank's rows) other than one on the right blocks name what went wrong, and where."""
    if "lse" not in c.outputs:
        return None
    case, a, P, smap = c.case, c.a, c.P, c.smap
    equal = len({len(p) for p in smap.positions}) == 1 and case.S <= 512
    lines, stale = [], False
    swaps = []  # (rank, block due, block merged, needed) of every wrong block the fit names
    for r in sorted({int(c.owner[i]) for i in rows}):
        mine = np.nonzero(c.owner == r)[0]
        cands, labels = [], []
        for y in range(P):
            keys = c.owner == y
            for x in (range(P) if equal else [y]):
                k, v = a["k"], a["v"]
                if x != y:
                    k, v = k.copy(), v.copy()
                    py, px = smap.positions[y], smap.positions[x]
                    both = (py >= 0)
                    k[:, py[both]] = np.where((px[both] >= 0)[None, :, None, None], a["k"][:, px[both]], 0.0)
                    v[:, py[both]] = np.where((px[both] >= 0)[None, :, None, None], a["v"][:, px[both]], 0.0)
                _, lse_b = oracle.forward(a["q"], k, v, c.mask & keys[None, :], case.scale)
                cands.append(lse_b[:, :, mine])
                labels.append((x, y))
        cands = np.stack(cands)
        got = c.outputs["lse"][:, :, mine]
        top = np.max(np.where(np.isfinite(cands), cands, -np.inf), axis=0)
        ok = np.isfinite(top) & np.isfinite(got)
        if not ok.any():
            continue
        z = np.where(np.isfinite(cands), np.exp(cands - np.where(ok, top, 0)), 0.0)[:, ok]
        target = np.exp(got - np.where(ok, top, 0))[ok]
        index = {lab: i for i, lab in enumerate(labels)}
        # Each step y merges one block's data x_y (or none); start from the right ones and change one step at
        # a time while that lowers the residual (candidates of blocks a row sees whole are interchangeable,
        # so the smallest change that explains the lse is the one named).
        choice = {y: y for y in range(P)}

        def residual(ch):
            total = np.zeros_like(target)
            for y, x in ch.items():
                if x is not None:
                    total += z[index[(x, y)]]
            return float(np.abs(total - target).max() / max(target.max(), 1e-300))

        best = residual(choice)
        if best > 1e-3 and equal:
            # The whole ring rotated the other way (block r + t at step t) first: one step at a time, the
            # search below can settle on an equivalent set of swaps that hides the pattern.
            backwards = {y: (2 * r - y) % P for y in range(P)}
            if residual(backwards) <= 1e-3:
                choice, best = backwards, residual(backwards)
        improved = True
        while improved and best > 1e-3:
            improved = False
            for y in range(P):
                for x in [None] + ([xx for xx in range(P)] if equal else [y]):
                    trial = dict(choice)
                    trial[y] = x
                    r_trial = residual(trial)
                    if r_trial < best - 1e-9:
                        choice, best, improved = trial, r_trial, True
        if best > 1e-3:  # two steps wrong at once (a lagging buffer shifts every later step): try pairs
            options = [None] + (list(range(P)) if equal else [])
            start = {y: y for y in range(P)}
            for y1 in range(P):
                for y2 in range(y1 + 1, P):
                    for x1 in options + [y1]:
                        for x2 in options + [y2]:
                            trial = dict(start)
                            trial[y1], trial[y2] = x1, x2
                            r_trial = residual(trial)
                            if r_trial < best:
                                choice, best = trial, r_trial
        if best > 1e-3:
            return None
        words = []
        for y, x in choice.items():
            step = (r - y) % P
            needed = z[index[(y, y)]].max() > 0
            if x is None and needed:
                words.append(f"never merged the block of rank {y} (step {step})")
            elif x is not None and x != y:
                words.append(f"at step {step} merged the K/V of rank {x} where rank {y}'s belong")
                stale = True
                undone = dict(choice)
                undone[y] = y
                swaps.append((r, y, x, residual(undone) > 1e-3))  # needed: the lse is wrong without it
        if words:
            lines.append(f"rank {r} " + "; ".join(words))
    if not lines:
        return None
    # Every wrong block the one of rank r + t where rank r - t's is due at step t: the blocks travel the
    # other way round the ring from the one the mask (its positions for step t) assumes. A send buffer one
    # step behind gives rank r - t + 1's block at step t, the same one where 2t = 1 (mod P) (step 2 at
    # P = 3): a swap at another step is needed to tell them apart.
    reversed_ring = all(x == (2 * r - y) % P for r, y, x, _ in swaps)
    if stale and reversed_ring and any(needed and 2 * ((r - y) % P) % P != 1 for r, y, _, needed in swaps) and not any(
            "never merged" in line for line in lines):
        return ("K/V ring rotated the wrong direction", "at every wrong step t a rank computed with the K/V "
                "block of rank r + t under the positions of rank r - t's: the blocks travel from rank r to "
                "r - 1 while the mask assumes r to r + 1; send to (r + 1) mod P and receive from (r - 1) mod P "
                "(or take the mask from the block's origin); invisible at P = 2 and in non-causal cases", lines)
    if stale and reversed_ring:
        lines.append("every wrong block is also what a ring rotated the wrong way (r to r - 1) would merge there")
    if stale:
        return ("stale K/V chunk", "a rank computed with a K/V block other than the one due at that step (merged "
                "one block twice, or an old block under a new block's positions): a send or receive buffer that "
                "lags the ring", lines)
    return ("missing blocks", "a rank never merged some K/V blocks it needs: the ring stopped early or skipped a step "
            "(or a block was wrongly judged fully masked)", lines)


def _step_lines(c: _Ctx, rows) -> List[str]:
    """Which (rank, step) blocks the wrong rows see, and whether the right rows see them too."""
    lines = []
    rows_set = set(int(i) for i in rows)
    for r in sorted({int(c.owner[i]) for i in rows})[:4]:
        mine = [i for i in range(c.case.S) if c.owner[i] == r]
        bad = [i for i in mine if i in rows_set]
        good = [i for i in mine if i not in rows_set]
        steps_bad = c.steps_of(bad)
        steps_only_bad = sorted(set(steps_bad) - set(c.steps_of(good))) if good else []
        origin = [(r - t) % c.P for t in steps_bad]
        line = (f"rank {r}: {len(bad)} wrong rows, their keys sit in the K/V blocks of ranks "
                f"{', '.join(map(str, origin))} (ring steps {ranges(steps_bad)})")
        if steps_only_bad:
            line += (f"; only wrong rows see the block{'s' if len(steps_only_bad) > 1 else ''} of ring "
                     f"step{'s' if len(steps_only_bad) > 1 else ''} {ranges(steps_only_bad)}")
        lines.append(line)
    return lines


# ---- 3. the backward -----------------------------------------------------------------------------

def _backward(c: _Ctx, wrong) -> Optional[Diagnosis]:
    case, a = c.case, c.a
    bad = [n for n in ("dq", "dk", "dv") if len(wrong[n])]
    if not bad:
        return None
    rel = {n: float(np.abs(c.outputs[n] - a[n]).max() / max(np.abs(a[n]).max(), 1e-300)) for n in bad}
    details = ["forward (out, lse) within tolerance; wrong: " +
               "; ".join(f"{n} at {c.where(wrong[n])} (largest error {rel[n]:.2g} of the largest |{n}|)"
                         for n in bad)]
    if all(r < PRECISION_REL for r in rel.values()):
        which = "dK/dV" if "dq" not in bad else "the gradients"
        return Diagnosis(
            "low-precision accumulation",
            f"{which} are accumulated across ring steps in a low-precision type (bf16/fp16): a small error on most "
            "rows, growing with P; keep the accumulators in float32 and round once at the end", details)
    if "dq" in bad:
        other = [i for i in range(case.S) if any(t != 0 for t in c.row_steps[i])]
        own_only = [i for i in range(case.S) if c.row_steps[i] <= {0}]
        dq_wrong = set(wrong["dq"].tolist())
        if dq_wrong and dq_wrong <= set(other) and not (dq_wrong & set(own_only)):
            details.append(f"every dq row whose keys all sit on its own rank (step 0) is right; the wrong dq rows "
                           f"see keys that arrive at steps {ranges(c.steps_of(wrong['dq']))}")
            return Diagnosis("stale K/V chunk in the backward",
                             "the backward computes with a K/V block other than the one that arrived at that step "
                             "(a chunk saved at step 0 reused, or the receive buffer read before the exchange "
                             "finished)", details)
        details += _step_lines(c, wrong["dq"])
        return Diagnosis("wrong backward blocks", "dQ is wrong while the forward is right; the lines below say "
                         "which ranks' K/V blocks its wrong rows' keys sit in (the ring steps at which a ring meets "
                         "them)", details)
    home = _not_home(c, [n for n in ("dk", "dv") if n in bad], wrong)
    if home is not None:
        return Diagnosis("dK/dV not brought home",
                         "dQ and the forward are right, and each rank returns exactly the whole dK/dV of another "
                         "rank's K/V block: the accumulators travel with their block but miss the extra hop that "
                         "brings them back to the block's owner after the last ring step (visible at every P >= 2)",
                         details + home)
    fit, kept = _contribution_fit(c, [n for n in ("dk", "dv") if n in bad])
    details += fit
    if kept:
        return Diagnosis("dK/dV kept where computed",
                         "dQ and the forward are right, and each rank's dK/dV holds exactly what its own queries "
                         "contribute to every K/V block it held, added row for row into its own block's "
                         "accumulator: the contributions to a visiting block must go into that block's "
                         "accumulator, which travels with it and takes one extra hop home", details)
    note = " (invisible at P = 2, where both directions reach the same rank)" if c.P >= 3 else ""
    return Diagnosis("dK/dV sent against the K/V direction",
                     "dQ and the forward are right but the dK/dV of a block land on the wrong rank: the "
                     f"accumulators must travel with their K/V block and take one extra hop home{note}", details)


def _not_home(c: _Ctx, names: List[str], wrong) -> Optional[List[str]]:
    """Lines when every rank holding wrong dK/dV rows returned, row for row, the whole dK/dV of one other
    rank's K/V block (within the tolerance); None otherwise (or where ranks hold different numbers of rows)."""
    smap, a, P = c.smap, c.a, c.P
    if P < 2 or len({len(p) for p in smap.positions}) != 1 or not names:
        return None
    L = len(smap.positions[0])

    def local(g, y):
        pos = smap.positions[y]
        out = np.zeros((g.shape[0], L) + g.shape[2:])
        out[:, pos >= 0] = g[:, pos[pos >= 0]]
        return out

    holds: Dict[int, int] = {}
    for name in names:
        tol = c.case.tolerances[name]
        for b in sorted({int(c.owner[i]) for i in wrong[name]}):
            real = smap.positions[b] >= 0
            got = local(c.outputs[name], b)[:, real]
            match = []
            for other in range(P):
                if other == b:
                    continue
                ref = local(a[name], other)[:, real]
                if _within(got, ref, tol):
                    match.append(other)
            if len(match) != 1 or holds.get(b, match[0]) != match[0]:
                return None
            holds[b] = match[0]
    if not holds:
        return None
    shifts = {(o - b) % P for b, o in holds.items()}
    lines = [f"rank {b} returns the {'/'.join(names)} of rank {o}'s K/V block" for b, o in sorted(holds.items())][:4]
    if len(shifts) == 1:
        s = shifts.pop()
        lines.append(f"every rank r with wrong rows holds the accumulator of the block of rank r + {s} (mod {P})" +
                     (": where the ring leaves it after its last step, one hop short of home" if s == 1 else ""))
    return lines


def _contribution_fit(c: _Ctx, names: List[str]) -> Tuple[List[str], bool]:
    """Fit each wrong K/V block's dK (dV) error with the per-(query rank, key block) contributions.

    A contribution of rank x's queries to rank y's block is laid on the block's local rows; an
    implementation that adds it to another block's accumulator adds it row for row, so the fit is
    made in local-row space (the layouts give every rank the same number of rows, padding included).
    Returns the lines and whether every wrong block b holds exactly rank b's own contributions to the
    blocks it held, and lacks the other ranks' (the contributions kept where they were computed)."""
    case, a, P, smap = c.case, c.a, c.P, c.smap
    rows_per_rank = {len(p) for p in smap.positions}
    if len(rows_per_rank) != 1:
        return [], False
    L = rows_per_rank.pop()
    name = names[0]

    def local(global_rows, y):
        """(B, L, HKV, D) in rank y's local row order (zeros at padding)."""
        pos = smap.positions[y]
        out = np.zeros((global_rows.shape[0], L) + global_rows.shape[2:])
        out[:, pos >= 0] = global_rows[:, pos[pos >= 0]]
        return out

    contrib = {}
    for x in range(P):
        rows = c.owner == x
        for y in range(P):
            keep = c.owner == y
            within = rows[:, None] & keep[None, :]
            if not (c.mask & within).any():
                continue
            _, dk, dv = oracle.backward(a["q"], a["k"], a["v"], a["dout"], c.mask, case.scale, within)
            contrib[(x, y)] = local(dk if name == "dk" else dv, y)
    if not contrib:
        return [], False
    keys = list(contrib)
    lines = []
    kept, fitted = True, 0
    for b in range(P):
        real = smap.positions[b] >= 0
        got = local(c.outputs[name], b)[:, real].ravel()
        ref = local(a[name], b)[:, real].ravel()
        err = got - ref
        if np.abs(err).max() <= 1e-9 + 1e-6 * np.abs(ref).max():
            continue
        A = np.stack([contrib[k][:, real].ravel() for k in keys], axis=1)
        coef, *_ = np.linalg.lstsq(A, err, rcond=None)
        rounded = np.round(coef)
        resid = np.abs(A @ rounded - err).max() / max(np.abs(ref).max(), 1e-300)
        if resid > 0.05:
            lines.append(f"K/V block of rank {b}: its {name} error is not a sum of whole (rank, block) contributions")
            kept = False
            continue
        missing = [k for k, w in zip(keys, rounded) if w < 0 and k[1] == b]
        extra = [k for k, w in zip(keys, rounded) if w > 0]
        parts = []
        if not missing and not extra:
            continue
        # Kept where computed: block b gains only rank b's queries against the blocks it held and loses
        # only the other ranks' queries against it (where a contribution falls on rows that are padding
        # in the other block, it shows on neither side).
        fitted += len(extra)
        held = {k for k in keys if k[0] == b and k[1] != b}
        due = {k for k in keys if k[1] == b and k[0] != b}
        kept = kept and set(extra) <= held and set(missing) <= due and all(w in (-1, 0, 1) for w in rounded)
        if missing:
            parts.append("misses the contributions of " + ", ".join(
                f"rank {x}'s queries (step {(x - b) % P})" for x, _ in missing))
        if extra:
            parts.append("holds instead those of " + ", ".join(
                f"rank {x}'s queries against rank {y}'s block (step {(x - y) % P})" for x, y in extra))
        if len(lines) < 4:
            lines.append(f"K/V block of rank {b}: {name} " + "; ".join(parts))
    return lines, kept and fitted > 0
