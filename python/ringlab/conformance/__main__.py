"""python3 -m ringlab.conformance run --impl MODULE:FUNCTION [--nproc P] [--layout L] DIR"""
from __future__ import annotations

import argparse
import math
import os
import sys

from . import conventions

USAGE_EXIT = 2

EPILOG = """\
The implementation is a per-rank function fn(q, k, v, ctx) -> out or (out, lse): q (B, S_local, H, D),
k and v (B, S_local, HKV, D) hold this rank's rows in the layout's order, in the case's dtype, with
requires_grad; ctx carries rank, world_size, group, positions (-1 = padding), doc_ids, causal, window,
scale, layout (the convention the rows are laid out by), cu_seqlens. out (B, S_local, H, D) must be in
the inputs' dtype; lse (B, H, S_local), natural log, in any floating dtype. The harness calls
out.backward(dout_local) and reads q/k/v.grad. Two references pass every case, as examples:
ringlab.conformance.reference:attention (a ring) and ringlab.conformance.ulysses:attention (Ulysses).

exit status: 0 every case within tolerance; 1 some case wrong, failed or hung (table and diagnosis);
             2 bad usage, no cases, or an implementation that cannot be loaded

layout conventions (--layout; default: each case's own layout, from its case.json):
""" + conventions.describe()


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as every ringlab command
        sys.stderr.write(f"ringlab.conformance: {message} (see --help)\n")
        sys.exit(USAGE_EXIT)


def main(argv=None) -> int:
    parser = _Parser(prog="python3 -m ringlab.conformance",
                     description="Verify a torch.distributed context-parallel attention against ringlab's cases.",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser("run", help="run an implementation on a case folder",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("dir", metavar="DIR", help="the folder written by `ringlab conformance cases DIR` (or one case)")
    run.add_argument("--impl", action="append", required=True, metavar="MODULE:FUNCTION",
                     help="the per-rank function; repeat to run several implementations on the same cases")
    run.add_argument("--nproc", type=int, metavar="P",
                     help="processes (ranks): run the cases written for P ranks (default: every case at its own "
                          "P); with --layout, every case at P ranks")
    run.add_argument("--layout", metavar="L", help="token-to-rank convention the implementation expects "
                     "(torch-round-robin:BLOCK takes a block size; the others no parameter)")
    run.add_argument("--backend", choices=["gloo", "nccl"], default="gloo", help="torch.distributed backend (gloo)")
    run.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per-case watchdog in seconds (60)")
    run.add_argument("--cases", metavar="NAME,...", help="only the cases whose names contain one of these")
    run.add_argument("--json", metavar="FILE", help="also write the results as JSON (written whole, or not at all)")
    run.add_argument("--threads", type=int, default=1, metavar="N", help="torch threads per rank (1)")
    run.add_argument("--trace", action="store_true",
                     help="step trace: give ctx.trace(step, out, lse) to the implementation and name the first "
                          "(rank, step) whose running partial differs from what the ring should hold")
    run.add_argument("--verbose", action="store_true", help="show the ranks' own output (normally kept back)")
    sub.add_parser("layouts", help="list the layout conventions")
    args = parser.parse_args(argv)
    if args.command == "layouts":
        print(conventions.describe())
        return 0
    if args.command != "run":
        parser.print_usage(sys.stderr)
        return USAGE_EXIT
    return _run(args)


def _run(args) -> int:
    from .cases import CaseError
    from .runner import load_function

    def usage(msg: str) -> int:
        sys.stderr.write(f"ringlab.conformance: {msg}\n")
        return USAGE_EXIT

    if args.nproc is not None and args.nproc < 1:
        return usage(f"--nproc {args.nproc}: needs at least 1 process")
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        return usage(f"--timeout {args.timeout:g}: must be a positive, finite number of seconds")
    if args.threads < 1:
        return usage(f"--threads {args.threads}: needs at least 1 thread")
    if args.layout and args.layout != "case":
        if args.layout.partition(":")[0] not in conventions.CONVENTIONS:
            return usage(f"unknown --layout '{args.layout}' (known: case, {', '.join(conventions.CONVENTIONS)})")
        try:
            conventions.parse_name(args.layout)
        except ValueError as e:
            return usage(f"--{e}")  # "--layout 'NAME': why"
    if args.backend == "nccl":
        import torch

        if not torch.cuda.is_available():
            return usage("--backend nccl needs CUDA GPUs; none is visible here (use --backend gloo on CPU)")
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        return usage(f"--json {args.json}: its folder does not exist")
    sys.path.insert(0, os.getcwd())  # MODULE may be a file in the current folder, as with python -m
    for spec in args.impl:
        try:
            load_function(spec)
        except ValueError as e:
            return usage(str(e))
    from .harness import run

    try:
        return run(args.impl, args.dir, args.nproc, args.layout, args.backend, args.timeout, args.json, sys.stdout,
                   verbose=args.verbose, case_filter=args.cases.split(",") if args.cases else None,
                   threads=args.threads, trace=args.trace)
    except CaseError as e:
        return usage(str(e))


if __name__ == "__main__":
    sys.exit(main())
