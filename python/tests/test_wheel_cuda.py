"""The CUDA module beside torch (docs/gpu.md, "Installing the Python package for a GPU"; cmake/CgadWheelCuda.cmake):
a wheel build compiles the CUDA backend only where CGAD_CUDA asks for it or the build's torch is a CUDA torch, and
then links the runtime torch loads, for torch's architectures, with an nvcc of torch's CUDA major; the module's own
links say what it was built with.

The rule is checked through the CMake functions a wheel build calls, in CMake's script mode, over fake torch
packages (a CPU one, a CUDA 13 one with the NVIDIA runtime wheel's layout, a broken one; none under `python -S`), so that
no multi-GB CUDA torch and no nvcc is needed; the links are read with readelf from the module this interpreter
imports: with no CUDA backend it needs no CUDA runtime at all, with one it needs the runtime torch loads."""
import importlib
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest
import torch

import cgad

from conftest import SOURCE_DIR, dynamic_links

CMAKE = os.environ.get("CGAD_CMAKE") or shutil.which("cmake")
READELF = shutil.which("readelf")


def fake_torch(site, cuda, archs=("sm_80", "sm_90", "compute_90"), runtime=True, body=""):
    """A torch package under site: its version, torch.version.cuda, torch.cuda.get_arch_list(), and with cuda set
    the NVIDIA runtime wheel's library (nvidia/cu<major>/lib/libcudart.so.<major>; only its path is looked at)."""
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(f"{body}\n__version__ = '2.99.0'\nfrom . import version, cuda\n")
    (site / "torch" / "version.py").write_text(f"cuda = {cuda!r}\n")
    (site / "torch" / "cuda.py").write_text(f"def get_arch_list():\n    return {list(archs)!r}\n")
    if cuda and runtime:
        major = cuda.split(".")[0]
        lib = site / "nvidia" / f"cu{major}" / "lib"
        lib.mkdir(parents=True)
        (lib / f"libcudart.so.{major}").write_bytes(b"")
    return site


def configure(site, mode, env=None, call=None, isolated=False):
    """Runs cgad_wheel_cuda(mode, <this interpreter>) with site first on the interpreter's path (a fake torch there
    shadows any real one), in CMake's script mode; isolated: `python -S`, no site directory, so no torch but site's.
    Returns (returncode, {variable: value}, output on one line)."""
    if CMAKE is None:
        pytest.skip("no cmake to run cmake/CgadWheelCuda.cmake with")
    names = ("CGAD_WHEEL_CUDA", "CGAD_WHEEL_CUDA_VERSION", "CGAD_WHEEL_CUDART", "CGAD_WHEEL_MODULE_RPATH",
             "CGAD_WHEEL_COMMAND_RPATH", "CGAD_WHEEL_CUDA_ARCHITECTURES")
    script = site.parent / "configure.cmake"
    script.write_text(f'include("{SOURCE_DIR}/cmake/CgadWheelCuda.cmake")\n' +
                      (call or f'cgad_wheel_cuda("{mode}" "{sys.executable}{";-S" if isolated else ""}")\n') +
                      "".join(f'message(STATUS "{n}=${{{n}}}")\n' for n in names))
    environment = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    environment.update(PYTHONPATH=str(site), **(env or {}))
    run = subprocess.run([CMAKE, "-P", str(script)], capture_output=True, text=True, env=environment)
    out = " ".join((run.stdout + run.stderr).split())  # CMake wraps an error's lines
    return run.returncode, dict(re.findall(r"-- (CGAD_WHEEL_\w+)=(\S*)", out)), out


def test_off_and_auto_without_a_cuda_torch_build_no_cuda(tmp_path):
    cpu = fake_torch(tmp_path / "cpu", None)
    for mode, site in (("off", cpu), ("auto", cpu), ("AUTO", cpu), ("auto", tmp_path / "none")):
        site.mkdir(exist_ok=True)
        rc, found, out = configure(site, mode, isolated=site.name == "none")
        assert rc == 0 and found["CGAD_WHEEL_CUDA"] == "OFF", (mode, out)
    # off asks nothing of torch: not even a torch that fails to import is looked at
    broken = fake_torch(tmp_path / "broken", "13.0", body="raise OSError('libcudart.so.13: cannot open')")
    rc, found, out = configure(broken, "off")
    assert rc == 0 and found["CGAD_WHEEL_CUDA"] == "OFF", out


def test_on_without_a_cuda_torch_is_refused(tmp_path):
    for site, seen in ((fake_torch(tmp_path / "cpu", None), "torch=2.99.0"), (tmp_path / "none", "torch=none")):
        site.mkdir(exist_ok=True)
        rc, found, out = configure(site, "on", isolated=site.name == "none")
        assert rc != 0 and "cgad: CGAD_CUDA=on needs a CUDA torch importable by" in out and seen in out, out


