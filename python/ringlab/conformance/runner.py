"""P worker processes with a torch.distributed process group, and the per-case watchdog.

The parent prepares each rank's inputs (NumPy arrays and the context), sends them over a pipe,
and waits for every rank's local outputs and gradients. A rank that does not answer within the
case's time is a hang: the whole group is ended and started afresh for the next case. A rank that
raises, or returns the wrong shape, answers with one line; the group is restarted as well (its
collectives may be half done).
"""
from __future__ import annotations

import dataclasses
import importlib
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import socket
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, List, Optional

import numpy as np

from .context import Context
from .diagnose import ranges


def load_function(spec: str):
    """'package.module:function' -> the callable; raises ValueError with one line when it cannot."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--impl '{spec}' is not MODULE:FUNCTION (for example my_package.cp:attention)")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # an import error or an error while importing: both mean "cannot load"
        raise ValueError(f"cannot import module '{module_name}' for --impl {spec}: {type(e).__name__}: {e}") from e
    fn = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ValueError(f"module '{module_name}' has no attribute '{attr}' (--impl {spec})")
    if not callable(fn):
        raise ValueError(f"{spec} is not callable")
    return fn


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_DTYPES = {"float64": "float64", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16",
           "fp64": "float64", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _short_error(e: BaseException) -> str:
    """One line: the exception and the innermost frame outside the harness."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if "ringlab/conformance/runner.py" not in frame.filename.replace(os.sep, "/"):
            where = f" (at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"
            break
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}{where}"


def _worker(rank: int, world: int, port: int, backend: str, impl_specs: List[str], conn, log_path: str,
            threads: int, timeout: float) -> None:
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    try:
        fns = [load_function(s) for s in impl_specs]
        device = torch.device("cpu")
        if backend == "nccl":
            device = torch.device("cuda", rank % torch.cuda.device_count())
            torch.cuda.set_device(device)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=max(timeout, 10)))
        group = dist.group.WORLD
    except Exception as e:  # reported as a start-up failure of the group
        conn.send(("startup-error", _short_error(e)))
        return
    conn.send(("ready", None))
    while True:
        msg = conn.recv()
        if msg[0] == "quit":
            break
        _, key, impl_index, payload = msg
        try:
            result = _run_one(fns[impl_index], payload, rank, world, group, device, torch)
            conn.send(("ok", key, result))
        except Exception as e:  # the implementation's failure: one line back to the parent
            conn.send(("error", key, _short_error(e)))
    try:
        dist.destroy_process_group()
    except Exception:
        pass


def _run_one(fn, payload: Dict[str, Any], rank: int, world: int, group, device, torch) -> Dict[str, Any]:
    dtype = getattr(torch, _DTYPES[payload["dtype"]])
    t0 = time.perf_counter()

    def tensor(a, grad):
        t = torch.from_numpy(np.ascontiguousarray(a)).to(device=device, dtype=dtype)
        return t.requires_grad_(grad)

    q, k, v = tensor(payload["q"], True), tensor(payload["k"], True), tensor(payload["v"], True)
    ctx = Context(rank=rank, world_size=world, group=group, **payload["ctx"])
    ctx.positions = torch.from_numpy(payload["ctx"]["positions"]).to(device)
    if payload["ctx"]["doc_ids"] is not None:
        ctx.doc_ids = torch.from_numpy(payload["ctx"]["doc_ids"]).to(device)
    ctx.slots = torch.from_numpy(payload["ctx"]["slots"]).to(device)
    partials = []
    if payload.get("trace"):
        def trace(step, out_partial, lse_partial):
            partials.append((int(step), out_partial.detach().double().cpu().numpy(),
                             lse_partial.detach().double().cpu().numpy()))
        ctx.trace = trace
    result = fn(q, k, v, ctx)
    lse = None
    if isinstance(result, (tuple, list)):
        if len(result) != 2:
            raise TypeError(f"returned a {type(result).__name__} of {len(result)} items; expected out or (out, lse)")
        out, lse = result
    else:
        out = result
    expect = tuple(q.shape)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != expect:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"out has shape {got}, expected {expect} (B, S_local, H, D)")
    if lse is not None:
        lexp = (q.shape[0], q.shape[2], q.shape[1])
        if not isinstance(lse, torch.Tensor) or tuple(lse.shape) != lexp:
            got = tuple(lse.shape) if isinstance(lse, torch.Tensor) else type(lse).__name__
            raise ValueError(f"lse has shape {got}, expected {lexp} (B, H, S_local)")
    forward_s = time.perf_counter() - t0
    answer = {"out": out.detach().double().cpu().numpy(), "forward_s": forward_s}
    if lse is not None:
        answer["lse"] = lse.detach().double().cpu().numpy()
    if partials:
        answer["partials"] = partials
    if payload.get("dout") is not None:
        if not out.requires_grad:
            raise ValueError("out does not require grad: the backward is not connected to q, k, v")
        out.backward(tensor(payload["dout"], False))
        for name, t in (("dq", q), ("dk", k), ("dv", v)):
            if t.grad is None:
                raise ValueError(f"{name} is None after out.backward(dout): {name[1]} is not in the graph")
            answer[name] = t.grad.detach().double().cpu().numpy()
    answer["total_s"] = time.perf_counter() - t0
    return answer


