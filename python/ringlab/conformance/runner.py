"""P worker processes with a torch.distributed process group, and the per-case watchdog.

The parent prepares each rank's inputs (NumPy arrays and the context), sends them over a pipe,
and waits for every rank's local outputs and gradients. A rank that does not answer within the
case's time is a hang: the whole group is ended and started afresh for the next case. A rank that
raises, or returns the wrong shape, answers with one line; the group is restarted as well (its
collectives may be half done).

The process group's own timeout (gloo's, NCCL's) is set well past the watchdog's (2 x + 30 s), so a
rank stuck in its own code is reported as a hang, not as its peers' "Connection closed by peer" once
their receives time out. On a hang each silent rank dumps its Python stack (faulthandler, on
STACK_SIGNAL, into a file of its own) and the HANG line says where each one is: busy in its own code,
or waiting inside torch.distributed (and which of its own frames called it). A rank whose process
dies is named with its exit code or signal before its peers' connection errors.
"""
from __future__ import annotations

import dataclasses
import faulthandler
import importlib
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

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
    hint = ""
    if text.startswith("Invalid scalar type") and "distributed_c10d" in where:
        # gloo's collectives refuse some dtypes (bfloat16 in all_to_all, in PyTorch 1.13 at least)
        hint = "; gloo may not take this dtype in this collective: exchange in float32, or run with nccl"
    return f"{type(e).__name__}: {text}{where}{hint}"


STACK_SIGNAL = signal.SIGUSR1  # a worker dumps its Python stack into its stack file on this signal
_stack_file = None  # the worker's open stack file (faulthandler writes to its descriptor)


def group_timeout(watchdog: float) -> float:
    """The process group's timeout: clearly past the watchdog's, so that the watchdog sees a hang first."""
    return 2 * watchdog + 30


def _track_work_wait(dist) -> None:
    """Wrap Work.wait (a C++ method: a rank blocked in it shows only its caller's frame) in a Python
    function of this file, so that a stack taken during a hang shows the rank waiting in torch.distributed."""
    work = getattr(dist, "Work", None) or getattr(dist.distributed_c10d, "Work", None)
    original = getattr(work, "wait", None)
    if original is None or getattr(original, "_ringlab_tracked", False):
        return

    def _work_wait(self, *args, **kwargs):
        return original(self, *args, **kwargs)

    _work_wait._ringlab_tracked = True
    try:
        work.wait = _work_wait
    except (AttributeError, TypeError):  # a build whose Work cannot be patched: stacks name the caller only
        pass


