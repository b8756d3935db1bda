#!/usr/bin/env python3
"""What one Nsight Compute report says about where a kernel's cycles go, as plain text: the stall
reasons per issued instruction (from the raw page), the executed instructions by opcode, and the
SASS instructions that the warp-state sampler found stalled most often (from the source page).

  ncu -i REPORT.ncu-rep --page raw --csv > raw.csv
  ncu -i REPORT.ncu-rep --page source --csv --print-source sass > source.csv
  python3 ncu_digest.py --raw raw.csv --source source.csv [--top 30]

The GPU bundle's `run --profile` appends this to each ncu-*.txt. The column names differ between
Nsight Compute versions, so they are found by what they contain; a table whose columns are not
found says so and shows the header it got, instead of guessing.
"""
import argparse
import csv
import re
import sys
from collections import Counter


def rows_of(path):
    """The CSV rows of an ncu page (the ==PROF== and program lines before the header dropped). With
    none, one row holding the file's first line: ncu's complaint, for the digest to show."""
    with open(path, newline="", errors="replace") as f:
        text = f.readlines()
    lines = [line for line in text if line.startswith('"')]
    if not lines:
        return [["(not a CSV page: " + (text[0].strip() if text else "empty file") + ")"]]
    return list(csv.reader(lines))


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


STALL = re.compile(r"^smsp__average_warps?_issue_stalled_(\w+?)_per_issue_active\.ratio$")


def stall_table(rows):
    """Cycles per issued instruction spent stalled, by reason, from the raw page: a header row of
    metric names, a row of units, then one row per profiled launch (the first is used)."""
    out = ["stall reasons: warp cycles per issued instruction (raw page, first launch)"]
    header = next((r for r in rows if any(STALL.match(c) for c in r)), None)
    if header is None:
        out.append("  (no smsp__average_warp*_issue_stalled_*_per_issue_active.ratio column in the raw page"
                   + (f": {rows[0][0][:200]}" if rows and rows[0] else "") + ")")
        return out
    at = rows.index(header)
    first = next(i for i, c in enumerate(header) if STALL.match(c))
    # The units row has no number there; the first launch's row does.
    values = next((r for r in rows[at + 1:] if len(r) == len(header) and number(r[first]) is not None), None)
    if values is None:
        out.append("  (the raw page has the stall columns but no launch row)")
        return out
    stalls = []
    for i, name in enumerate(header):
        m = STALL.match(name)
        v = number(values[i]) if m else None
        if m and v is not None and v > 0:
            stalls.append((v, m.group(1)))
    total = sum(v for v, _ in stalls)
    for v, reason in sorted(stalls, reverse=True):
        out.append(f"  {reason:<24} {v:7.2f}  {100 * v / total:5.1f}%")
    out.append(f"  {'(sum)':<24} {total:7.2f}")
    return out


def column(header, *needles, exclude=()):
    for i, name in enumerate(header):
        low = name.lower()
        if all(n in low for n in needles) and not any(x in low for x in exclude):
            return i
    return None


def opcode_of(source):
    """HMMA from '@!P0 HMMA.16816.F32.BF16 R0, R4, R8, R0 ;'."""
    words = source.strip().split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def source_tables(rows, top):
    header = next((r for r in rows if column(r, "source") is not None and column(r, "address") is not None), None)
    if header is None:
        return ["SASS: no source page with Address and Source columns" + (f" ({rows[0][:8]})" if rows else "")]
    src, addr = column(header, "source"), column(header, "address")
    stalled = column(header, "stall sampling", "all")
    executed = column(header, "instructions executed", exclude=("thread", "predicated"))
    body = [r for r in rows[rows.index(header) + 1:] if len(r) == len(header) and r[src].strip()]
    out = []
    if executed is None:
        out.append(f"executed instructions by opcode: no 'Instructions Executed' column (header: {header})")
    else:
        counts = Counter()
        for r in body:
            counts[opcode_of(r[src])] += number(r[executed]) or 0
        total = sum(counts.values())
        out.append(f"executed instructions by opcode (warp-level, {total:,.0f} in all)")
        mma = sum(v for k, v in counts.items() if k in ("HMMA", "IMMA", "HGMMA"))
        for op, v in counts.most_common(24):
            out.append(f"  {op:<10} {v:14,.0f}  {100 * v / max(total, 1):5.1f}%")
        if mma:
            out.append(f"  instructions per tensor-core instruction: {total / mma:.2f}")
    out.append("")
    if stalled is None:
        out.append(f"SASS hot spots: no 'Warp Stall Sampling (All Samples)' column (header: {header})")
        return out
    samples = [(number(r[stalled]) or 0, r) for r in body]
    total = sum(s for s, _ in samples)
    out.append(f"SASS hot spots: the {top} instructions with the most warp-state samples ({total:,.0f} samples in all)")
    for s, r in sorted(samples, key=lambda x: -x[0])[:top]:
        out.append(f"  {100 * s / max(total, 1):5.1f}%  {r[addr]:>8}  {r[src].strip()}")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--raw", help="ncu -i R --page raw --csv")
    parser.add_argument("--source", help="ncu -i R --page source --csv --print-source sass")
    parser.add_argument("--top", type=int, default=30, help="hot spots to list (default 30)")
    args = parser.parse_args()
    if not args.raw and not args.source:
        print("ncu_digest: give --raw FILE, --source FILE or both", file=sys.stderr)
        return 2
    lines = []
    try:
        if args.raw:
            lines += stall_table(rows_of(args.raw)) + [""]
        if args.source:
            lines += source_tables(rows_of(args.source), args.top)
    except OSError as e:
        print(f"ncu_digest: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
