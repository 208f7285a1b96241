"""The imported `cgad` is a package as pip and importlib see it: its dist-info's version is the module's
__version__ (both from VERSION), its requirements are pyproject.toml's, and it ships its type information (py.typed
and the compiled module's stub). Runs against whichever cgad the interpreter imports: CTest's build tree or an
installed one."""
import importlib.metadata
import pathlib
import tomllib

import cgad
from conftest import SOURCE_DIR


def _requirement_names(requirements):
    return sorted(r.split(";")[0].strip() for r in requirements if "extra ==" not in r)


def test_dist_info_version_is_the_module_version_and_the_version_file():
    assert importlib.metadata.version("cgad") == cgad.__version__
    assert cgad.__version__ == (SOURCE_DIR / "VERSION").read_text().strip()


def test_dist_info_lies_beside_the_imported_package():
    files = importlib.metadata.distribution("cgad")
    found = pathlib.Path(files.locate_file("cgad")).resolve()
    assert found == pathlib.Path(cgad.__file__).resolve().parent


def test_dist_info_requires_what_pyproject_declares():
    declared = tomllib.loads((SOURCE_DIR / "pyproject.toml").read_text())["project"]["dependencies"]
    assert _requirement_names(importlib.metadata.requires("cgad")) == sorted(declared) == ["numpy", "torch"]


def test_type_information_ships_with_the_package():
    package = pathlib.Path(cgad.__file__).parent
    assert (package / "py.typed").is_file()
    assert (package / "_cgad.pyi").is_file()


def _pins(path):
    """name -> version of every `name==version` line of a requirements file."""
    pins = {}
    for line in path.read_text().splitlines():
        requirement = line.split("#")[0].strip()
        if requirement:
            name, version = requirement.split("==")
            pins[name.lower()] = version
    return pins


def test_the_build_backend_is_pinned_alike_for_isolated_and_non_isolated_builds():
    # pip's isolated build installs [build-system] requires; `--no-build-isolation` builds with what
    # python/requirements/build.txt installed (.ci/pip-install, scripts/python-env.sh): the same releases.
    system = tomllib.loads((SOURCE_DIR / "pyproject.toml").read_text())["build-system"]
    assert system["build-backend"] == "scikit_build_core.build"
    declared = dict(r.lower().split("==") for r in system["requires"])
    requirements = SOURCE_DIR / "python" / "requirements"
    assert declared == _pins(requirements / "build.txt")
    assert "scikit-build-core" in declared
    # The pinned PyPI environment installs both files, and .ci/pip-install's auditwheel venv takes the same
    # packaging: a package two files name must be the same release.
    for other in ("peers.txt", "audit.txt", "typecheck.txt"):
        pins = _pins(requirements / other)
        assert {n: v for n, v in pins.items() if n in declared} == {n: v for n, v in declared.items() if n in pins}


def test_the_type_checker_takes_the_pinned_environments_releases():
    # scripts/python-env.sh installs peers.txt and typecheck.txt into one venv: a package both name (mypy's
    # typing_extensions) must be the same release, or pip would install one file's and the other's check fail.
    requirements = SOURCE_DIR / "python" / "requirements"
    peers, typecheck = _pins(requirements / "peers.txt"), _pins(requirements / "typecheck.txt")
    assert "mypy" in typecheck
    assert {n: v for n, v in typecheck.items() if n in peers} == {n: v for n, v in peers.items() if n in typecheck}
