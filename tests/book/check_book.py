#!/usr/bin/python3
"""The book cannot drift from the code.

Checks every page of book/ against the binaries that were just built:

  commands  every line `$ ringlab ...` (or `$ ringlab-viz ...`, `$ cp ...`, `$ mkdir ...`) inside a
            ```console block is run, in page order, in a scratch folder where the repository's
            folders are visible (book/, exercises/, ...) and `ringlab` is the built binary;
  exit      its exit status must be 0, or the N of a trailing `# exit N` on the command line;
  output    every output line the block shows under the command must appear in the real output
            (stdout, then stderr), in the same order, after collapsing runs of whitespace. A line
            that is just `...` marks a cut; `...` inside a line matches anything (a timing column,
            a path). Lines not shown are not checked: shown output may be trimmed freely. Numbers
            with a fraction or exponent agree within 1e-4 relative or one unit of their last shown
            digit where that is under 0.2% (it can depend on the CPU: -march=native), integers
            exactly;
  stray     a `ringlab` command in any other fenced block is an error (it would not be run);
            `ringlab-gpu` commands are exempt (they need a GPU) and must sit in ```sh blocks;
  snippets  a fenced block right after `<!-- snippet: PATH -->` must be a verbatim run of lines of
            PATH (a line `// ...` skips lines of the file), so quoted code cannot go stale;
  names     every exercise named as exercise `ID` and every lab named NN-name must exist
            (`ringlab exercises --json`, `ringlab grade --list`);
  figures   every figure a page shows (figures/NAME) exists in book/figures/, scripts/book-figures
            has a command for it, every file in book/figures/ is shown somewhere, and the SVG
            figures regenerated now equal the committed ones (numbers within 1e-3 relative).

Usage: check_book.py --root REPO --ringlab BIN [--viz BIN] [--page NAME.md ...] [--no-figures]
       check_book.py --self-test     (the output matcher: tolerant digits, wrong numbers caught)
Exit 0 when everything holds, 1 with a list of findings otherwise.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ALLOWED_PROGRAMS = {"ringlab", "ringlab-viz", "cp", "mkdir"}
EXIT_NOTE = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
SNIPPET = re.compile(r"^<!--\s*snippet:\s*(\S+)\s*-->\s*$")
FIGURE = re.compile(r"""(?:\]\(|src=["'])(figures/[^)"'\s]+)""")
EXERCISE_REF = re.compile(r"\bexercises?\s+`([^`\s]+)`")
LAB_REF = re.compile(r"(?<![\w/-])(0[1-9]-[a-z]+(?:-[a-z]+)*)(?![\w-])")
STRAY = re.compile(r"^\s*(?:\$\s+)?(?:\./)?(?:build/)?ringlab(?:-viz)?(?:\s|$)")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
COMMAND_TIMEOUT_S = 180


def normalise(line):
    return " ".join(line.split())


class Command:
    def __init__(self, page, line, text, expected_exit, output):
        self.page, self.line, self.text, self.expected_exit, self.output = page, line, text, expected_exit, output


class Page:
    def __init__(self, name, text):
        self.name, self.text = name, text
        self.commands = []  # Command, in page order
        self.snippets = []  # (line, path, [lines])
        self.stray = []     # (line, text): ringlab commands outside console blocks
        self.orphans = []   # (line, text): console lines before any `$` command
        self.parse()

    def parse(self):
        lines = self.text.split("\n")
        i = 0
        snippet_path = None
        while i < len(lines):
            match = FENCE.match(lines[i])
            if not match:
                s = SNIPPET.match(lines[i].strip())
                if s:
                    snippet_path = s.group(1)
                elif lines[i].strip():
                    snippet_path = None
                i += 1
                continue
            indent, fence, info, start = len(match.group(1)), match.group(2), match.group(3), i
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence[:3]):
                line = lines[i]
                body.append(line[indent:] if not line[:indent].strip() else line.lstrip())  # a fence inside a list item
                i += 1
            i += 1  # the closing fence
            if snippet_path:
                self.snippets.append((start + 1, snippet_path, body))
                snippet_path = None
            if info == "console":
                self.parse_console(start + 2, body)
            else:
                for k, line in enumerate(body):
                    if STRAY.match(line):
                        self.stray.append((start + 2 + k, line.strip()))

    def parse_console(self, first_line, body):
        k = 0
        while k < len(body):
            line = body[k]
            if not line.startswith("$ "):
                if line.strip():
                    self.orphans.append((first_line + k, line.strip()))
                k += 1
                continue
            number = first_line + k
            text = line[2:]
            while text.endswith("\\") and k + 1 < len(body):
                k += 1
                text = text[:-1] + " " + body[k].strip()
            k += 1
            output = []
            while k < len(body) and not body[k].startswith("$ "):
                output.append(body[k])
                k += 1
            expected = 0
            note = EXIT_NOTE.search(text)
            if note:
                expected = int(note.group(1))
                text = text[: note.start()]
            self.commands.append(Command(self.name, number, text.strip(), expected, output))


def numbers_agree(shown, real):
    """A number the book shows against the one printed now (integers never get here: they are matched
    as text). A number with a fraction or an exponent may differ by 1e-4 relative, or by one unit
    of its last shown digit where that unit is under 0.2% of it (a one-digit 2e-05 must stay 2e-05),
    because its last digit can depend on the CPU's instruction set (FMA contraction, vector width)
    and the book must hold on any x86-64 machine."""
    a, b = float(shown), float(real)
    mantissa = re.match(r"-?\d+(?:\.(\d+))?(?:[eE]([-+]?\d+))?$", shown)
    decimals = len(mantissa.group(1) or "")
    exponent = int(mantissa.group(2) or 0)
    last_digit = 10.0 ** (exponent - decimals)
    scale = max(abs(a), abs(b))
    return abs(a - b) <= max(1e-4 * scale, min(last_digit * 1.000001, 2e-3 * scale))


def number_pattern(shown):
    """A capturing pattern for numbers printed in the same format as `shown`: the same count of
    fraction digits, an exponent where it has one (so that, next to a `...`, the pattern cannot
    land on a neighbouring column printed in another format)."""
    fraction = re.search(r"\.(\d+)", shown)
    pattern = r"-?\d+" + (r"\.\d{%d}" % len(fraction.group(1)) if fraction else "")
    if re.search(r"[eE]", shown):
        pattern += r"[eE][-+]?\d+"
    return r"(?<![\d.])(" + pattern + r")(?![\d])"


def wildcard_matcher(shown):
    """A predicate on normalised real lines, or None for a cut (a line that is just `...`).

    Text must match exactly; `...` matches anything; numbers are compared by numbers_agree."""
    shown = normalise(shown)
    if not shown or shown == "...":
        return None
    pieces = []
    for k, part in enumerate(shown.split("...")):
        if k:
            pieces.append(r"\s*.*?\s*")
        part = part.strip() if "..." in shown else part
        position = 0
        for number in NUMBER.finditer(part):
            if not re.search(r"[.eE]", number.group()):
                continue  # an integer: matched as text, exactly
            pieces.append(re.escape(part[position:number.start()]))
            pieces.append(number_pattern(number.group()))
            position = number.end()
        pieces.append(re.escape(part[position:]))
    pattern = re.compile("".join(pieces))
    shown_numbers = [n for n in NUMBER.findall(shown) if re.search(r"[.eE]", n)]

    def matches(real):
        found = pattern.fullmatch(real)
        return found is not None and all(numbers_agree(s, r) for s, r in zip(shown_numbers, found.groups()))

    return matches


def match_in_order(shown_lines, real_lines):
    """The first shown line that cannot be matched in order, or None."""
    position = 0
    for shown in shown_lines:
        matcher = wildcard_matcher(shown)
        if matcher is None:
            continue
        while position < len(real_lines) and not matcher(real_lines[position]):
            position += 1
        if position == len(real_lines):
            return shown
        position += 1
    return None


class Runner:
    def __init__(self, root, ringlab, viz):
        self.root, self.ringlab, self.viz = root, ringlab, viz
        self.bin = tempfile.mkdtemp(prefix="ringlab-book-bin-")
        os.symlink(ringlab, os.path.join(self.bin, "ringlab"))
        self.viz_ok = bool(viz) and os.path.exists(viz)
        if self.viz_ok:
            wrapper = os.path.join(self.bin, "ringlab-viz")
            headless = shutil.which("xvfb-run")
            with open(wrapper, "w") as f:
                f.write("#!/bin/sh\n")
                if headless:
                    f.write('[ -n "$DISPLAY" ] || exec %s -a %s "$@"\n' % (shlex.quote(headless), shlex.quote(viz)))
                f.write('exec %s "$@"\n' % shlex.quote(viz))
            os.chmod(wrapper, 0o755)
            self.viz_ok = headless is not None or bool(os.environ.get("DISPLAY"))
        self.env = dict(os.environ)
        self.env["PATH"] = self.bin + os.pathsep + self.env.get("PATH", "")

    def scratch(self):
        """A scratch folder that sees the repository's folders (not its build trees)."""
        folder = tempfile.mkdtemp(prefix="ringlab-book-")
        for entry in os.listdir(self.root):
            if entry.startswith(".") or entry.startswith("build"):
                continue
            os.symlink(os.path.join(self.root, entry), os.path.join(folder, entry))
        return folder

    def run(self, command, cwd):
        argv = shlex.split(command, comments=True)
        started = time.monotonic()
        try:
            done = subprocess.run(argv, cwd=cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, "", "timed out after %d s" % COMMAND_TIMEOUT_S, time.monotonic() - started
        return (done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"),
                time.monotonic() - started)


def known_names(ringlab):
    exercises = json.loads(subprocess.run([ringlab, "exercises", "--json"], stdout=subprocess.PIPE, check=True).stdout)
    if isinstance(exercises, dict):
        exercises = exercises.get("exercises", [])
    ids = {e["id"] for e in exercises}
    listing = subprocess.run([ringlab, "grade", "--list"], stdout=subprocess.PIPE, check=True).stdout.decode()
    labs = set(re.findall(r"^\s+(0[1-9]-[a-z-]+)\s", listing, re.M))
    return ids, labs


def file_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip() for line in f.read().split("\n")]


def check_snippet(root, path, body):
    full = os.path.join(root, path)
    if not os.path.isfile(full):
        return "snippet source %s does not exist" % path
    source = file_lines(full)
    chunks, current = [], []
    for line in body:
        if line.strip() == "// ...":
            if current:
                chunks.append(current)
            current = []
        else:
            current.append(line.rstrip())
    if current:
        chunks.append(current)
    position = 0
    for chunk in chunks:
        found = -1
        for start in range(position, len(source) - len(chunk) + 1):
            if source[start:start + len(chunk)] == chunk:
                found = start
                break
        if found < 0:
            return "snippet from %s is not in the file (first line: %r)" % (path, chunk[0])
        position = found + len(chunk)
    return None


def svg_equal(a, b):
    """Same text outside numbers, numbers equal within 1e-3 relative (and 0.02 absolute)."""
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return False
    for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)):
        fx, fy = float(x), float(y)
        if abs(fx - fy) > 0.02 + 1e-3 * max(abs(fx), abs(fy)):
            return False
    return True


