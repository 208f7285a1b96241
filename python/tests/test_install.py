"""`cmake --install` puts an importable package under the prefix: the "python" component of this build, installed
into a fresh prefix, imports from there alone (not from the build tree), steps an optimizer, and importlib.metadata
finds its dist-info there with the module's version. It is about a CMake build tree, so it runs under CTest (which
sets the variables below) and is skipped elsewhere, e.g. against a pip install."""
import os
import pathlib
import subprocess
import sys

import pytest


def test_installed_package_imports_from_the_prefix(tmp_path):
    build, site = os.environ.get("CGAD_BUILD_DIR"), os.environ.get("CGAD_PYTHON_INSTALL_DIR")
    cmake = os.environ.get("CGAD_CMAKE", "cmake")
    if not build or not site:
        pytest.skip("needs a CMake build tree: CGAD_BUILD_DIR and CGAD_PYTHON_INSTALL_DIR (CTest sets them)")
    prefix = tmp_path / "prefix"
    run = subprocess.run([cmake, "--install", build, "--prefix", str(prefix), "--component", "python"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    package = prefix / site / "cgad"
    for name in ("__init__.py", "numerics.py", "torch/__init__.py", "torch/_optimizers.py"):
        assert (package / name).is_file(), name
    assert list(package.glob("_cgad*.so"))
    code = ("import cgad, cgad.torch, torch, importlib.metadata as m; print(cgad.__file__); "
            "p = torch.nn.Parameter(torch.zeros(3)); o = cgad.torch.CGAD([p]); p.grad = torch.ones(3); "
            "print(o.step().applied); d = m.distribution('cgad'); print(d.locate_file('cgad')); "
            "print(d.version == cgad.__version__); print(sorted(d.requires))")
    env = dict(os.environ, PYTHONPATH=str(prefix / site))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    where, applied, info_at, same_version, requires = run.stdout.splitlines()
    assert pathlib.Path(where).resolve().is_relative_to(prefix.resolve()) and applied == "True"
    assert pathlib.Path(info_at).resolve() == (package).resolve(), info_at
    assert same_version == "True" and requires == "['numpy', 'pytest ; extra == \"test\"', 'torch']", run.stdout
