#!/usr/bin/env python3
"""The conformance harness as its users run it: python3 -m ringlab.conformance run ... on a case folder.

    test_conformance.py reference CASES [--ranks 2,3,4,8]   the reference passes every case, at each P
    test_conformance.py ulysses CASES                       the Ulysses reference passes every case
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
ULYSSES = "ringlab.conformance.ulysses:attention"
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
    "broken_impls:forget_v": "V not sent with K",  # lse right, as with a missing rescale: told apart by the values
    "broken_impls:dkv_no_home": "dK/dV not brought home",  # not a direction bug: wrong at P = 2 as well
    "broken_impls:kv_wrong_direction": "K/V ring rotated the wrong direction",  # right at P = 2
    "broken_impls:online_no_rescale": "missing rescale",  # an online softmax: its lse wrong too
    "broken_impls:lse_log2": "lse in log2 units",  # out and the gradients right
    "broken_impls:mask_by_local_index": "mask by local row index",
    "broken_impls:zigzag_chunks_swapped": "zig-zag chunks swapped",  # on zig-zag shards
    "broken_impls:dkv_kept_local": "dK/dV kept where computed",  # not a direction bug: wrong at P = 2 too
    "broken_impls:scale_ignored": "softmax scale not applied",
    # Where there is padding and no documents; without a causal mask or window, padding keys seen by every
    # query are what padding read as keys gives too, and are named so.
    "broken_impls:padding_keys_visible": ("padding keys visible", "padding read as keys"),
    # Ulysses (all-to-all) implementations: the gathered rows masked in rank order, the heads returned
    # in another order than they were sent (where a rank holds several), K/V heads tiled, not grouped.
    "broken_impls:ulysses_shard_order_mask": "mask in shard order",
    "broken_impls:ulysses_heads_interleaved": "heads permuted",
    "broken_impls:ulysses_gqa_tiled": "GQA heads grouped wrong",
    "broken_impls:ulysses_rows_interleaved": "rows returned to the wrong place",
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
    from ringlab.conformance import conventions
    cases = [load_case(f) for f in list_cases(a.cases)]
    maps = {c.name: case_convention(c) for c in cases}
    same = [n for n, m in maps.items() if m is not None]
    check(len(same) == len(cases), f"{len(same)} of {len(cases)} case layouts equal a Python convention")
    per_doc = {c.name: maps[c.name].convention for c in cases if c.meta["layout"].get("per_document") and c.docs
               and maps[c.name] is not None}
    check(bool(per_doc) and all(v in ("zigzag-per-document", "striped-per-document") and v in
                                conventions.CONVENTIONS and v != c for c, v in per_doc.items()),
          "the cases laid out per document are named by their own conventions, which `layouts` lists: " +
          ", ".join(sorted(set(per_doc.values()))))
    # An adapter that trusts ctx.layout (computes its positions from the named convention) on every case.
    code, out, err, res = harness(["--impl", "broken_impls:layout_trusting", a.cases])
    bad = [r for r in res["results"] if not r["ok"]] if res else []
    check(code == 0 and res is not None and not bad, f"an adapter trusting ctx.layout passes all "
          f"{len(res['results']) if res else '?'} cases (exit {code})" +
          "".join(f"; {r['case']}: {r.get('failure', {}).get('line', '')[:160]}" for r in bad[:2]))
    # One rank: the ring is the rank itself (no message to send).
    code, out, err, res = harness(["--impl", REFERENCE, "--layout", "zigzag", "--nproc", "1", a.cases])
    bad = [r for r in res["results"] if not r["ok"]] if res else []
    check(code == 0 and res is not None and not bad and len(res["results"]) > 0,
          f"the reference passes all {len(res['results']) if res else '?'} cases at P = 1 (exit {code}"
          f"{', ' + out.strip().splitlines()[-1] if out.strip() else ''})")
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
        allowed = cause if isinstance(cause, tuple) else (cause,)
        check(bool(wrong), f"{v.split(':')[1]} fails {len(wrong)} of {len(runs)} cases")
        check(allowed[0] in causes and set(causes) <= set(allowed),
              f"{v.split(':')[1]}: every failure is diagnosed {' or '.join(repr(x) for x in allowed)} (got {causes})")
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
        # The same case with q.npy in int32 and in float16 (converted silently, a correct ring looked wrong).
        import numpy as np
        for dtype in ("int32", "float16"):
            folder = os.path.join(tmp, f"{keep}-q-{dtype}")
            shutil.copytree(os.path.join(a.cases, keep), folder)
            q = np.load(os.path.join(folder, "q.npy"))
            np.save(os.path.join(folder, "q.npy"), (q * 4).astype(dtype))
            with open(os.path.join(folder, "case.json"), "w") as f:
                json.dump(dict(meta[keep], name=f"{keep}-q-{dtype}"), f)

        code, out, err, res = harness(["--impl", "no_such_module:attention", tmp])
        check(code == 2 and "cannot import module 'no_such_module'" in err and len(err.strip().splitlines()) == 1,
              "an unknown module: one line, exit 2")
        code, out, err, res = harness(["--impl", "broken_impls:no_such_function", tmp])
        check(code == 2 and "has no attribute" in err, "a missing function: one line, exit 2")
        code, out, err, res = harness(["--impl", REFERENCE, "--nproc", "0", tmp])
        check(code == 2, "--nproc 0: exit 2")
        for bad_args, says in ((["--layout", "torch-round-robin:abc", "--nproc", "3"], "positive integer"),
                               (["--layout", "torch-round-robin:0", "--nproc", "3"], "positive integer"),
                               (["--layout", "zigzag:7", "--nproc", "3"], "takes no parameter"),
                               (["--timeout", "nan"], "finite"), (["--timeout", "inf"], "finite")):
            code, out, err, res = harness(["--impl", REFERENCE] + bad_args + [tmp])
            check(code == 2 and says in err and len(err.strip().splitlines()) == 1 and not out.strip(),
                  f"{' '.join(bad_args)}: refused before any case runs, one line, exit 2 ({err.strip()[:90]})")

        # The process group's own timeout must end no receive before the watchdog has seen the hang (a watchdog of
        # 20 s: the implementation raises at once with the group's timeout).
        code, out, err, res = harness(["--timeout", "20", "--impl", "broken_impls:group_timeout",
                                       os.path.join(tmp, keep)])
        line = res["results"][0].get("failure", {}).get("line", "") if res and res["results"] else ""
        group_s = float(line.split("process group timeout ")[1].split()[0]) if "process group timeout" in line else 0
        check(group_s >= 2 * 20, f"the process group's timeout is well past the watchdog's 20 s ({group_s:g} s): a "
              "rank stuck in its own code is a HANG, not its peers' 'Connection closed by peer'")

        t0 = time.monotonic()
        impls = ["hangs", "spins", "killed", "exits", "raises", "wrong_shape", "out_bf16", "lse_int"]
        code, out, err, res = harness(["--timeout", "4"] + [x for i in impls for x in ("--impl", "broken_impls:" + i)]
                                      + ["--impl", REFERENCE, tmp])
        seconds = time.monotonic() - t0
        print("\n".join("     | " + line for line in out.splitlines()))
        rows = {(r["impl"].split(":")[1], r["case"]): r for r in res["results"]} if res else {}
        hang = rows.get(("hangs", keep), {}).get("failure", {})
        line = hang.get("line", "")
        check(hang.get("kind") == "hang" and "no answer from ranks" in line,
              f"a hanging function: the case is ended by the watchdog with one line ({line[:90]})")
        check(any(line.startswith(keep) and "HANG" in line for line in out.splitlines()),
              "the hang's line names the case")
        p = meta[keep]["P"]
        others = f"ranks 1-{p - 1} wait" if p > 2 else "rank 1 waits"
        check("rank 0 waits in torch.distributed recv (broken_impls.py:" in line and "in hangs)" in line and
              f"{others} in torch.distributed all_gather (reference.py:" in line,
              f"the hang's line says where each rank waits, and which of its frames called ({line[line.find(':') + 1:]})")
        line = rows.get(("spins", keep), {}).get("failure", {}).get("line", "")
        busy = line.find("rank 0 is busy at broken_impls.py:")
        check(busy > 0 and "in spins" in line and line.find(f"{others} in torch.distributed all_gather") > busy,
              f"a rank busy in its own code is named first, at its line ({line[line.find(':') + 1:]})")
        line = rows.get(("killed", keep), {}).get("failure", {}).get("line", "")
        check(line.startswith("rank 1: its process died, killed by SIGKILL"),
              f"a rank killed by a signal is named before its peers' connection errors ({line[:100]})")
        line = rows.get(("exits", keep), {}).get("failure", {}).get("line", "")
        check(line.startswith("rank 1: its process died (exit code 3)"),
              f"a rank whose process exits is named with its exit code ({line[:100]})")
        line = rows.get(("out_bf16", keep), {}).get("failure", {}).get("line", "")
        check("out is torch.bfloat16, the inputs are torch.float32: return out in the inputs' dtype" in line,
              f"out in another dtype than the inputs': one line naming both ({line[:110]})")
        line = rows.get(("lse_int", keep), {}).get("failure", {}).get("line", "")
        check("lse is torch.int32" in line and "floating" in line, f"an integer lse: one line ({line[:100]})")
        raised = rows.get(("raises", keep), {}).get("failure", {})
        check(raised.get("kind") == "error" and "RuntimeError: flash kernel: unsupported head dimension" in
              raised.get("line", ""), f"a function that raises: one line ({raised.get('line', '-')[:100]})")
        shape = rows.get(("wrong_shape", keep), {}).get("failure", {})
        check("out has shape" in shape.get("line", ""), f"a wrong shape: one line ({shape.get('line', '-')[:100]})")
        ref = rows.get(("attention", keep), {})
        check(ref.get("ok") is True, "the run goes on: the reference after them passes")
        # A bfloat16 all_to_all under gloo (PyTorch 1.13 refuses it): the error line says what to do.
        _, _, _, res_bf16 = harness(["--impl", "broken_impls:bf16_all_to_all", "--nproc", "2", "--layout", "zigzag",
                                     "--cases", "bf16-zigzag-p4", a.cases])
        line = next((r.get("failure", {}).get("line", "") for r in (res_bf16 or {}).get("results", [])), "")
        if "Invalid scalar type" in line:
            check("gloo may not take this dtype in this collective: exchange in float32, or run with nccl" in line,
                  f"a dtype gloo refuses in a collective: the line suggests float32 or nccl ({line[:160]})")
        else:
            print(f"     (this PyTorch's gloo takes bfloat16 in all_to_all: the dtype hint is not exercised; {line[:80]})")
        check(any("dv.npy is missing" in u for u in (res or {}).get("unreadable", [])) and
              "dv.npy is missing" in out, "a case folder missing dv.npy: one line naming the file")
        for dtype in ("int32", "float16"):
            said = [u for u in (res or {}).get("unreadable", []) if f"{keep}-q-{dtype}" in u]
            check(len(said) == 1 and f"q.npy in {os.path.join(tmp, keep + '-q-' + dtype)} is {dtype}" in said[0] and
                  "float32" in said[0], f"a q.npy in {dtype}: the case folder is refused, naming the file and its "
                  f"dtype ({said[0][:120] if said else '-'})")
        check(code == 1, f"the run's exit status is 1 (got {code})")
        check(seconds < 90, f"nothing hangs: the whole run took {seconds:.0f} s")


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


def ulysses(a):
    """The Ulysses reference passes every case at its own P, and re-sharded zig-zag at P = 1 and 3."""
    for args in ([a.cases], ["--layout", "zigzag", "--nproc", "3", a.cases],
                 ["--layout", "zigzag", "--nproc", "1", a.cases]):
        code, out, err, res = harness(["--impl", ULYSSES] + args)
        bad = [r for r in res["results"] if not r["ok"]] if res else []
        for r in bad:
            print(f"     {r['case']} (P = {r['P']}): " + json.dumps(r.get("failure") or r.get("diagnosis"))[:300])
        check(code == 0 and res is not None and not bad and len(res["results"]) > 0,
              f"the Ulysses reference passes all {len(res['results']) if res else '?'} cases "
              f"({' '.join(args[:-1]) or 'each at its own P'}; exit {code})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("part", choices=["reference", "ulysses", "broken", "robust", "trace", "growth"])
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
    {"reference": reference, "ulysses": ulysses, "broken": broken, "robust": robust, "trace": trace,
     "growth": growth}[a.part](a)
    print(f"{len(failures)} checks failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