def _worker(rank: int, world: int, port: int, backend: str, impl_specs: List[str], conn, log_path: str,
            threads: int, timeout: float, stack_path: str = "") -> None:
    global _stack_file
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    if stack_path:
        _stack_file = open(stack_path, "w")
        faulthandler.register(STACK_SIGNAL, file=_stack_file, all_threads=True)
    import datetime

    import torch
    import torch.distributed as dist

    _track_work_wait(dist)
    torch.set_num_threads(threads)
    try:
        fns = [load_function(s) for s in impl_specs]
        device = torch.device("cpu")
        if backend == "nccl":
            device = torch.device("cuda", rank % torch.cuda.device_count())
            torch.cuda.set_device(device)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=group_timeout(timeout)))
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
    if out.dtype != q.dtype:  # a rounded (or widened) out would be judged as a numerical bug
        raise TypeError(f"out is {out.dtype}, the inputs are {q.dtype}: return out in the inputs' dtype")
    if lse is not None:
        lexp = (q.shape[0], q.shape[2], q.shape[1])
        if not isinstance(lse, torch.Tensor) or tuple(lse.shape) != lexp:
            got = tuple(lse.shape) if isinstance(lse, torch.Tensor) else type(lse).__name__
            raise ValueError(f"lse has shape {got}, expected {lexp} (B, H, S_local)")
        if not lse.dtype.is_floating_point:
            raise TypeError(f"lse is {lse.dtype}: return lse in a floating-point dtype (any: float32 is usual)")
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
        self.stack_dir = ""
        self.startup_failure = ""

    def start(self) -> bool:
        # CPU (gloo): fork, so the ranks start with torch and the implementation already imported by
        # the parent (process start-up is most of a small case's time); CUDA (nccl): spawn, since a
        # CUDA context does not survive a fork.
        ctx = mp.get_context("spawn" if self.backend == "nccl" else "fork")
        if not self.verbose:
            fd, self.log_path = tempfile.mkstemp(prefix="ringlab-conformance-", suffix=".log")
            os.close(fd)
        self.stack_dir = tempfile.mkdtemp(prefix="ringlab-conformance-stacks-")
        port = free_port()
        self.procs, self.conns = [], []
        for rank in range(self.nproc):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(rank, self.nproc, port, self.backend, self.impl_specs, child,
                                                  self.log_path, self.threads, self.timeout,
                                                  self._stack_path(rank)), daemon=True)
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
        replies = self._collect(None, max(60.0, self.timeout))
        bad = [f"rank {r}: {m[2] if m[0] == 'died' else m[1]}" for r, m in enumerate(replies)
               if m is not None and m[0] != "ready"]
        missing = [r for r, m in enumerate(replies) if m is None]
        if bad or missing:
            self.startup_failure = bad[0] if bad else f"ranks {missing} did not join the process group"
            self.stop(force=True)
            return False
        return True

    def _stack_path(self, rank: int) -> str:
        return os.path.join(self.stack_dir, f"rank{rank}.txt")

    def _death(self, rank: int) -> str:
        """One line for a rank whose pipe closed: its exit code, or the signal that ended it."""
        p = self.procs[rank]
        p.join(2.0)  # the pipe closes as the process ends: wait briefly for its exit status
        code = p.exitcode
        if code is None:
            return "its process closed its pipe to the harness and has not exited"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"its process died, killed by {name}"
        return f"its process died (exit code {code})"

    def _collect(self, key, seconds: float, first_error_grace: float = 3.0):
        """Wait for one message per rank (None where none came in time); a rank whose process ended
        answers ("died", key, line)."""
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
                    replies[r] = ("died", key, self._death(r))
                if replies[r][0] in ("error", "died"):  # the others may now wait forever on this rank
                    deadline = min(deadline, time.monotonic() + first_error_grace)
        return replies

    def run(self, key: str, impl_index: int, payloads: List[Dict[str, Any]], timeout: float) -> Outcome:
        for c, p in zip(self.conns, payloads):
            c.send(("case", key, impl_index, p))
        replies = self._collect(key, timeout)
        errors = [(r, m[0], m[2]) for r, m in enumerate(replies) if m is not None and m[0] in ("error", "died")]
        missing = [r for r, m in enumerate(replies) if m is None]
        if errors:
            # The cause first: a rank whose process died, then an error of a rank's own, and only then the
            # errors its peers see because of it (a connection closed or reset, a broken pipe, a timeout).
            errors.sort(key=lambda e: (0 if e[1] == "died" else 2 if _peer_consequence(e[2]) else 1, e[0]))
            r, _, line = errors[0]
            others = f" (and {len(errors) - 1} more ranks)" if len(errors) > 1 else ""
            return Outcome(False, failure=f"rank {r}: {line}{others}", kind="error")
        if missing:
            where = describe_stuck(self.stacks(missing))
            lead = f"no answer from ranks {_ranges(missing)} after {timeout:g} s: "
            if where:
                return Outcome(False, failure=lead + where, kind="hang")
            return Outcome(False, failure=lead + "hangs (a send without its receive, or a rank waiting on a peer "
                           "that went elsewhere)", kind="hang")
        return Outcome(True, results=[m[2] for m in replies])

    def stacks(self, ranks: List[int], wait: float = 3.0) -> Dict[int, List["Frame"]]:
        """Each silent rank's main-thread Python stack (innermost frame first), dumped by faulthandler on
        STACK_SIGNAL; ranks whose stack did not come within `wait` seconds are left out."""
        if not self.stack_dir:
            return {}
        asked = []
        for r in ranks:
            try:
                os.kill(self.procs[r].pid, STACK_SIGNAL)
                asked.append(r)
            except (OSError, TypeError):
                pass
        texts: Dict[int, str] = {}
        deadline = time.monotonic() + wait
        while asked and time.monotonic() < deadline:
            for r in list(asked):
                try:
                    with open(self._stack_path(r), errors="replace") as f:
                        text = f.read()
                except OSError:
                    text = ""
                if _FRAME.search(text):
                    texts[r] = text
                    asked.remove(r)
            if asked:
                time.sleep(0.05)
        if texts:
            time.sleep(0.1)  # let a dump that is still being written finish
            for r in texts:
                try:
                    with open(self._stack_path(r), errors="replace") as f:
                        texts[r] = f.read()
                except OSError:
                    pass
        return {r: main_thread_frames(t) for r, t in texts.items()}

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
        if self.stack_dir:
            shutil.rmtree(self.stack_dir, ignore_errors=True)
        self.stack_dir = ""

    def log_tail(self, lines: int = 5) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


# ---- what a peer's failure looks like to the other ranks -----------------------------------------

_PEER_CONSEQUENCES = ("closed by peer", "reset by peer", "broken pipe", "timed out", "timeout",
                      "connection refused")


