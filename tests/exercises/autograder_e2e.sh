#!/usr/bin/env bash
# The autograder package end to end, as Gradescope runs it: `ringlab autograder 03-ring-forward`
# into a folder; checked relocatable (no path of the machine that made it) and answer-free; its
# setup.sh run here (Debian; Gradescope's base images are Ubuntu - see the book's course page for
# what differs); then for each submission a fresh tree laid out as /autograder/{source,submission,
# results} under a path prefix, source/ the package, run_autograder copied to /autograder/ as
# Gradescope does, and its results/results.json read:
#   the solution (full marks), a broken version (less), a file that does not compile (every
#   criterion at 0, not run, with the compiler's first error and no grader path), a cheating
#   include (refused, 0), and run-time attacks (tests/exercises/fixtures/autograder_attacks.hpp:
#   writing results.json, reading the grader's files, a process that outlives its test, memory
#   exhaustion, a forged passing verdict), each 0 for its criterion with the line that says why, the results the grader's.
# A negative control grades the attacks without the sandbox: the write then succeeds.
# Needs root (the package runs submissions as another user): exits 77 (skipped) otherwise.
#
# Also the student kit (`ringlab student-kit`): complete, answer-free, and its grader runs.
#
#   autograder_e2e.sh RINGLAB SOURCE_DIR BUILD_DIR [GRADE_CACHE]
set -euo pipefail
ringlab=$1 src=$2 build=$3
cache=${4:-${RINGLAB_GRADE_CACHE:-/tmp/ringlab-grade-$(id -u)}}
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the autograder test needs root (run_autograder switches to an unprivileged user)"
  exit 77
