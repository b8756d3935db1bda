#!/usr/bin/env python3
"""The Python module and `ringlab verify`, end to end: each check can fail, and says what it saw.

Run by ctest (label python) with PYTHONPATH pointing at build/python and RINGLAB_BINARY at the
built ringlab. Exit 0 when every check holds, 1 with the failures listed.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

import ringlab

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAILED:", what)


def numpy_attention(q, k, v, causal):
    """Softmax attention written out independently of ringlab, in float64 (GQA by h // group)."""
    B, S, H, D = q.shape
    group = H // k.shape[2]
    kk, vv = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    scores = np.einsum("bqhd,bkhd->bhqk", q, kk) / np.sqrt(D)
    if causal:
        scores = np.where(np.tril(np.ones((S, S), dtype=bool)), scores, -np.inf)
    m = scores.max(-1, keepdims=True)
    p = np.exp(scores - m)
    lse = (m + np.log(p.sum(-1, keepdims=True)))[..., 0]
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), vv), lse


rng = np.random.default_rng(11)
B, S, H, HKV, D = 2, 48, 4, 2, 8
q = rng.standard_normal((B, S, H, D))
k, v = rng.standard_normal((B, S, HKV, D)), rng.standard_normal((B, S, HKV, D))
dout = rng.standard_normal((B, S, H, D))

# The oracle agrees with an independent NumPy computation (GQA, both masks).
for causal in (False, True):
    out, lse = ringlab.attention(q, k, v, causal=causal)
    want_out, want_lse = numpy_attention(q, k, v, causal)
    check(out.shape == (B, S, H, D) and lse.shape == (B, H, S), f"attention shapes {out.shape} {lse.shape}")
    check(np.allclose(out, want_out, atol=1e-12), f"attention(causal={causal}) out differs from NumPy")
    check(np.allclose(lse, want_lse, atol=1e-12), f"attention(causal={causal}) lse differs from NumPy")

# Windows and packed documents: the oracle against a NumPy mask written from the definition, and
# the simulator against the oracle at P = 3 and 4.
def numpy_masked(q, k, v, causal, window, docs):
    B, S, H, D = q.shape
    group = H // k.shape[2]
    kk, vv = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    doc = np.repeat(np.arange(len(docs)), docs) if docs else np.zeros(S, dtype=int)
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    visible = doc[:, None] == doc[None, :]
    if causal:
        visible &= j <= i
    if window:
        visible &= (i - window < j) if causal else (np.abs(i - j) < window)
    scores = np.where(visible, np.einsum("bqhd,bkhd->bhqk", q, kk) / np.sqrt(D), -np.inf)
    m = scores.max(-1, keepdims=True)
    p = np.exp(scores - m)
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), vv), (m + np.log(p.sum(-1, keepdims=True)))[..., 0]


for causal, window, docs in ((True, 0, [12, 30, 6]), (False, 7, []), (True, 9, [24, 24])):
    out, lse = ringlab.attention(q, k, v, causal=causal, window=window, docs=docs)
    want_out, want_lse = numpy_masked(q, k, v, causal, window, docs)
    what = f"causal={causal} window={window} docs={docs}"
    check(np.allclose(out, want_out, atol=1e-12) and np.allclose(lse, want_lse, atol=1e-12), f"attention({what})")
    for ranks, layout in ((3, "contiguous"), (4, "balanced")):
        result = ringlab.run(q, k, v, dout=dout, ranks=ranks, layout=layout, causal=causal, window=window, docs=docs)
        grads = ringlab.attention_backward(q, k, v, dout, causal=causal, window=window, docs=docs)
        check(np.allclose(result["out"], out, atol=1e-5, rtol=1e-4), f"run P={ranks} {layout} {what}: out")
        check(all(np.allclose(result[n], g, atol=1e-4, rtol=1e-3) for n, g in zip(("dq", "dk", "dv"), grads)),
              f"run P={ranks} {layout} {what}: gradients")
for call, what in ((lambda: ringlab.attention(q, k, v, docs=[10, 10]), "docs not summing to S"),
                   (lambda: ringlab.attention(q, k, v, window=-2), "a negative window")):
    try:
        call()
        check(False, f"{what}: no error")
    except ValueError as e:
        check(len(str(e).splitlines()) == 1 and str(e), f"{what}: one line, got {e!r}")

# Gradients: a finite difference of sum(out * dout) in one coordinate of q, k and v.
dq, dk, dv = ringlab.attention_backward(q, k, v, dout, causal=True)
for name, tensor, grad in (("q", q, dq), ("k", k, dk), ("v", v, dv)):
    index = (1, 17, 1, 3)
    eps = 1e-6
    plus, minus = tensor.copy(), tensor.copy()
    plus[index] += eps
    minus[index] -= eps
    args = {"q": q, "k": k, "v": v}
    f = lambda t: float((ringlab.attention(**{**args, name: t}, causal=True)[0] * dout).sum())
    numeric = (f(plus) - f(minus)) / (2 * eps)
    check(abs(numeric - grad[index]) < 1e-6 * max(1.0, abs(numeric)), f"d{name} {grad[index]} vs finite difference {numeric}")

# The simulator (float32) against the oracle at P = 3 and 4, every layout it takes, with gradients.
ref_out, ref_lse = ringlab.attention(q, k, v, causal=True)
for ranks, layout in ((3, "contiguous"), (4, "zigzag"), (4, "striped"), (2, "zigzag")):
    result = ringlab.run(q, k, v, dout=dout, ranks=ranks, layout=layout, causal=True)
    check(np.allclose(result["out"], ref_out, atol=1e-5, rtol=1e-4), f"run P={ranks} {layout}: out")
    check(np.allclose(result["lse"], ref_lse, atol=1e-5, rtol=1e-4), f"run P={ranks} {layout}: lse")
    check(np.allclose(result["dq"], dq, atol=1e-4, rtol=1e-3), f"run P={ranks} {layout}: dq")
    check(np.allclose(result["dk"], dk, atol=1e-4, rtol=1e-3), f"run P={ranks} {layout}: dk")
