#!/usr/bin/env python3
"""`pip install .` into a fresh virtual environment, offline, then the harness with no source-tree path.

    test_install.py SOURCE_DIR BUILD_DIR CASES

The venv sees the system's packages (--system-site-packages: NumPy, PyTorch, setuptools); pip runs
with --no-build-isolation --no-index, as on a machine without a registry. setup.py drives the CMake
build of ringlab._core in BUILD_DIR (RINGLAB_CMAKE_BUILD_DIR: the tree ctest runs from, so the build
step finds it up to date). Then, from an empty folder and without PYTHONPATH: the compiled module
imports from the venv, and `python -m ringlab.conformance run` passes a case. Negative control: the
same venv without the install cannot import ringlab.
"""
import os
import subprocess
import sys
import tempfile
import time

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def main():
    source, build, cases = (os.path.abspath(a) for a in sys.argv[1:4])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        empty = os.path.join(tmp, "elsewhere")
        os.mkdir(empty)
        probe = subprocess.run([py, "-c", "import ringlab"], cwd=empty, env=env, capture_output=True, text=True)
        check(probe.returncode != 0, "control: before the install, the venv cannot import ringlab")

        t0 = time.monotonic()
        pip = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--quiet", source],
                             cwd=empty, env=dict(env, RINGLAB_CMAKE_BUILD_DIR=build), capture_output=True, text=True)
        check(pip.returncode == 0, f"pip install --no-build-isolation --no-index . ({time.monotonic() - t0:.1f} s)")
        if pip.returncode != 0:
            print(pip.stdout[-3000:], pip.stderr[-3000:])
            return 1
        where = subprocess.run([py, "-c", "import ringlab, ringlab._core as c, numpy as np; "
                                "o, l = ringlab.attention(np.ones((1, 4, 1, 2)), np.ones((1, 4, 1, 2)), "
                                "np.ones((1, 4, 1, 2)), causal=True); print(ringlab.__file__); print(c.__file__)"],
                               cwd=empty, env=env, capture_output=True, text=True)
        files = where.stdout.split()
        check(where.returncode == 0 and len(files) == 2 and all(f.startswith(venv) for f in files),
              f"ringlab and ringlab._core import from the venv ({' '.join(files) or where.stderr.strip()[-200:]})")
        one = sorted(os.listdir(cases))
        pick = next(n for n in one if os.path.exists(os.path.join(cases, n, "case.json")))
        run = subprocess.run([py, "-m", "ringlab.conformance", "run", "--impl",
                              "ringlab.conformance.reference:attention", os.path.join(cases, pick)],
                             cwd=empty, env=env, capture_output=True, text=True)
        check(run.returncode == 0 and "1 of 1 case runs within tolerance" in run.stdout,
              f"python -m ringlab.conformance run passes case {pick} from the venv")
        if run.returncode != 0:
            print(run.stdout[-2000:], run.stderr[-2000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
