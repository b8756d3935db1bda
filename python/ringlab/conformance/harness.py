"""Shard every case, run the implementation on P processes, gather, compare, diagnose, report."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import textwrap
import time
from typing import Any, Dict, List, Optional, TextIO

import numpy as np

from . import conventions
from .cases import OUTPUTS, Case, CaseError, list_cases, load_case
from .diagnose import Diagnosis, diagnose
from .runner import Group, Outcome
from .trace import check_trace


@dataclasses.dataclass
class Comparison:
    output: str
    max_error: float  # max |actual - oracle| (inf where a value is NaN/inf and the oracle's is not)
    ratio: float  # max |actual - oracle| / (abs + rel |oracle|): <= 1 passes
    abs: float
    rel: float
    bad: int  # elements outside the tolerance
    count: int
    rms: float = 0.0  # sqrt(mean((actual - oracle)^2))
    rms_bound: float = 0.0  # 0: no RMS criterion (fp32)

    @property
    def rms_ratio(self) -> float:
        return self.rms / self.rms_bound if self.rms_bound > 0 else 0.0

    @property
    def ok(self) -> bool:
        return self.ratio <= 1.0 and self.rms_ratio <= 1.0


def compare(output: str, actual: np.ndarray, oracle: np.ndarray, tol: Dict[str, float]) -> Comparison:
    """|actual - oracle| <= abs + rel |oracle| element by element; NaN and inf never pass."""
    a, o = np.asarray(actual, dtype=np.float64), np.asarray(oracle, dtype=np.float64)
    empty = np.isneginf(o)  # lse of a row that sees no key: -inf, or any value below -1e4, is that answer
    allowed = tol["abs"] + tol["rel"] * np.abs(np.where(empty, 0.0, o))
    with np.errstate(invalid="ignore"):
        err = np.abs(a - o)
    err = np.where(empty, np.where(np.isneginf(a) | (a < -1e4), 0.0, np.inf), err)
    err = np.where(np.isnan(err), np.inf, err)
    ratio = err / allowed
    finite = err[~empty]
    rms = float(np.sqrt(np.mean(finite ** 2))) if finite.size else 0.0
    return Comparison(output, float(err.max()) if err.size else 0.0, float(ratio.max()) if ratio.size else 0.0,
                      tol["abs"], tol["rel"], int((ratio > 1).sum()), int(err.size), rms, tol.get("rms", 0.0))


@dataclasses.dataclass
class CaseResult:
    impl: str
    case: Case
    nproc: int
    layout: str
    comparisons: List[Comparison] = dataclasses.field(default_factory=list)
    failure: str = ""  # one line: raised, wrong shape, hang
    failure_kind: str = ""
    diagnosis: Optional[Diagnosis] = None
    seconds: float = 0.0
    outputs: Optional[Dict[str, np.ndarray]] = None
    trace_line: str = ""

    @property
    def ok(self) -> bool:
        return not self.failure and all(c.ok for c in self.comparisons)

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"impl": self.impl, "case": self.case.name, "P": self.nproc, "layout": self.layout,
                             "ok": self.ok, "seconds": round(self.seconds, 3)}
        if self.failure:
            d["failure"] = {"kind": self.failure_kind, "line": self.failure}
        d["outputs"] = {c.output: {"max_error": _num(c.max_error), "ratio": _num(c.ratio), "abs": c.abs,
                                   "rel": c.rel, "bad": c.bad, "count": c.count, "rms": _num(c.rms),
                                   "rms_bound": c.rms_bound, "ok": c.ok}
                        for c in self.comparisons}
        if self.diagnosis is not None:
            d["diagnosis"] = self.diagnosis.to_json()
        if self.trace_line:
            d["trace"] = self.trace_line
        return d


def _num(x: float):
    return x if np.isfinite(x) else ("nan" if np.isnan(x) else "inf")


PER_DOCUMENT = {"zigzag": "zigzag-per-document", "striped": "striped-per-document"}


def case_convention(case: Case) -> Optional[conventions.ShardMap]:
    """The convention map equal to the case's own layout, or None: it brings the padded sequence (slots,
    cu_seqlens_padded). A case laid out per document (case.json's layout.per_document) is named by the
    per-document convention (zigzag-per-document, striped-per-document), never by the name of the
    whole-sequence layout: ctx.layout must name the map an adapter can trust."""
    per_document = bool(case.meta.get("layout", {}).get("per_document")) and case.docs
    name = PER_DOCUMENT.get(case.layout, "") if per_document else case.layout
    if name not in conventions.CONVENTIONS:
        return None
    m = conventions.shard_map(name, case.S, case.P, case.docs)
    if len(m.positions) != len(case.positions) or not all(
            np.array_equal(a, b) for a, b in zip(m.positions, case.positions)):
        return None
    return m


def shard_map_for(case: Case, layout: Optional[str], nproc: int) -> conventions.ShardMap:
    if not layout or layout == "case":
        return case_convention(case) or conventions.from_positions(_explicit_name(case), case.S, case.docs,
                                                                   case.positions)
    return conventions.shard_map(layout, case.S, nproc, case.docs, case.causal, case.window)


def _explicit_name(case: Case) -> str:
    """ctx.layout for a case whose positions match no convention: never the name of a convention (an
    adapter trusting it would compute that convention's map), so such a name is marked "case:NAME"."""
    per_document = bool(case.meta.get("layout", {}).get("per_document")) and case.docs
    name = PER_DOCUMENT.get(case.layout, case.layout + "-per-document") if per_document else case.layout
    return f"case:{name}" if name.partition(":")[0] in conventions.CONVENTIONS else name


def payloads(case: Case, smap: conventions.ShardMap, backward: bool = True,
             trace: bool = False) -> List[Dict[str, Any]]:
    arrays = case.arrays()
    store = np.float64 if case.dtype == "fp64" else np.float32
    doc_of = case.doc_ids()
    docs = case.docs or [case.S]
    cu = [0] + list(np.cumsum(docs).tolist())
    cu_pad = [0] + list(np.cumsum(smap.padded_docs).tolist())
    result = []
    for r in range(smap.ranks):
        pos = smap.positions[r]
        real = pos >= 0
        local = {}
        for name in ("q", "k", "v", "dout"):
            g = arrays[name]
            a = np.zeros((g.shape[0], len(pos)) + g.shape[2:], dtype=store)
            a[:, real] = g[:, pos[real]]
            local[name] = a
        ids = None
        if doc_of is not None:
            ids = np.full(len(pos), -1, dtype=np.int64)
            ids[real] = doc_of[pos[real]]
        local["ctx"] = {"positions": pos.astype(np.int64), "doc_ids": ids, "slots": smap.slots[r].astype(np.int64),
                        "causal": case.causal, "window": case.window, "scale": case.scale,
                        "layout": smap.convention, "seq": case.S, "docs": case.docs, "cu_seqlens": cu,
                        "cu_seqlens_padded": cu_pad, "case": case.name}
        local["dtype"] = case.torch_dtype
        local["trace"] = trace
        if not backward:
            local["dout"] = None
        result.append(local)
    return result


def gather(case: Case, smap: conventions.ShardMap, results: List[Dict[str, Any]]) -> Dict[str, np.ndarray]:
    B, S = case.B, case.S
    shapes = {"out": (B, S, case.H, case.D), "dq": (B, S, case.H, case.D), "dk": (B, S, case.HKV, case.D),
              "dv": (B, S, case.HKV, case.D), "lse": (B, case.H, S)}
    out: Dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        if any(name not in res for res in results):
            continue
        g = np.zeros(shape)
        for r, res in enumerate(results):
            pos = smap.positions[r]
            real = pos >= 0
            if name == "lse":
                g[:, :, pos[real]] = res[name][:, :, real]
            else:
                g[:, pos[real]] = res[name][:, real]
        out[name] = g
    return out


def check(case: Case, outputs: Dict[str, np.ndarray]) -> List[Comparison]:
    arrays = case.arrays()
    return [compare(name, outputs[name], arrays[name], case.tolerances[name]) for name in OUTPUTS if name in outputs]


# ---- the run -------------------------------------------------------------------------------------

class Printer:
    def __init__(self, stream: TextIO):
        self.stream = stream
        self.widths = None

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def header(self, case_width: int) -> None:
        self.case_width = max(case_width, 4)
        self.line(f"{'case':<{self.case_width}}  {'output':<6}  {'max error':>10}  {'tolerance':<22}  "
                  f"{'err/tol':>8}  verdict")

    def result(self, res: CaseResult) -> None:
        name = res.case.name
        if res.failure:
            verdict = {"hang": "HANG", "error": "ERROR"}.get(res.failure_kind, "ERROR")
            self.line(f"{name:<{self.case_width}}  {'-':<6}  {'-':>10}  {'-':<22}  {'-':>8}  {verdict}: {res.failure}")
            return
        for i, c in enumerate(res.comparisons):
            tol = f"{c.abs:.0e} + {c.rel:.0e}|x|"
            err = "NaN/inf" if not np.isfinite(c.max_error) else f"{c.max_error:.3e}"
            worst = max(c.ratio, c.rms_ratio)
            ratio = "inf" if not np.isfinite(worst) else f"{worst:.3g}"
            if c.ok:
                verdict = "ok"
            elif c.ratio <= 1:
                verdict = f"WRONG (RMS {c.rms:.2e} over its bound {c.rms_bound:.2e})"
            else:
                verdict = f"WRONG ({c.bad} of {c.count})"
            self.line(f"{(name if i == 0 else ''):<{self.case_width}}  {c.output:<6}  {err:>10}  {tol:<22}  "
                      f"{ratio:>8}  {verdict}")
        if res.trace_line:
            self.line(f"{'':<{self.case_width}}  {res.trace_line}")


def run(impls: List[str], root: str, nproc: Optional[int], layout: Optional[str], backend: str, timeout: float,
        json_path: Optional[str], stream: TextIO, verbose: bool = False, case_filter: Optional[List[str]] = None,
        threads: int = 1, trace: bool = False) -> int:
    p = Printer(stream)
    folders = list_cases(root)
    cases = []
    for folder in folders:
        try:
            cases.append(load_case(folder))
        except CaseError as e:  # a broken folder fails that case, the run goes on
            cases.append(e)
    if case_filter:
        cases = [c for c in cases if isinstance(c, CaseError) or any(f in c.name for f in case_filter)]
    broken = [c for c in cases if isinstance(c, CaseError)]
    cases = [c for c in cases if not isinstance(c, CaseError)]
    skipped = 0
    if nproc is not None:
        skipped = len([c for c in cases if c.P != nproc])
        if not layout or layout == "case":
            cases = [c for c in cases if c.P == nproc]
        else:
            cases = [dataclasses.replace(c, P=nproc) for c in cases]
    if not cases and not broken:
        ps = sorted({c.P for c in (load_case(f) for f in folders)})
        sys.stderr.write(f"ringlab.conformance: no case runs at --nproc {nproc}: the cases are written for P = {ps} "
                         "(leave out --nproc to run each at its P, or add --layout to run them all at P)\n")
        return 2
    results: List[CaseResult] = []
    width = max([len(c.name) for c in cases] + [4])
    for impl_index, impl in enumerate(impls):
        p.line(f"implementation {impl}" + (f", layout {layout}" if layout else ", each case's own layout") +
               f", backend {backend}")
        p.header(width)
        for e in broken:
            p.line(f"ERROR: {e}")
        if not cases:
            continue
        by_p: Dict[int, List[Case]] = {}
        for c in cases:
            by_p.setdefault(c.P, []).append(c)
        for P in sorted(by_p):
            results += _run_group(impl, impl_index, impls, by_p[P], P, layout, backend, timeout, verbose, threads, p,
                                  trace)
        p.line()
    _p_trend(results)
    _print_diagnoses(results, p)
    wrong = [r for r in results if not r.ok]
    total = len(results) + len(broken) * len(impls)
    summary = f"{len(results) - len(wrong)} of {total} case runs within tolerance"
    if broken:
        summary += f"; {len(broken)} case folders unreadable"
    if skipped and nproc is not None and (not layout or layout == "case"):
        summary += f"; {skipped} cases written for another P not run (leave out --nproc to run each at its P)"
    p.line(summary)
    if json_path:
        _write_json(json_path, results, broken)
    return 0 if not wrong and not broken else 1


def _run_group(impl, impl_index, impls, cases, P, layout, backend, timeout, verbose, threads, p,
               trace=False) -> List[CaseResult]:
    results = []
    group: Optional[Group] = None
    for case in cases:
        res = CaseResult(impl, case, P, layout or case.layout)
        try:
            smap = shard_map_for(case, layout, P)
            loads = payloads(case, smap, trace=trace)
        except (ValueError, KeyError, CaseError) as e:
            res.failure, res.failure_kind = f"cannot shard: {e}", "error"
            results.append(res)
            p.result(res)
            continue
        if group is None:
            group = Group(P, backend, impls, timeout, verbose, threads)
            if not group.start():
                res.failure, res.failure_kind = f"the process group did not start: {group.startup_failure}", "error"
                results.append(res)
                p.result(res)
                group = None
                continue
        t0 = time.perf_counter()
        outcome: Outcome = group.run(case.name, impl_index, loads, timeout)
        res.seconds = time.perf_counter() - t0
        if not outcome.ok:
            res.failure, res.failure_kind = outcome.failure, outcome.kind
            group.stop(force=outcome.kind == "hang")
            group = None
        else:
            outputs = gather(case, smap, outcome.results)
            res.comparisons = check(case, outputs)
            if trace:
                res.trace_line = check_trace(case, smap, outcome.results) or \
                    "step trace: the implementation reported no partials (it does not call ctx.trace)"
            if not res.ok:
                res.outputs = outputs
        results.append(res)
        p.result(res)
    if group is not None:
        group.stop()
    for res in results:
        if not res.ok and not res.failure:
            res.diagnosis = diagnose(res.case, shard_map_for(res.case, layout, P), res.outputs, res.comparisons)
            res.outputs = None
    return results


def _p_trend(results: List[CaseResult]) -> None:
    """Follow each failed case's problem across P: how a low-precision error grows with P, and whether a
    direction bug passes at P = 2 (where sending to r + 1 and to r - 1 reach the same rank)."""
    families: Dict[tuple, List[CaseResult]] = {}
    for r in results:
        families.setdefault((r.impl, r.case.family(), r.layout), []).append(r)
    for r in results:
        d = r.diagnosis
        if d is None:
            continue
        same = sorted(families[(r.impl, r.case.family(), r.layout)], key=lambda x: x.nproc)
        if len(same) < 2:
            continue
        if d.cause == "low-precision accumulation":
            trend = []
            for x in same:
                worst = max((max(c.ratio, c.rms_ratio) for c in x.comparisons if c.output in ("dk", "dv")),
                            default=None)
                if worst is not None:
                    trend.append(f"P = {x.nproc}: {worst:.2g}x")
            d.details.append("worst dK/dV error over its tolerance, the same problem at each P: " + ", ".join(trend))
        passed = [x.nproc for x in same if x.ok]
        if passed:
            d.details.append(f"the same problem passes at P = {', '.join(map(str, passed))}")


def _print_diagnoses(results: List[CaseResult], p: Printer) -> None:
    """Each failed case's diagnosis; a cause already explained for the same implementation is named
    again in one line, with where its rows are."""
    failed = [r for r in results if r.diagnosis is not None]
    if not failed:
        return
    p.line("diagnosis")
    explained: Dict[tuple, str] = {}
    for r in failed:
        d = r.diagnosis
        if r.trace_line:
            d.details.append(r.trace_line)
        p.line(f"  {r.case.name} ({r.impl}, P = {r.nproc}, layout {r.layout}):")
        first = explained.get((r.impl, d.cause))
        lines = [f"likely cause: {d.cause} (as in {first})", d.details[0]] if first else d.lines()
        explained.setdefault((r.impl, d.cause), r.case.name)
        for line in lines:
            for i, part in enumerate(textwrap.wrap(line, width=110) or [""]):
                p.line(("    " if i == 0 else "      ") + part)
    p.line()


def _write_json(path: str, results: List[CaseResult], broken: List[CaseError]) -> None:
    data = {"format": "ringlab-conformance-results/1", "ok": all(r.ok for r in results) and not broken,
            "results": [r.to_json() for r in results], "unreadable": [str(e) for e in broken]}
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ringlab-results-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
