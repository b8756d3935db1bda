#!/usr/bin/env python3
"""The conformance harness as its users run it: python3 -m ringlab.conformance run ... on a case folder.

    test_conformance.py reference CASES [--ranks 2,3,4,8]   the reference passes every case, at each P
    test_conformance.py broken CASES --nproc P [--layout L --only NAMES --variants V,... --expect-pass V,...]
                                                            every broken variant fails, each with its
                                                            own named cause and no other's (those named
                                                            by --expect-pass must pass at this P)
    test_conformance.py growth CASES                        bf16 dK/dV accumulators: right at P = 4, wrong
                                                            at P = 8 by the RMS bound, the reference right
    test_conformance.py trace CASES                         the step trace names the first wrong partial
    test_conformance.py robust CASES                        unknown module, hang, raise, wrong shape,
                                                            a case folder missing a file
Exit 0 when the checks hold, 1 when not, 77 (skipped) without PyTorch.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import torch  # noqa: F401  (only: is it there)
except ImportError:
    print("skipped: PyTorch is not installed (Debian python3-torch)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = "ringlab.conformance.reference:attention"
BROKEN = {  # variant -> the cause the diagnosis must name
    "broken_impls:stale_kv_backward": "stale K/V chunk in the backward",
    "broken_impls:dkv_reversed": "dK/dV sent against the K/V direction",
    "broken_impls:tail_token_dropped": "last token of a document dropped",
    "broken_impls:window_ignored": "window ignored",
    "broken_impls:unstable_merge": "unstable exp merge",
    "broken_impls:bf16_dkv_accumulators": "low-precision accumulation",
    "broken_impls:lagging_send": "stale K/V chunk",  # the forward's send buffer one step behind (P >= 3)
    "broken_impls:documents_ignored": "document boundaries ignored",
    "broken_impls:padding_as_keys": "padding read as keys",
    "broken_impls:causal_offset": "causal offset",
    "broken_impls:missing_rescale": "missing rescale",
}
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def harness(args, timeout=600):
    """Run the harness as a user would; returns (exit status, stdout, stderr, JSON results or None)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "conformance"), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "results.json")
        cmd = [sys.executable, "-m", "ringlab.conformance", "run", "--json", out_json] + args
        t0 = time.monotonic()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        seconds = time.monotonic() - t0
        results = json.load(open(out_json)) if os.path.exists(out_json) else None
        leftovers = [f for f in os.listdir(tmp) if f != "results.json"]
    if leftovers:
        failures.append(f"partial files left beside the results: {leftovers}")
    print(f"     ({' '.join(args[:6])}{' ...' if len(args) > 6 else ''}: exit {p.returncode}, {seconds:.1f} s)")
    return p.returncode, p.stdout, p.stderr, results


def case_ps(cases):
    ps = set()
    for name in os.listdir(cases):
        path = os.path.join(cases, name, "case.json")
        if os.path.exists(path):
            ps.add(json.load(open(path))["P"])
    return ps


def reference(a):
    ps = case_ps(a.cases)
    for p in a.ranks:
        check(p in ps, f"the suite has cases at P = {p}")
    # ringlab's C++ layouts (case.json) against the Python conventions: the same maps where they exist.
    from ringlab.conformance.cases import list_cases, load_case
    from ringlab.conformance.harness import case_convention
    cases = [load_case(f) for f in list_cases(a.cases)]
    same = [c.name for c in cases if case_convention(c) is not None]
    striped_docs = [c.name for c in cases if c.layout == "striped" and c.docs]
    check(len(same) == len(cases) - len(striped_docs),
          f"{len(same)} of {len(cases)} case layouts equal the Python convention of the same name (zig-zag per "
          f"document = te-thd; striped per document has none: {', '.join(striped_docs) or '-'})")
    code, out, err, res = harness(["--impl", REFERENCE, a.cases])
    bad = [r for r in res["results"] if not r["ok"]] if res else []
    for r in bad:
        print(f"     {r['case']} (P = {r['P']}): " + json.dumps(r.get("failure") or r.get("diagnosis"))[:300])
    check(code == 0 and res is not None and not bad,
          f"the reference passes all {len(res['results']) if res else '?'} cases (exit {code})")
    if code != 0:
        print(out[-3000:], err[-2000:])