def test_a_cuda_torch_gives_its_runtime_and_architectures(tmp_path):
    site = fake_torch(tmp_path / "site", "13.0")
    runtime = (site / "nvidia" / "cu13" / "lib" / "libcudart.so.13").resolve()
    for mode in ("auto", "on"):
        rc, found, out = configure(site, mode)
        assert rc == 0 and found["CGAD_WHEEL_CUDA"] == "ON", out
        assert found["CGAD_WHEEL_CUDA_VERSION"] == "13.0" and found["CGAD_WHEEL_CUDART"] == str(runtime), out
        assert found["CGAD_WHEEL_CUDA_ARCHITECTURES"] == "80-real;90-real;90-virtual", out
        # $ORIGIN/<rpath> from where pip puts the module and the command reaches torch's runtime folder
        for where, rpath in ((pathlib.Path(sysconfig.get_path("platlib"), "cgad"), found["CGAD_WHEEL_MODULE_RPATH"]),
                             (pathlib.Path(sysconfig.get_path("scripts")), found["CGAD_WHEEL_COMMAND_RPATH"])):
            assert not os.path.isabs(rpath), rpath
            assert pathlib.Path(os.path.normpath(where / rpath)) == runtime.parent, (where, rpath)


def test_torch_cuda_arch_list_overrides_the_wheels_list(tmp_path):
    site = fake_torch(tmp_path / "site", "13.0")
    for spec, archs in (("8.0 9.0+PTX", "80-real;90-real;90-virtual"), ("9.0;10.0a", "90-real;100a-real")):
        rc, found, out = configure(site, "auto", env={"TORCH_CUDA_ARCH_LIST": spec})
        assert rc == 0 and found["CGAD_WHEEL_CUDA_ARCHITECTURES"] == archs, (spec, out)
    rc, found, out = configure(site, "auto", env={"TORCH_CUDA_ARCH_LIST": "Hopper"})
    assert rc != 0 and "not a CUDA architecture: 'Hopper'" in out, out


def test_a_cuda_torch_without_its_runtime_or_that_fails_to_import_is_refused(tmp_path):
    rc, _, out = configure(fake_torch(tmp_path / "bare", "12.8", runtime=False), "auto")
    assert rc != 0 and "torch is built with CUDA 12 but no libcudart.so.12" in out, out
    broken = fake_torch(tmp_path / "broken", "13.0", body="raise OSError('libcudart.so.13: cannot open')")
    rc, _, out = configure(broken, "auto")
    assert rc != 0 and "torch cannot be imported: OSError: libcudart.so.13: cannot open" in out, out


def test_a_mode_other_than_auto_on_off_is_refused(tmp_path):
    rc, _, out = configure(fake_torch(tmp_path / "cpu", None), "yes")
    assert rc != 0 and "cgad: CGAD_CUDA must be auto, on or off, not 'yes'" in out, out


def test_nvcc_must_have_torchs_cuda_major(tmp_path):
    (tmp_path / "site").mkdir()
    rc, _, out = configure(tmp_path / "site", None, call='cgad_wheel_check_nvcc(nvcc "13.0.88" "13.0")\n')
    assert rc == 0, out
    rc, _, out = configure(tmp_path / "site", None, call='cgad_wheel_check_nvcc(nvcc "13.0.88" "12.8")\n')
    assert rc != 0 and "cgad: torch is built with CUDA 12.8 but nvcc is CUDA 13.0.88" in out, out


def pip_installer():
    """Who installed the imported cgad, by its dist-info's INSTALLER: "pip" for a wheel, "cmake" for a CMake build
    (python/dist_info.cmake), None where there is no dist-info (a source tree on PYTHONPATH)."""
    try:
        dist = importlib.metadata.distribution("cgad")
    except importlib.metadata.PackageNotFoundError:
        return None
    if pathlib.Path(dist.locate_file("cgad")).resolve() != pathlib.Path(cgad.__file__).resolve().parent:
        return None  # another install's dist-info (the package imported from a source tree on PYTHONPATH)
    return (dist.read_text("INSTALLER") or "").strip()


def test_the_modules_links_match_what_it_was_built_with():
    """The imported `_cgad`: no libtorch and no libpython ever (torch's tensors reach it as integers); a CUDA runtime
    only with a CUDA backend. Installed by pip (a wheel: CGAD_CUDA's rule), beside a CPU torch it has none; beside a
    CUDA torch, none or the runtime of torch's CUDA major, through a RUNPATH relative to the module that reaches the
    very file torch mapped. (A CMake build's module links the machine toolkit's runtime, whatever torch is.)"""
    if READELF is None:
        pytest.skip("no readelf to read the module's links with")
    module = pathlib.Path(importlib.import_module("cgad._cgad").__file__)
    needed, runpath = dynamic_links(module)
    assert not [n for n in needed if re.match(r"lib(torch|c10|python)", n)], needed
    runtimes = [n for n in needed if n.startswith("libcudart")]
    has_backend = "has no CUDA backend" not in cgad.cuda_unavailable_reason()
    assert len(runtimes) == has_backend, (needed, cgad.cuda_unavailable_reason())
    if pip_installer() != "pip":
        return
    if not torch.version.cuda:
        assert runtimes == [], f"{module}, pip-installed beside torch {torch.__version__} (no CUDA), needs {runtimes}"
    elif runtimes:
        assert runtimes == [f"libcudart.so.{torch.version.cuda.split('.')[0]}"], runtimes
        assert runpath and runpath[0].startswith("$ORIGIN/"), runpath
        found = pathlib.Path(runpath[0].replace("$ORIGIN", str(module.parent)), runtimes[0]).resolve()
        maps = pathlib.Path("/proc/self/maps").read_text()
        assert str(found) in maps, f"{found} is not the runtime torch loaded"
