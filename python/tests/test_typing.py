"""cgad's type hints, checked by a type checker (mypy, pinned in python/requirements/typecheck.txt; docs/python.md,
"Type checking") the way a user's checker reads them: the public modules, a typed user program
(typecheck/user_program.py) and the torchft quickstart of README.md and docs/python.md must type-check under
typecheck/mypy.ini, and every call in typecheck/wrong_calls.py -- each refused at run time -- must be reported
with the error code its line names, so a hint that is missing or too loose fails here. mypy runs once, over a copy
of the imported package's Python files and stubs, with its cache in a temporary folder. The user program and the
quickstart also run, so that the hints are what the code does. mypy is in the pinned environment only (Debian 12's
python has none): there its tests skip."""
import ast
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import cgad
from conftest import SOURCE_DIR, peer

HERE = pathlib.Path(__file__).resolve().parent / "typecheck"
# The package's modules that define or re-export its public names (the others are read for their types only:
# typecheck/mypy.ini).
PUBLIC = ("__init__.py", "_arguments.py", "numerics.py", "differential.py", "bench.py", "torch/__init__.py",
          "torch/_optimizers.py", "torch/_gated.py", "torch/_report.py", "torch/_torchft.py", "torch/_types.py",
          "torch/_staleness.py", "torch/_protocol.py", "torch/parameter_server.py")
QUICKSTART = re.compile(r"<!-- quickstart: torchft -->\n```python\n(.*?)```\n<!-- /quickstart -->", re.S)
ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$", re.M)


def quickstart(document):
    """The torchft quickstart's code in ``document`` (between its markers, exactly once)."""
    found = QUICKSTART.findall((SOURCE_DIR / document).read_text())
    assert len(found) == 1, f"{document}: {len(found)} torchft quickstarts between the markers"
    return found[0]


def expected_errors():
    """{line: error code} of wrong_calls.py's ``# error: CODE`` comments."""
    lines = (HERE / "wrong_calls.py").read_text().splitlines()
    return {n: line.split("# error: ")[1].strip() for n, line in enumerate(lines, 1) if "# error: " in line}


@pytest.fixture(scope="module")
def mypy(tmp_path_factory):
    """mypy's errors, {(file, line): code}, over the public modules, the user program, the wrong calls and the
    quickstart; and its output."""
    peer("mypy")
    work = tmp_path_factory.mktemp("typing")
    shutil.copytree(pathlib.Path(cgad.__file__).parent, work / "cgad",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for name in ("user_program.py", "wrong_calls.py"):
        shutil.copy(HERE / name, work / name)
    (work / "quickstart.py").write_text(quickstart("README.md"))
    files = [f"cgad/{m}" for m in PUBLIC] + ["user_program.py", "wrong_calls.py", "quickstart.py"]
    run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(HERE / "mypy.ini"), "--cache-dir",
                          str(work / "mypy-cache"), "--no-error-summary", *files], cwd=work, capture_output=True,
                         text=True, timeout=600, env=dict(os.environ, MYPYPATH=str(work)))
    errors = {(m["file"], int(m["line"])): m["code"] for m in ERROR.finditer(run.stdout)}
    assert run.returncode in (0, 1) and not run.stderr.strip(), run.stdout + run.stderr  # 2: mypy itself failed
    return errors, run.stdout


def test_the_public_api_the_user_program_and_the_quickstart_type_check(mypy):
    errors, output = mypy
    assert not [where for where in errors if where[0] != "wrong_calls.py"], output


def test_every_wrong_call_is_reported(mypy):
    errors, output = mypy
    assert {line: code for (name, line), code in errors.items() if name == "wrong_calls.py"} == expected_errors(), \
        output


def test_the_user_program_runs():
    spec = importlib.util.spec_from_file_location("user_program", HERE / "user_program.py")
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    program.fragments_and_wrappers()
    assert program.cgad_outer_loop()["applied"] == 5  # four steps on given Δ, one on a formed Δ


def test_readme_and_python_md_hold_the_same_quickstart():
    assert quickstart("README.md") == quickstart("docs/python.md")


def test_the_quickstart_runs(tmp_path):
    """The quickstart as a user runs it (its own process, gloo on the loopback): 16 inner steps, one outer step
    every 4, all applied."""
    peer("torchft")
    (tmp_path / "quickstart.py").write_text(quickstart("README.md"))
    run = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, GLOO_SOCKET_IFNAME="lo", RUST_LOG="warn"))
    assert run.returncode == 0, run.stdout + run.stderr
    metrics = ast.literal_eval(run.stdout.strip().splitlines()[-1])
    assert metrics["steps"] == metrics["applied"] == 4, metrics