def check_figures(root, pages, runner, findings, regenerate):
    figures_dir = os.path.join(root, "book", "figures")
    script = os.path.join(root, "scripts", "book-figures")
    listed = {}
    listing = subprocess.run(["bash", script, "--list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root)
    if listing.returncode != 0:
        findings.append("scripts/book-figures --list failed: " + listing.stderr.decode().strip())
    for line in listing.stdout.decode().splitlines():
        name, _, command = line.partition("\t")
        listed[name.strip()] = command.strip()
    shown = set()
    for page in pages:
        for number, line in enumerate(page.text.split("\n"), 1):
            for reference in FIGURE.findall(line):
                name = reference[len("figures/"):]
                shown.add(name)
                if not os.path.isfile(os.path.join(figures_dir, name)):
                    findings.append("%s:%d: figure %s does not exist (run scripts/book-figures)" % (page.name, number, reference))
                if name not in listed:
                    findings.append("%s:%d: figure %s has no command in scripts/book-figures" % (page.name, number, reference))
    present = set(os.listdir(figures_dir)) if os.path.isdir(figures_dir) else set()
    for name in sorted(present - shown):
        findings.append("book/figures/%s is not shown on any page (show it, or delete it and its line in "
                        "scripts/book-figures)" % name)
    for name in sorted(set(listed) - present):
        findings.append("scripts/book-figures lists %s but book/figures/ lacks it (run scripts/book-figures)" % name)
    if not regenerate:
        return 0
    fresh = tempfile.mkdtemp(prefix="ringlab-book-figures-")
    env = dict(runner.env)
    env["RINGLAB"] = runner.ringlab
    made = subprocess.run(["bash", script, "--out", fresh, "--only", "svg"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          cwd=root, env=env)
    if made.returncode != 0:
        findings.append("scripts/book-figures --only svg failed:\n" + made.stdout.decode())
        return 0
    compared = 0
    for name in sorted(n for n in listed if n.endswith(".svg")):
        old, new = os.path.join(figures_dir, name), os.path.join(fresh, name)
        if not (os.path.isfile(old) and os.path.isfile(new)):
            continue
        compared += 1
        with open(old, encoding="utf-8") as f1, open(new, encoding="utf-8") as f2:
            if not svg_equal(f1.read(), f2.read()):
                findings.append("book/figures/%s differs from what `%s` draws now: run scripts/book-figures "
                                "and commit the figures" % (name, listed[name]))
    shutil.rmtree(fresh, ignore_errors=True)
    return compared


def self_test():
    """The output matcher against lines a CPU may print and lines that are wrong."""
    cases = [  # (shown, real, should match)
        ("first at (0, 0, 0, 0): -0.3991791 vs 0.196637", "first at (0, 0, 0, 0): -0.3991792 vs 0.196637", True),
        ("first at (0, 0, 0, 0): -0.3991791 vs 0.196637", "first at (0, 0, 0, 0): -0.3981791 vs 0.196637", False),
        ("first at (0, 0, 0, 0): -0.3991791 vs 0.196637", "first at (0, 1, 0, 0): -0.3991791 vs 0.196637", False),
        ("dk (1, 96, 4, 64) 2.140e+00 1.435e+01 1e-04 ... FAIL", "dk (1, 96, 4, 64) 2.141e+00 1.435e+01 1e-04 >9999% FAIL", True),
        ("dk (1, 96, 4, 64) 2.140e+00 1.435e+01 1e-04 ... FAIL", "dk (1, 96, 4, 64) 2.150e+00 1.435e+01 1e-04 >9999% FAIL", False),
        ("out (1, 1024, 4, 64) ... 2e-05 1e-04 ... ok", "out (1, 1024, 4, 64) 9.625e-07 2.166e-06 2e-05 1e-04 2% ok", True),
        ("out (1, 1024, 4, 64) ... 2e-05 1e-04 ... ok", "out (1, 1024, 4, 64) 9.625e-07 2.166e-06 3e-05 1e-04 2% ok", False),
        ("rank 0 sends 1573 bytes", "rank 0 sends 1574 bytes", False),
    ]
    wrong = [(s, r) for s, r, expected in cases if bool(wildcard_matcher(s)(normalise(r))) != expected]
    for shown, real in wrong:
        print(f"self-test: the matcher got it wrong: shown {shown!r}, printed {real!r}")
    print(f"self-test: {len(cases) - len(wrong)} of {len(cases)} matcher cases right")
    return 1 if wrong else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--ringlab", required=True)
    parser.add_argument("--viz", default="")
    parser.add_argument("--page", action="append", default=[], help="only these pages (commands and names)")
    parser.add_argument("--no-figures", action="store_true", help="skip regenerating the SVG figures")
    parser.add_argument("--verbose", action="store_true", help="print every command with its time")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    book = os.path.join(root, "book")
    started = time.monotonic()

    names = sorted(n for n in os.listdir(book) if n.endswith(".md"))
    pages = []
    for name in names:
        with open(os.path.join(book, name), encoding="utf-8") as f:
            pages.append(Page(name, f.read()))
    selected = [p for p in pages if not args.page or p.name in args.page]

    findings = []
    exercise_ids, lab_ids = known_names(args.ringlab)
    for page in selected:
        for number, line in page.stray:
            findings.append("%s:%d: not run by this test (put ringlab commands in ```console blocks as `$ ...`): %s"
                            % (page.name, number, line))
        for number, line in page.orphans:
            findings.append("%s:%d: a console block shows output before any `$` command: %s" % (page.name, number, line))
        for number, path, body in page.snippets:
            problem = check_snippet(root, path, body)
            if problem:
                findings.append("%s:%d: %s" % (page.name, number, problem))
        for number, line in enumerate(page.text.split("\n"), 1):
            for ident in EXERCISE_REF.findall(line):
                if ident not in exercise_ids:
                    findings.append("%s:%d: exercise `%s` does not exist (ringlab exercises)" % (page.name, number, ident))
            for ident in LAB_REF.findall(line):
                if ident not in lab_ids:
                    findings.append("%s:%d: lab %s does not exist (ringlab grade --list)" % (page.name, number, ident))

    runner = Runner(root, os.path.abspath(args.ringlab), os.path.abspath(args.viz) if args.viz else "")
    ran = skipped = checked_lines = 0
    for page in selected:
        if not page.commands:
            continue
        cwd = runner.scratch()
        for c in page.commands:
            where = "%s:%d: $ %s" % (c.page, c.line, c.text)
            try:
                program = shlex.split(c.text, comments=True)[0]
            except (ValueError, IndexError) as error:
                findings.append("%s: cannot parse the command (%s)" % (where, error))
                continue
            if program not in ALLOWED_PROGRAMS:
                findings.append("%s: only %s run here" % (where, ", ".join(sorted(ALLOWED_PROGRAMS))))
                continue
            if program == "ringlab-viz" and not runner.viz_ok:
                skipped += 1
                continue
            status, out, err, seconds = runner.run(c.text, cwd)
            ran += 1
            if args.verbose:
                print("%6.2f s  exit %s  %s" % (seconds, status, where))
            if status != c.expected_exit:
                findings.append("%s\n    exit status %s, the book says %d\n%s" % (
                    where, status, c.expected_exit, indent_output(out, err)))
                continue
            shown = [line for line in c.output if line.strip()]
            checked_lines += sum(1 for line in shown if wildcard_matcher(line) is not None)
            out_lines = [normalise(line) for line in out.split("\n")]
            err_lines = [normalise(line) for line in err.split("\n")]
            missing = match_in_order(shown, out_lines + err_lines)
            if missing is not None and match_in_order(shown, err_lines + out_lines) is None:
                missing = None
            if missing is not None:
                findings.append("%s\n    the book shows a line the command does not print (in this order):\n"
                                "      %s\n%s" % (where, missing.strip(), indent_output(out, err)))
        shutil.rmtree(cwd, ignore_errors=True)

    compared = 0
    if not args.page:
        compared = check_figures(root, pages, runner, findings, not args.no_figures)
    shutil.rmtree(runner.bin, ignore_errors=True)

    elapsed = time.monotonic() - started
    print("book: %d pages, %d commands run%s, %d output lines checked, %d snippets, %d SVG figures compared, %.1f s"
          % (len(selected), ran, (" (%d ringlab-viz commands skipped: no viewer or no display)" % skipped) if skipped else "",
             checked_lines, sum(len(p.snippets) for p in selected), compared, elapsed))
    if findings:
        print("\n%d finding(s):" % len(findings))
        for f in findings:
            print("- " + f)
        return 1
    print("OK: the book matches the code")
    return 0


def indent_output(out, err, limit=40):
    lines = (out.rstrip("\n").split("\n") if out.strip() else []) + (err.rstrip("\n").split("\n") if err.strip() else [])
    if len(lines) > limit:
        lines = lines[:limit] + ["... (%d more lines)" % (len(lines) - limit)]
    return "\n".join("    | " + line for line in lines)


if __name__ == "__main__":
    sys.exit(main())