def broken(a):
    variants = {v: c for v, c in BROKEN.items() if not a.variants or v.split(":")[1] in a.variants}
    args = ["--nproc", str(a.nproc), a.cases]
    if a.layout:
        args = ["--layout", a.layout] + args
    if a.only:
        args = ["--cases", a.only] + args
    for v in variants:
        args = ["--impl", v] + args
    code, out, err, res = harness(["--impl", REFERENCE] + args)
    check(code == 1 and res is not None, f"the broken variants make the run fail (exit {code})")
    if res is None:
        print(out[-3000:], err[-2000:])
        return
    by_impl = {}
    for r in res["results"]:
        by_impl.setdefault(r["impl"], []).append(r)
    ref = by_impl.get(REFERENCE, [])
    check(ref and all(r["ok"] for r in ref),
          f"control: the reference passes the same {len(ref)} cases at P = {a.nproc}")
    for v, cause in variants.items():
        runs = by_impl.get(v, [])
        wrong = [r for r in runs if not r["ok"]]
        if v.split(":")[1] in a.expect_pass:
            check(runs and not wrong, f"{v.split(':')[1]} passes all {len(runs)} cases at P = {a.nproc}")
            continue
        causes = sorted({(r.get("diagnosis") or {}).get("cause", r.get("failure", {}).get("line", "?")) for r in wrong})
        check(bool(wrong), f"{v.split(':')[1]} fails {len(wrong)} of {len(runs)} cases")
        check(causes == [cause], f"{v.split(':')[1]}: every failure is diagnosed '{cause}' (got {causes})")
        for r in wrong[:1]:
            print("     e.g. " + r["case"] + ": " + (r.get("diagnosis") or {}).get("explanation", "")[:160])


def robust(a):
    with tempfile.TemporaryDirectory() as tmp:
        # Two small cases at the smallest P: one kept whole, one missing its dv.npy.
        meta = {n: json.load(open(os.path.join(a.cases, n, "case.json"))) for n in sorted(os.listdir(a.cases))
                if os.path.exists(os.path.join(a.cases, n, "case.json"))}
        p_min = min(p for p in case_ps(a.cases) if sum(m["P"] == p for m in meta.values()) >= 2)
        names = sorted((n for n, m in meta.items() if m["P"] == p_min), key=lambda n: meta[n]["S"])
        keep, hole = names[0], names[1]
        for n in (keep, hole):
            shutil.copytree(os.path.join(a.cases, n), os.path.join(tmp, n))
        os.unlink(os.path.join(tmp, hole, "dv.npy"))

        code, out, err, res = harness(["--impl", "no_such_module:attention", tmp])
        check(code == 2 and "cannot import module 'no_such_module'" in err and len(err.strip().splitlines()) == 1,
              "an unknown module: one line, exit 2")
        code, out, err, res = harness(["--impl", "broken_impls:no_such_function", tmp])
        check(code == 2 and "has no attribute" in err, "a missing function: one line, exit 2")
        code, out, err, res = harness(["--impl", REFERENCE, "--nproc", "0", tmp])
        check(code == 2, "--nproc 0: exit 2")

        t0 = time.monotonic()
        code, out, err, res = harness(["--timeout", "4", "--impl", "broken_impls:hangs", "--impl",
                                       "broken_impls:raises", "--impl", "broken_impls:wrong_shape", "--impl",
                                       REFERENCE, tmp])
        seconds = time.monotonic() - t0
        print("\n".join("     | " + line for line in out.splitlines()))
        rows = {(r["impl"].split(":")[1], r["case"]): r for r in res["results"]} if res else {}
        hang = rows.get(("hangs", keep), {}).get("failure", {})
        check(hang.get("kind") == "hang" and "no answer from ranks" in hang.get("line", ""),
              f"a hanging function: the case is ended by the watchdog with one line ({hang.get('line', '-')[:90]})")
        check(any(line.startswith(keep) and "HANG" in line for line in out.splitlines()),
              "the hang's line names the case")
        raised = rows.get(("raises", keep), {}).get("failure", {})
        check(raised.get("kind") == "error" and "RuntimeError: flash kernel: unsupported head dimension" in
              raised.get("line", ""), f"a function that raises: one line ({raised.get('line', '-')[:100]})")
        shape = rows.get(("wrong_shape", keep), {}).get("failure", {})
        check("out has shape" in shape.get("line", ""), f"a wrong shape: one line ({shape.get('line', '-')[:100]})")
        ref = rows.get(("attention", keep), {})
        check(ref.get("ok") is True, "the run goes on: the reference after them passes")
        check(any("dv.npy is missing" in u for u in (res or {}).get("unreadable", [])) and
              "dv.npy is missing" in out, "a case folder missing dv.npy: one line naming the file")
        check(code == 1, f"the run's exit status is 1 (got {code})")
        check(seconds < 60, f"nothing hangs: the whole run took {seconds:.0f} s")