@dataclasses.dataclass
class Outcome:
    ok: bool
    results: Optional[List[Dict[str, Any]]] = None  # per rank
    failure: str = ""  # one line
    kind: str = ""  # "error", "hang", "startup"


class Group:
    """P worker processes joined in one torch.distributed process group."""

    def __init__(self, nproc: int, backend: str, impl_specs: List[str], timeout: float, verbose: bool,
                 threads: int = 1):
        self.nproc, self.backend, self.impl_specs = nproc, backend, impl_specs
        self.timeout, self.verbose, self.threads = timeout, verbose, threads
        self.procs: List[Any] = []
        self.conns: List[Any] = []
        self.log_path = ""
        self.startup_failure = ""

    def start(self) -> bool:
        # CPU (gloo): fork, so the ranks start with torch and the implementation already imported by
        # the parent (process start-up is most of a small case's time); CUDA (nccl): spawn, since a
        # CUDA context does not survive a fork.
        ctx = mp.get_context("spawn" if self.backend == "nccl" else "fork")
        if not self.verbose:
            fd, self.log_path = tempfile.mkstemp(prefix="ringlab-conformance-", suffix=".log")
            os.close(fd)
        port = free_port()
        self.procs, self.conns = [], []
        for rank in range(self.nproc):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(rank, self.nproc, port, self.backend, self.impl_specs, child,
                                                  self.log_path, self.threads, self.timeout), daemon=True)
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
        replies = self._collect(None, max(60.0, self.timeout))
        bad = [f"rank {r}: {m[1]}" for r, m in enumerate(replies) if m is not None and m[0] != "ready"]
        missing = [r for r, m in enumerate(replies) if m is None]
        if bad or missing:
            self.startup_failure = bad[0] if bad else f"ranks {missing} did not join the process group"
            self.stop(force=True)
            return False
        return True

    def _collect(self, key, seconds: float, first_error_grace: float = 3.0):
        """Wait for one message per rank (None where none came in time)."""
        replies: List[Any] = [None] * self.nproc
        deadline = time.monotonic() + seconds
        pending = {c: r for r, c in enumerate(self.conns)}
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for c in mpc.wait(list(pending), timeout=left):
                r = pending.pop(c)
                try:
                    replies[r] = c.recv()
                except (EOFError, OSError):
                    replies[r] = ("error", key, f"rank {r}'s process died (exit code {self.procs[r].exitcode})")
                if replies[r][0] == "error":  # the others may now wait forever on this rank
                    deadline = min(deadline, time.monotonic() + first_error_grace)
        return replies

    def run(self, key: str, impl_index: int, payloads: List[Dict[str, Any]], timeout: float) -> Outcome:
        for c, p in zip(self.conns, payloads):
            c.send(("case", key, impl_index, p))
        replies = self._collect(key, timeout)
        errors = [(r, m[2]) for r, m in enumerate(replies) if m is not None and m[0] == "error"]
        missing = [r for r, m in enumerate(replies) if m is None]
        if errors:
            r, line = errors[0]
            others = f" (and {len(errors) - 1} more ranks)" if len(errors) > 1 else ""
            return Outcome(False, failure=f"rank {r}: {line}{others}", kind="error")
        if missing:
            return Outcome(False, failure=f"no answer from ranks {_ranges(missing)} after {timeout:g} s: hangs "
                           "(a send without its receive, or a rank waiting on a peer that went elsewhere)",
                           kind="hang")
        return Outcome(True, results=[m[2] for m in replies])

    def stop(self, force: bool = False) -> None:
        if not force:
            for c in self.conns:
                try:
                    c.send(("quit",))
                except (BrokenPipeError, OSError):
                    pass
            deadline = time.monotonic() + 5
            for p in self.procs:
                p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(2)
            if p.is_alive():
                p.kill()
                p.join()
        for c in self.conns:
            c.close()
        self.procs, self.conns = [], []
        if self.log_path and os.path.exists(self.log_path):
            if self.verbose:
                sys.stderr.write(open(self.log_path).read())
            os.unlink(self.log_path)
        self.log_path = ""

    def log_tail(self, lines: int = 5) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


def _ranges(xs: List[int]) -> str:
    return ranges(xs, limit=None)
