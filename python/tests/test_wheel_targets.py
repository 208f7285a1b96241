"""What a wheel build compiles (docs/python.md, "What `pip install .` builds"): by default the two modules and the
libraries they link, not the `cgad` command, which the package never runs and whose own sources (apps/cgad,
simulate) are most of a cold build; CGAD_COMMAND=on adds the command to the build and to the wheel's scripts, and
another value stops the configure with one line.

Checked without compiling anything: the repository is configured as scikit-build-core configures it (SKBUILD, the
scripts directory, pyproject.toml's build type and [tool.scikit-build.cmake.define], Ninja), and Ninja lists the
compile commands of pyproject.toml's build.targets; the "python" install component's script says whether it
installs into the scripts directory. It needs the CMake build's tools and libraries, so it runs under CTest (which
sets CGAD_CMAKE) and is skipped elsewhere, e.g. against a pip install."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from conftest import SOURCE_DIR

CMAKE = os.environ.get("CGAD_CMAKE")
NINJA = shutil.which("ninja")
SKBUILD = tomllib.loads((SOURCE_DIR / "pyproject.toml").read_text())["tool"]["scikit-build"]


def _defines(command=None):
    """pyproject.toml's cmake.define as a pip build passes them with no variable set in the environment (each
    {env, default} its default), but CGAD_CUDA=off (the CUDA rule is test_wheel_cuda.py's) and CGAD_COMMAND if given."""
    values = {name: value["default"] if isinstance(value, dict) else value
              for name, value in SKBUILD["cmake"]["define"].items()}
    values.update(CGAD_CUDA="off", **({} if command is None else {"CGAD_COMMAND": command}))
    return [f"-D{name}={value}" for name, value in values.items()]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """A wheel build's configure, as pip's with no variable set; configure() configures it again."""
    if not CMAKE or not NINJA:
        pytest.skip("needs the CMake build's tools: CGAD_CMAKE (CTest sets it) and ninja")
    where = tmp_path_factory.mktemp("wheel-targets")
    run = subprocess.run([CMAKE, "-S", str(SOURCE_DIR), "-B", str(where / "build"), "-G", "Ninja", "-DSKBUILD=2",
                          f"-DSKBUILD_SCRIPTS_DIR={where / 'scripts'}", f"-DPython3_EXECUTABLE={sys.executable}",
                          f"-DCMAKE_BUILD_TYPE={SKBUILD['cmake']['build-type']}", *_defines()],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    return where


def configure(build, command=None):
    """Configures again with pyproject.toml's defines and CGAD_COMMAND=command if given; (returncode, output)."""
    run = subprocess.run([CMAKE, *_defines(command), str(build / "build")], capture_output=True, text=True)
    return run.returncode, run.stdout + run.stderr


def compiled(build):
    """The sources Ninja compiles for pyproject.toml's build.targets, relative to the checkout."""
    commands = subprocess.run([NINJA, "-C", str(build / "build"), "-t", "commands", *SKBUILD["build"]["targets"]],
                              capture_output=True, text=True, check=True).stdout
    return {pathlib.Path(s).resolve().relative_to(SOURCE_DIR.resolve()).as_posix()
            for s in re.findall(r" -c (\S+)", commands)}


def installs_a_script(build):
    """Whether the "python" component (what scikit-build-core packs) installs anything into the scripts directory."""
    return str(build / "scripts") in (build / "build" / "python" / "cmake_install.cmake").read_text()


def test_the_default_wheel_builds_the_modules_and_not_the_command(build):
    rc, out = configure(build)
    assert rc == 0, out
    sources = compiled(build)
    assert {"python/src/module.cpp", "python/src/numerics_module.cpp"} <= sources, sorted(sources)
    command = sorted(s for s in sources if s.startswith(("apps/", "simulate/")))
    assert command == [], f"a default wheel build compiles the command's sources {command}"
    assert not installs_a_script(build)


def test_cgad_command_on_adds_the_command_to_the_build_and_the_wheels_scripts(build):
    assert SKBUILD["cmake"]["define"]["CGAD_COMMAND"]["env"] == "CGAD_COMMAND"  # `CGAD_COMMAND=on pip install .`
    rc, out = configure(build, "ON")
    assert rc == 0, out
    sources = compiled(build)
    assert {"apps/cgad/main.cpp", "python/src/module.cpp", "python/src/numerics_module.cpp"} <= sources
    assert installs_a_script(build)


def test_another_cgad_command_stops_the_configure_with_one_line(build):
    rc, out = configure(build, "yes")
    assert rc != 0 and "cgad: CGAD_COMMAND must be on or off, not 'yes'" in out, out