def _peer_consequence(line: str) -> bool:
    """An error a rank sees because a peer failed (gloo's "Connection closed/reset by peer", a broken pipe,
    a timeout): the peer's own failure is the one to report."""
    low = line.lower()
    return any(p in low for p in _PEER_CONSEQUENCES)


# ---- where a silent rank is: its stack, read ------------------------------------------------------

Frame = Tuple[str, int, str]  # (file, line, function)
_FRAME = re.compile(r'^\s*File "(.*)", line (\d+) in (.*?)\s*$', re.M)
_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+ .*$|^Stack \(most recent call first\):$", re.M)


def main_thread_frames(text: str) -> List[Frame]:
    """The frames (innermost first) of the thread that runs the worker's loop, from a faulthandler dump."""
    starts = [m.start() for m in _THREAD.finditer(text)] or [0]
    blocks = [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
    parsed = [[(f, int(n), fn) for f, n, fn in _FRAME.findall(b)] for b in blocks]
    parsed = [p for p in parsed if p]
    for frames in parsed:
        if any(fn == "_worker" and _is_harness(f) for f, _, fn in frames):
            return frames
    current = [p for b, p in zip(blocks, parsed) if b.startswith("Current thread")]
    return current[0] if current else (parsed[0] if parsed else [])


def _norm(path: str) -> str:
    return path.replace(os.sep, "/")


def _is_harness(path: str) -> bool:
    return _norm(path).endswith("ringlab/conformance/runner.py")


def _is_torch(path: str) -> bool:
    return "/torch/" in _norm(path)


def _is_torch_distributed(path: str) -> bool:
    return "/torch/distributed/" in _norm(path)


def _is_library(path: str) -> bool:
    """Python's own modules (threading, multiprocessing, ...): neither torch nor the user's code."""
    p = _norm(path)
    return p.startswith("<") or any(f"/lib/python{sys.version_info.major}.{sys.version_info.minor}/{m}" in p
                                     for m in ("threading.py", "multiprocessing/", "selectors.py", "socket.py"))


def where_is(frames: List[Frame]) -> Tuple[str, str]:
    """("busy", "at FILE:LINE in FUNC") for a rank in its own code (or in a torch op it called), or
    ("wait", "in torch.distributed NAME (FILE:LINE in FUNC)") for one waiting on a peer; ("", "")
    when the stack says nothing."""
    if not frames:
        return "", ""
    # The innermost frames that are torch's (or the harness's Work.wait wrapper): what the user's code called.
    i = 0
    while i < len(frames) and (_is_torch(frames[i][0]) or (_is_harness(frames[i][0]) and
                                                            frames[i][2] == "_work_wait")):
        i += 1
    called = frames[:i]
    user = next(((f, n, fn) for f, n, fn in frames[i:] if not _is_harness(f) and not _is_library(f)
                 and not _is_torch(f)), None)
    here = f"{os.path.basename(user[0])}:{user[1]} in {user[2]}" if user else ""
    in_dist = [fn for f, _, fn in called if _is_torch_distributed(f)]
    waits = any(_is_harness(f) and fn == "_work_wait" for f, _, fn in called)
    if in_dist or waits:
        # The API the user called: the outermost torch.distributed function that is not a decorator's wrapper.
        names = [fn for fn in in_dist if fn != "wrapper" and not fn.startswith("_")]
        name = names[-1] if names else "Work.wait"
        return "wait", f"in torch.distributed {name}" + (f" ({here})" if here else "")
    if user:
        return "busy", f"at {here}"
    f, n, fn = frames[0]
    return "busy", f"at {os.path.basename(f)}:{n} in {fn}"


def describe_stuck(stacks: Dict[int, List[Frame]]) -> str:
    """One line: where each silent rank is, ranks busy in their own code first ("rank 0 is busy at
    impl.py:12 in attention; ranks 1-2 wait in torch.distributed recv (impl.py:40 in ring_send)")."""
    groups: Dict[Tuple[str, str], List[int]] = {}
    for r in sorted(stacks):
        kind, where = where_is(stacks[r])
        if kind:
            groups.setdefault((kind, where), []).append(r)
    parts = []
    for (kind, where), ranks in sorted(groups.items(), key=lambda g: (g[0][0] != "busy", g[1][0])):
        one = len(ranks) == 1
        who = f"rank{'' if one else 's'} {_ranges(ranks)}"
        verb = ("is busy" if one else "are busy") if kind == "busy" else ("waits" if one else "wait")
        parts.append(f"{who} {verb} {where}")
    return "; ".join(parts)


def _ranges(xs: List[int]) -> str:
    return ranges(xs, limit=None)