fi
work=$(mktemp -d /tmp/ringlab-autograder-XXXXXX)
[ -n "${RINGLAB_KEEP_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
lab=03-ring-forward
labdir=$src/exercises/labs/$lab
fail() { echo "FAILED: $*" >&2; exit 1; }
json() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $2" "$1" "${@:3}"; }

# ---- the package -----------------------------------------------------------------------------
pkg=$work/package
"$ringlab" autograder $lab "$pkg" > /dev/null
for f in setup.sh run_autograder grader/ringlab-grade grader/grader.json; do
  [ -f "$pkg/$f" ] || fail "the package lacks $f"
done
[ -x "$pkg/run_autograder" ] && [ -x "$pkg/setup.sh" ] || fail "setup.sh and run_autograder must be executable"
if grep -rl -e "$src" -e "$build" "$pkg"; then fail "the package names a path of the machine that made it (above)"; fi
if find "$pkg" -name 'solution*' -o -name '*.patch' -o -name 'harness.cpp' -o -name broken | grep .; then
  fail "the package holds an answer file (above)"
fi
if grep -rlF "whose block this is: its positions mask it" "$pkg"; then fail "the package holds the solution's text"; fi
du -sk "$pkg" | awk '{print "package: " $1 " KiB"}'

# setup.sh, as Gradescope runs it once per image (idempotent: the compiler is there, the user too)
bash "$pkg/setup.sh"
id -u ringlab-student > /dev/null || fail "setup.sh did not create the user submissions run as"

# ---- the student kit: every hand-out and the same grader, no answer ----------------------------
kit=$work/kit
RINGLAB_GRADE_CACHE=$cache "$ringlab" student-kit "$kit" > /dev/null
if grep -rl -e "$src" -e "$build" "$kit"; then fail "the student kit names a path of the machine that made it (above)"; fi
if find "$kit" -name 'solution*' -o -name '*.patch' -o -name 'harness.cpp' -o -name broken | grep .; then
  fail "the student kit holds an answer file (above)"
fi
for readme in "$src"/exercises/labs/0*/harness.cpp; do
  id=$(basename "$(dirname "$readme")")
  [ -f "$kit/$id/starter.cpp" ] || [ ! -f "$build/exercises/libringlab_lab_$id.a" ] || fail "the kit lacks $id"
done
make -s -C "$kit/01-softmax-merge" check || fail "make check in the kit's lab 01"
set +e
(cd "$kit" && RINGLAB_GRADE_CACHE=$work/kit-cache ./ringlab-grade 01-softmax-merge 01-softmax-merge/starter.cpp) \
  > "$work/kit.log" 2>&1
status=$?
set -e
[ $status -eq 1 ] && grep -q -- "-- FAILED" "$work/kit.log" || fail "the kit's grader on a starter: $(cat "$work/kit.log")"
grep -q "reproduce: ./ringlab-grade 01-softmax-merge 01-softmax-merge/starter.cpp --only" "$work/kit.log" ||
  fail "the kit's reproduce lines: $(cat "$work/kit.log")"

# ---- one submission in a fresh /autograder tree ------------------------------------------------
graded() {  # NAME FILE...: grades FILE... as a submission; prints the results.json path
  local name=$1
  shift
  local root=$work/$name/autograder
  mkdir -p "$root/source" "$root/submission" "$root/results" "$work/$name/flags"
  chmod 1777 "$work/$name/flags"
  cp -a "$pkg/." "$root/source/"
  cp "$root/source/run_autograder" "$root/run_autograder"
  cp "$@" "$root/submission/"
  (cd / && "$root/run_autograder") > "$work/$name/run.log" 2>&1 || fail "run_autograder failed: $(cat "$work/$name/run.log")"
  [ -s "$root/results/results.json" ] || fail "no results.json for $name: $(cat "$work/$name/run.log")"
  echo "$root/results/results.json"
}
score() { json "$1" 'print(r["score"])'; }
max_score() { json "$1" 'print(sum(t["max_score"] for t in r["tests"]))'; }

# the solution: full marks
solution=$(graded solution "$labdir/solution.cpp")
[ "$(score "$solution")" = "$(max_score "$solution")" ] || fail "the solution scored $(score "$solution") of $(max_score "$solution")"
full=$(max_score "$solution")
[ "$(json "$solution" 'print(float(r["score"]) > 0)')" = True ] || fail "the solution scored 0"
tests=$(json "$solution" 'print(len(r["tests"]))')

# a broken version: less, and not 0
RINGLAB_GRADE_CACHE=$cache "$ringlab" grade $lab broken/missing_rescale --only compiles > /dev/null || true
broken=$(graded broken "$cache/broken/$lab/missing_rescale.cpp")
json "$broken" 'assert 0 < r["score"] < float(sys.argv[2]), r["score"]' "$full" || fail "the broken version's score"

# a file that does not compile: every criterion at 0, not run, the first error, no grader path
printf 'this is not C++\n' > "$work/typo.cpp"
typo=$(graded typo "$work/typo.cpp")
json "$typo" '
assert r["score"] == 0
names = [t["name"].split(":")[0] for t in r["tests"]]
assert "compiles" in names, names
assert len(r["tests"]) == int(sys.argv[2]) + 1, (len(r["tests"]), sys.argv[2])
for t in r["tests"]:
    assert t["score"] == 0
    if not t["name"].startswith("compiles"):
        assert "not run: the submission did not compile" in t["output"], t["output"]
        assert "first error: typo.cpp:1:1: error:" in t["output"], t["output"]
' "$tests" || fail "the compile failure's results: $typo"
if grep -e "$work/typo/autograder" -e "$src" "$typo"; then fail "the compile failure shows the grader's paths (above)"; fi

# a cheating include: refused, 0
printf '#include "%s/solution.cpp"\n' "$labdir" > "$work/cheat.cpp"
cheat=$(graded cheat "$work/cheat.cpp")
json "$cheat" '
assert r["score"] == 0
out = [t["output"] for t in r["tests"] if t["name"].startswith("compiles")][0]
assert "refused: your file includes" in out, out
' || fail "the cheating include's results: $cheat"

# ---- run-time attacks --------------------------------------------------------------------------
{
  cat "$src/tests/exercises/fixtures/autograder_attacks.hpp"
  sed 's/^\(  const int P = comm.size(), rank = comm.rank();\)$/\1\n  ringlab_attack(rank);/' "$labdir/solution.cpp"
} > "$work/attack.cpp"
grep -q "ringlab_attack(rank);" "$work/attack.cpp" || fail "the attack could not be spliced into the solution"
root=$work/attack/autograder
mkdir -p "$root/source"
printf 'an instructor file\n' > "$root/source/instructor-only.txt"  # copied with the package below
chmod 600 "$root/source/instructor-only.txt"
attack=$(RINGLAB_MEMORY_MIB=1024 graded attack "$work/attack.cpp")
sleep 4  # the lingering process would have woken by now
json "$attack" '
tests = {t["name"].split(":")[0]: t for t in r["tests"]}
want = {"p2": "Permission denied", "p3": "Permission denied",
        "p8": "left 1 process running after it ended (killed)",
        "p4-causal": "ran out of memory: the limit is 1024 MiB per criterion",
        "p5-zigzag": "the process running your code"}
for id, line in want.items():
    assert tests[id]["score"] == 0, (id, tests[id])
    assert line in tests[id]["output"], (id, tests[id]["output"])
assert tests["p1"]["score"] == tests["p1"]["max_score"] > 0, tests["p1"]
assert "FORGED" not in json.dumps(r)
' || fail "the attacks' results: $attack"
[ ! -e "$work/attack/flags/lingering-process-was-alive" ] || fail "the lingering process outlived the grading"
json "$root/source/grader/grader.json" 'assert r["format"] == "ringlab-grader-kit 1"' || fail "grader.json was changed"

json "$attack" '
for t in r["tests"]:
    if t["score"] == 0 and t["name"].split(":")[0] in ("p2", "p3", "p8", "p4-causal", "p5-zigzag"):
        print("  attack", t["name"].split(":")[0] + ":", t["output"].split("\n")[1])
'

# negative control: without the sandbox the same write succeeds (the test can see a hole)
RINGLAB_GRADE_CACHE=$root/work/cache "$root/source/grader/ringlab-grade" --kit "$root/source/grader" $lab \
  "$root/submission/attack.cpp" --only p2 --json > "$work/control.json" 2> /dev/null || true
json "$work/control.json" '
p2 = [c for c in r["criteria"] if c["id"] == "p2"][0]
assert p2["status"] == "passed", p2
' || fail "the negative control: unsandboxed, the attack should have written the results"
grep -q FORGED "$root/results/results.json" || fail "the negative control: no forged results"
echo "autograder end to end: solution $full/$full, broken $(score "$broken"), compile failure 0, cheat 0, attacks contained"
