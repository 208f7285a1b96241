"""What the cgad Python tests share: the `cgad` command, its replay, and exact comparisons of bit patterns and
decimal text. They run against whichever `cgad` package the interpreter imports: CTest's (PYTHONPATH=build/python)
or an installed one (`python -m pytest python/tests` from a venv that pip installed cgad into)."""
import importlib
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
from fractions import Fraction

import numpy as np
import pytest
import torch

SOURCE_DIR = pathlib.Path(os.environ.get("CGAD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))



def load_example(name):
    """examples/<name>.py imported as the module ``name``, with examples/ on sys.path (the examples import their
    shared modules, example_args.py)."""
    path = SOURCE_DIR / "examples" / f"{name}.py"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

SCRIPTS_DIR = pathlib.Path(sysconfig.get_path("scripts"))

# The pinned PyPI environment (scripts/python-env.sh) sets CGAD_REQUIRE_PEERS=1: there a peer that cannot be
# imported is a broken environment, and its tests fail; anywhere else (Debian's torch 1.13) they skip, saying why.
REQUIRE_PEERS = os.environ.get("CGAD_REQUIRE_PEERS") == "1"


def _unavailable(reason):
    if REQUIRE_PEERS:
        pytest.fail(f"{reason} (CGAD_REQUIRE_PEERS=1: the pinned environment must have it)")
    pytest.skip(reason)


def peer(module):
    """Imports a real package cgad is tested against (bitsandbytes, torchao, torchft, ...) and returns it, or
    skips (fails in the pinned environment) with the import error as the reason."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # a peer's import can fail with more than ImportError (a missing symbol, an old torch)
        _unavailable(f"{module} cannot be imported here: {type(e).__name__}: {e}")


def torch_version():
    """torch's release as a (major, minor) pair, local labels and pre-release tags dropped."""
    major, minor = re.match(r"(\d+)\.(\d+)", torch.__version__).groups()
    return int(major), int(minor)


def require_torch(least, what):
    """Skips (fails in the pinned environment) a test of a torch feature that torch older than ``least`` lacks."""
    if torch_version() < least:
        _unavailable(f"{what} needs torch >= {least[0]}.{least[1]}; this is torch {torch.__version__}")


def _find_binary():
    """The `cgad` command: CGAD_BINARY (CTest sets it to the built one), else the one installed beside this
    interpreter's scripts (where pip puts a wheel's built with CGAD_COMMAND=on, also when the venv is not
    activated), else PATH's."""
    if os.environ.get("CGAD_BINARY"):
        return os.environ["CGAD_BINARY"]
    beside = SCRIPTS_DIR / "cgad"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("cgad")


def cgad_binary():
    """The command a test compares with or replays through; a test needing it skips where there is none (a default
    pip install has none: docs/python.md, "What `pip install .` builds")."""
    path = _find_binary()
    if not path:
        pytest.skip(f"no `cgad` command: set CGAD_BINARY, or install the package with it (`CGAD_COMMAND=on pip "
                    f"install .` puts one in {SCRIPTS_DIR})")
    return path


def dynamic_links(path):
    """A shared object's NEEDED entries and its RUNPATH (or RPATH) as readelf -d prints them: (names, paths)."""
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", out)
    return needed, re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[(.*)\]", out)


def pytest_report_header(config):
    """Which package and command the run tests: the build tree's, or an install's."""
    try:
        import cgad
    except ImportError as e:
        return f"cgad is not importable ({e}); cgad command: {_find_binary()}"
    return f"cgad {cgad.__version__} from {pathlib.Path(cgad.__file__).parent}; cgad command: {_find_binary()}"


def replay(tmp_path, header, events, *options):
    """Runs `cgad replay --backend fastpath` over the stream (header dict, event dicts) and returns its records."""
    stream = tmp_path / "stream.jsonl"
    with open(stream, "w") as f:
        f.write(json.dumps(header) + "\n")
        for e in events:
            f.write(json.dumps(e) + "\n")
    out = tmp_path / "replay.jsonl"
    run = subprocess.run([cgad_binary(), "replay", "--backend", "fastpath", "--input", str(stream), "--output",
                          str(out), *options], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def decimal(x):
    """A float32/bfloat16 value as decimal text the replay reads back to exactly that value (a Python float's
    repr is within half a double ulp of the value, which every float32 and bfloat16 is exactly)."""
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def bits(t):
    """The bit patterns of a float32 or bfloat16 tensor, as integers."""
    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int16).numpy().copy()


def state_bits(opt):
    """Every bit of a cgad.torch optimizer's state, comparable with ==: its state_dict's per-parameter tensors'
    bytes (by parameter index and name) and each param group's counters."""
    sd = opt.state_dict()
    tensors = []
    for index in sorted(sd["state"]):
        for name, t in sorted(sd["state"][index].items()):
            t = t.detach().contiguous().reshape(-1)
            raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
            tensors.append((index, name, str(t.dtype), raw.numpy().tobytes()))
    # The counts of steps by outcome (opt.counters, saved as "counts") are left out: a refused step counts itself
    # and changes nothing else.
    counters = [g.get("cgad_counters") for g in sd["param_groups"]]
    return tensors, [repr({k: v for k, v in c.items() if k != "counts"} if isinstance(c, dict) else c)
                     for c in counters]


def _neighbours(value, dtype):
    """value's predecessor and successor in dtype (float32 or bfloat16), as exact Fractions (None past the ends)."""
    t = torch.tensor([value], dtype=dtype)
    as_int = torch.int32 if dtype == torch.float32 else torch.int16
    raw = int(t.view(as_int)[0])
    out = []
    for step in (-1, 1):
        # For a non-negative value the next larger float has the next larger bit pattern; negative ones mirror.
        n = raw + (step if raw >= 0 else -step)
        if value == 0:
            n = 1 if step > 0 else (-(2 ** 31) + 1 if dtype == torch.float32 else -(2 ** 15) + 1)
        try:
            neighbour = torch.tensor([n], dtype=as_int).view(dtype)[0].item()
        except RuntimeError:
            neighbour = None
        out.append(None if neighbour is None or not np.isfinite(neighbour) else Fraction(neighbour))
    return out


def denotes(text, value, dtype):
    """Whether the decimal ``text`` (the replay's shortest round-trip decimal) rounds to exactly ``value`` in
    ``dtype``: it lies inside value's rounding interval (ties to even), with the same sign for zeros. Decided in
    exact rational arithmetic."""
    if text in ("nan", "inf", "-inf"):
        return (np.isnan(value) and text == "nan") or (np.isinf(value) and float(text) == value)
    if not np.isfinite(value):
        return False
    if value == 0 and (text.startswith("-") != (np.copysign(1.0, value) < 0)):
        return False
    d, x = Fraction(text), Fraction(value)
    low, high = _neighbours(value, dtype)
    as_int = torch.int32 if dtype == torch.float32 else torch.int16
    even = int(torch.tensor([value], dtype=dtype).view(as_int)[0]) % 2 == 0
    lo_mid = (low + x) / 2 if low is not None else None
    hi_mid = (x + high) / 2 if high is not None else None
    above = lo_mid is None or d > lo_mid or (d == lo_mid and even)
    below = hi_mid is None or d < hi_mid or (d == hi_mid and even)
    return above and below


def assert_denotes(texts, values, dtype, what):
    values = values.detach().reshape(-1).to(torch.float64 if dtype == torch.float32 else torch.float32).tolist() \
        if isinstance(values, torch.Tensor) else list(values)
    assert len(texts) == len(values), what
    for i, (t, v) in enumerate(zip(texts, values)):
        assert denotes(t, v, dtype), f"{what}[{i}]: replay has {t}, cgad.torch {v!r}"
