#!/usr/bin/python3
"""The folders stand in layers, and every #include points down (README, "How the code is organised").

Reads every #include "..." of ringlab's sources and checks that a file in a room includes only its
own room and rooms of lower layers. Rooms of one layer never include each other. tests/ and bench/
may include anything. A header that includes itself through a chain (a cycle between files) is
reported too.

Usage: check_layers.py --root REPO [--self-test]
Exit 0 when every include points down, 1 with one line per offending include otherwise.
"""

import argparse
import os
import re
import sys

# Lowest first. A room is a folder prefix; the longest prefix that matches a file names its room.
LAYERS = [
    ["reference"],
    ["sim/plan"],
    ["sim/pipeline"],
    ["sim/ranks"],
    ["sim/cost"],
    ["gpu"],
    ["executors/sim", "executors/dry", "executors/gpu"],
    ["viz", "exercises"],
    ["cli/ringlab", "cli/ringlab-gpu"],
]
UNCHECKED = ("tests/", "bench/")
SOURCE = re.compile(r"\.(cpp|hpp|cu|cuh|h)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(path):
    best = None
    for level, rooms in enumerate(LAYERS):
        for room in rooms:
            if path == room or path.startswith(room + "/"):
                if best is None or len(room) > len(best[1]):
                    best = (level, room)
    return best


def sources(root):
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        for name in files:
            if SOURCE.search(name):
                path = os.path.relpath(os.path.join(top, name), root)
                yield path


def check(root, files):
    """files: {path: text}. Returns a list of findings (strings)."""
    findings = []
    graph = {}
    for path, text in sorted(files.items()):
        mine = room_of(path)
        includes = INCLUDE.findall(text)
        graph[path] = [i for i in includes if i in files]
        if mine is None or path.startswith(UNCHECKED):
            continue
        for target in includes:
            theirs = room_of(target)
            if theirs is None:
                continue
            if theirs[1] == mine[1]:
                continue
            if theirs[0] > mine[0]:
                findings.append(f"{path}: includes {target}: {theirs[1]}/ stands above {mine[1]}/")
            elif theirs[0] == mine[0]:
                findings.append(f"{path}: includes {target}: {theirs[1]}/ and {mine[1]}/ are one layer; "
                                "neither may include the other")
    # Cycles between files: depth-first search over the include graph.
    state = {}
    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                findings.append("include cycle: " + " -> ".join(cycle))
            elif state.get(nxt) is None:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2
    for node in sorted(graph):
        if state.get(node) is None:
            visit(node, [])
    return findings


def self_test():
    ok = check("", {"sim/plan/a.hpp": '#include "reference/x.hpp"\n', "reference/x.hpp": ""}) == []
    up = check("", {"sim/plan/a.hpp": '#include "cli/ringlab/c.hpp"\n', "cli/ringlab/c.hpp": ""})
    side = check("", {"viz/a.cpp": '#include "exercises/e.hpp"\n', "exercises/e.hpp": ""})
    cycle = check("", {"viz/a.hpp": '#include "viz/b.hpp"\n', "viz/b.hpp": '#include "viz/a.hpp"\n'})
    tests = check("", {"tests/t.cpp": '#include "cli/ringlab/c.hpp"\n', "cli/ringlab/c.hpp": ""})
    results = [ok, len(up) == 1 and "stands above" in up[0], len(side) == 1 and "one layer" in side[0],
               any("include cycle" in f for f in cycle), tests == []]
    if not all(results):
        print("check_layers self-test failed:", results, up, side, cycle, tests)
        return 1
    print("check_layers self-test: an upward include, a sideways one and a cycle are caught")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    files = {}
    for path in sources(args.root):
        with open(os.path.join(args.root, path), encoding="utf-8", errors="replace") as f:
            files[path] = f.read()
    findings = check(args.root, files)
    for line in findings:
        print(line)
    checked = sum(1 for p in files if room_of(p) and not p.startswith(UNCHECKED))
    if findings:
        print(f"{len(findings)} includes point the wrong way (of {checked} files checked)")
        return 1
    print(f"every include of {checked} files points down; no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
