"""setuptools drives the CMake build of the compiled module ringlab._core (see pyproject.toml).

The pure-Python files come from python/ringlab. The module is built by this checkout's CMake project,
target ringlab_python only, in build-pip/ (or in the existing build tree named by
RINGLAB_CMAKE_BUILD_DIR), with portable code (RINGLAB_NATIVE=OFF: the machine that runs it may not be
the one that built it). RINGLAB_PURE_PYTHON=1 skips it: the conformance harness needs only NumPy and
PyTorch.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithCMake(build_py):
    def run(self):
        super().run()
        if os.environ.get("RINGLAB_PURE_PYTHON") == "1":
            print("ringlab: RINGLAB_PURE_PYTHON=1: installing without the compiled module ringlab._core")
            return
        module = self._cmake_module()
        shutil.copy2(module, os.path.join(self.build_lib, "ringlab", os.path.basename(module)))

    def _cmake_module(self):
        build_dir = os.environ.get("RINGLAB_CMAKE_BUILD_DIR") or os.path.join(ROOT, "build-pip")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        try:
            if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
                generator = ["-G", "Ninja"] if shutil.which("ninja") else []
                subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, *generator,
                                       "-DCMAKE_BUILD_TYPE=Release", "-DRINGLAB_PYTHON=ON", "-DRINGLAB_TESTS=OFF",
                                       "-DRINGLAB_BENCH=OFF", "-DRINGLAB_VIEWER=OFF", "-DRINGLAB_CUDA=OFF",
                                       "-DRINGLAB_NATIVE=OFF", f"-DPython_EXECUTABLE={sys.executable}"])
            subprocess.check_call(["cmake", "--build", build_dir, "--target", "ringlab_python", "-j", jobs])
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"ringlab: the CMake build of ringlab._core failed ({e}); install the build dependencies "
                     "(scripts/setup), or set RINGLAB_PURE_PYTHON=1 to install the harness without it")
        found = glob.glob(os.path.join(build_dir, "python", "ringlab", "_core*.so"))
        if not found:
            sys.exit(f"ringlab: no _core*.so in {build_dir}/python/ringlab after the CMake build")
        return found[0]


class BinaryDistribution(Distribution):
    """The wheel holds a compiled module: tag it for this platform and Python."""

    def has_ext_modules(self):
        return os.environ.get("RINGLAB_PURE_PYTHON") != "1"


setup(cmdclass={"build_py": BuildPyWithCMake}, distclass=BinaryDistribution,
      options={"build": {"build_base": os.path.join("build-pip", "setuptools")}})