def trace(a):
    """Step trace: the reference's partials all match; a lagging send buffer is named at step 2."""
    p3 = [n for n in sorted(os.listdir(a.cases)) if os.path.exists(os.path.join(a.cases, n, "case.json")) and
          json.load(open(os.path.join(a.cases, n, "case.json")))["P"] == 3 and
          json.load(open(os.path.join(a.cases, n, "case.json")))["causal"]]
    check(bool(p3), "the suite has a causal case at P = 3")
    if not p3:
        return
    code, out, err, res = harness(["--trace", "--impl", REFERENCE, "--impl", "broken_impls:lagging_send",
                                   "--impl", "broken_impls:dkv_reversed", os.path.join(a.cases, p3[0])])
    rows = {r["impl"].split(":")[1]: r for r in res["results"]} if res else {}
    line = rows.get("attention", {}).get("trace", "")
    check(line.startswith("step trace: every partial matches the ring through step 2"), f"reference: {line}")
    line = rows.get("lagging_send", {}).get("trace", "")
    check("the first partial that differs is rank" in line and "after step 2" in line, f"lagging send: {line}")
    line = rows.get("dkv_reversed", {}).get("trace", "")
    check(line.startswith("step trace: every partial matches"), f"a backward-only bug leaves the forward trace "
          f"clean: {line}")


def growth(a):
    """ring-flash-attention #42's story: bf16 dK/dV accumulators stay within every element's tolerance at
    small P and cross the RMS bound as P grows; the reference (float32 accumulators) passes both."""
    code, out, err, res = harness(["--cases", "bf16-zigzag", "--impl", REFERENCE, "--impl",
                                   "broken_impls:bf16_dkv_accumulators", a.cases])
    runs = [r for r in (res or {}).get("results", [])]
    ref = [r for r in runs if r["impl"] == REFERENCE]
    bad = sorted((r for r in runs if r["impl"] != REFERENCE), key=lambda r: r["P"])
    check(len(ref) >= 2 and all(r["ok"] for r in ref), f"control: the reference passes the bf16 cases at P = "
          f"{', '.join(str(r['P']) for r in ref)}")
    fails = [r for r in bad if not r["ok"]]
    check(bool(fails) and fails[-1]["P"] == bad[-1]["P"], "bf16 accumulators fail at the largest P " +
          ", ".join(f"(P = {r['P']}: {'ok' if r['ok'] else 'wrong'})" for r in bad))
    cause = {(r.get("diagnosis") or {}).get("cause") for r in fails}
    check(cause == {"low-precision accumulation"}, f"diagnosed as low-precision accumulation ({cause})")
    details = " ".join(d for r in fails for d in (r.get("diagnosis") or {}).get("details", []))
    check("times the single-device RMS" in details and "at each P" in details,
          "the diagnosis compares the RMS with one device's and follows the error across P")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("part", choices=["reference", "broken", "robust", "trace", "growth"])
    parser.add_argument("cases")
    parser.add_argument("--ranks", default="2,3,4,8")
    parser.add_argument("--nproc", type=int, default=3)
    parser.add_argument("--layout", help="broken: shard by this convention (cases then run at --nproc)")
    parser.add_argument("--only", help="broken: only the cases whose names contain one of these (comma separated)")
    parser.add_argument("--variants", default="", help="broken: only these variants (comma separated)")
    parser.add_argument("--expect-pass", default="", help="broken: variants that must pass at this P")
    a = parser.parse_args()
    a.ranks = [int(x) for x in a.ranks.split(",")]
    a.variants = [v for v in a.variants.split(",") if v]
    a.expect_pass = [v for v in a.expect_pass.split(",") if v]
    if not os.path.isdir(a.cases):
        print(f"FAIL no case folder {a.cases}")
        return 1
    {"reference": reference, "broken": broken, "robust": robust, "trace": trace, "growth": growth}[a.part](a)
    print(f"{len(failures)} checks failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
