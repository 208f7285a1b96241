"""setuptools' half of the package build (pyproject.toml declares the rest): the compiled module `cgad._cgad` and
the `cgad` command come from the repository's own CMake build, configured Release without tests or benchmarks,
building only those two targets (and the libraries they link).

The wheel ships the `cgad` command into the environment's bin/ (the scripts directory): the Python API and the
command are one tool (docs/commands.md, docs/python.md), and the package's tests replay through the command.

The CMake build lives in build-pip/ beside this file, one level below the source like scripts/build.sh's build/,
so a compiler launcher such as ccache (CMAKE_CXX_COMPILER_LAUNCHER, read by CMake) with a base directory sees
the same relative paths and serves both builds the same objects; a second `pip install` rebuilds incrementally.
CMAKE_ARGS adds configure arguments (e.g. -DCGAD_ENABLE_CUDA=OFF), CMAKE_BUILD_PARALLEL_LEVEL sets the build's
jobs (default: every core), CMAKE_GENERATOR the generator. Without CMAKE_GENERATOR the build is Ninja's where
ninja is installed (scripts/bootstrap.sh installs it), as scripts/build.sh's is: a compiler launcher's cache only
serves both builds when their compile commands run from the same directory, which the generator decides (Make runs
each from the target's folder, Ninja from the build's top); a build-pip/ configured by another generator keeps it,
since CMake refuses to switch a folder's generator.
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from distutils.command.build_scripts import build_scripts

CMAKE_BUILD_DIR = "build-pip"  # relative to this file, the form setuptools wants for scripts
COMMAND = os.path.join(CMAKE_BUILD_DIR, "apps", "cgad", "cgad")


def generator(build):
    """["-G", "Ninja"] where neither CMAKE_GENERATOR nor an existing build folder chose another and ninja exists."""
    if os.environ.get("CMAKE_GENERATOR") or not shutil.which("ninja"):
        return []
    cache = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache):
        with open(cache) as f:
            used = [line.split("=", 1)[1].strip() for line in f if line.startswith("CMAKE_GENERATOR:INTERNAL=")]
        if used and used[0] != "Ninja":
            return []
    return ["-G", "Ninja"]


class CMakeBuild(build_ext):
    """Configures and builds the two targets, then copies the module to where the wheel takes it from."""

    def run(self):
        source = os.path.dirname(os.path.abspath(__file__))
        build = os.path.join(source, CMAKE_BUILD_DIR)
        configure = ["cmake", "-S", source, "-B", build, *generator(build), "-DCMAKE_BUILD_TYPE=Release",
                     "-DCGAD_BUILD_TESTS=OFF",
                     "-DCGAD_BUILD_BENCH=OFF", "-DCGAD_BUILD_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}",
                     *shlex.split(os.environ.get("CMAKE_ARGS", ""))]
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "cgad_python", "cgad"], check=True)
        for ext in self.extensions:  # cgad._cgad and cgad._numerics, both built by the target cgad_python
            name = ext.name.split(".")[-1]
            modules = glob.glob(os.path.join(build, "python", "cgad", f"{name}*.so"))
            if len(modules) != 1:
                raise RuntimeError(f"expected one compiled module {name} in {build}/python/cgad, found {modules}")
            self.copy_file(modules[0], self.get_ext_fullpath(ext.name))


class CopyCommand(build_scripts):
    """The `cgad` command is an ELF executable, copied as it is: distutils would read it as text to rewrite a
    `#!` line."""

    def copy_scripts(self):
        self.mkpath(self.build_dir)
        outfiles = [os.path.join(self.build_dir, os.path.basename(s)) for s in self.scripts]
        for script, out in zip(self.scripts, outfiles):
            self.copy_file(script, out)  # keeps the executable bit
        return outfiles, outfiles


setup(
    ext_modules=[Extension("cgad._cgad", sources=[]), Extension("cgad._numerics", sources=[])],
    scripts=[COMMAND],
    cmdclass={"build_ext": CMakeBuild, "build_scripts": CopyCommand},
    options={"build": {"build_base": os.path.join(CMAKE_BUILD_DIR, "setuptools")}},
)