result = ringlab.run(q, k, v, ranks=2, algo="ulysses")
check(np.allclose(result["out"], ringlab.attention(q, k, v)[0], atol=1e-5), "run ulysses P=2: out")
check("dq" not in result, "run without dout returns no gradients")

# Plans: the grid, the ops of a rank, the checker, the layout's positions.
plan = ringlab.plan(seq=64, ranks=4, layout="zigzag", causal=True)
check("OK: the plan is well formed" in str(plan) or "b" in str(plan), "str(plan) prints the grid")
check(plan.check() == [], f"a zig-zag plan is well formed: {plan.check()}")
check(list(plan.positions(0)) == list(range(0, 8)) + list(range(56, 64)), f"zig-zag rank 0 {plan.positions(0)}")
ops = plan.ops(1)
check(any("exchange" in op for op in ops) and any("compute" in op for op in ops), f"plan.ops(1): {ops[:3]}")

# verify: right outputs pass; a ring that stops one step early is named with its rank and step.
report = ringlab.verify(q, k, v, out=ref_out, lse=ref_lse, ranks=4, causal=True)
check(report.ok and bool(report), f"verify of exact outputs: {report.text}")
bad_out, bad_lse = ref_out.copy(), ref_lse.copy()
n = S // 4
own = np.arange(3 * n, 4 * n)  # rank 3's queries, attended to blocks 1..3 only (block 0 is its step 3)
kept = np.arange(n, S)
scores = np.einsum("bqhd,bkhd->bhqk", q[:, own], np.repeat(k[:, kept], H // HKV, axis=2)) / np.sqrt(D)
scores = np.where((kept[None, :] <= own[:, None])[None, None], scores, -np.inf)
m = scores.max(-1, keepdims=True)
p = np.exp(scores - m)
bad_out[:, own] = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), np.repeat(v[:, kept], H // HKV, axis=2))
bad_lse[:, :, own] = (m + np.log(p.sum(-1, keepdims=True)))[..., 0]
report = ringlab.verify(q, k, v, out=bad_out, lse=bad_lse, ranks=4, causal=True)
check(not report.ok, "verify rejects rank 3 without block 0")
check(report.wrong_ranks == [3], f"verify names rank 3: {report.wrong_ranks}")
rows = report.rows
check(rows and rows[0]["rank"] == 3 and rows[0]["blocks_missed"] == [0] and rows[0]["steps_missed"] == [3],
      f"verify's first row: {rows[:1]}")
check("missing" in report.cause, f"verify's cause: {report.cause}")

# NaN and the missing scale are named as such.
nan_out = ref_out.copy()
nan_out[0, 5, 1, 2] = np.nan
check("NaN" in ringlab.verify(q, k, v, out=nan_out, ranks=4, causal=True).cause, "verify names NaN")
unscaled = ringlab.attention(q * np.sqrt(D), k, v, causal=True)[0]
check("1/sqrt(D)" in ringlab.verify(q, k, v, out=unscaled, ranks=2, causal=True).cause, "verify names the scale")

# Bad input is a ValueError with one clear message.
for call, what in ((lambda: ringlab.attention(q, k[:, :10], v), "k with another S"),
                   (lambda: ringlab.verify(q, k, v, out=ref_out[:, :10]), "out of the wrong shape"),
                   (lambda: ringlab.verify(q, k, v), "nothing to verify"),
                   (lambda: ringlab.plan(seq=10, ranks=4), "S not divisible by P"),
                   (lambda: ringlab.run(q, k, v, ranks=5), "S = 48 over 5 ranks")):
    try:
        call()
        check(False, f"{what}: no error")
    except ValueError as e:
        check(len(str(e).splitlines()) == 1 and str(e), f"{what}: one line, got {e!r}")

# `ringlab verify DIR`: the same check from .npy files, exit 0 / 1 / 2.
binary = os.environ.get("RINGLAB_BINARY")
if binary:
    with tempfile.TemporaryDirectory() as d:
        for name, array in (("q", q), ("k", k), ("v", v), ("out", ref_out), ("lse", ref_lse)):
            np.save(os.path.join(d, name + ".npy"), array)
        ok = subprocess.run([binary, "verify", d, "--ranks", "4", "--causal"], capture_output=True, text=True)
        check(ok.returncode == 0 and "OK: every tensor given matches" in ok.stdout, f"ringlab verify ok: {ok.stdout}")
        np.save(os.path.join(d, "out.npy"), bad_out)
        np.save(os.path.join(d, "lse.npy"), bad_lse)
        bad = subprocess.run([binary, "verify", d, "--ranks", "4", "--causal"], capture_output=True, text=True)
        check(bad.returncode == 1 and "rank 3" in bad.stdout and "likely cause" in bad.stdout,
              f"ringlab verify wrong: {bad.returncode} {bad.stdout}")
        os.remove(os.path.join(d, "k.npy"))
        missing = subprocess.run([binary, "verify", d], capture_output=True, text=True)
        check(missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1,
              f"ringlab verify without k.npy: {missing.returncode} {missing.stderr}")
else:
    failures.append("RINGLAB_BINARY is not set: the command was not tested")

print(f"{len(failures)} failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
