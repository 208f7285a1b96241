"""A trainer's ``import cgad.torch`` maps no MPFR, GMP or MPFI: the fast path's module cgad._cgad links core, io and
the fast path only, and the numerics' module cgad._numerics (reference, theory, differential, bench) is loaded the
first time the numerics are used (docs/design.md §7, "The two modules"). Each check runs in a fresh interpreter,
since a shared library once mapped stays mapped. Debian's torch 1.13 maps libgmp itself, so what is checked is what
cgad adds to the process after ``import torch``."""
import os
import shutil
import subprocess
import sys

import pytest

import cgad

from conftest import dynamic_links

ARBITRARY_PRECISION = ("libmpfr", "libgmp", "libmpfi")

# Prints the arbitrary-precision libraries mapped after `import torch` and after cgad.torch has made and stepped an
# optimizer, as two lines of comma-separated names; with argument "numerics", a third after `import cgad.numerics`.
SCRIPT = r"""
import os, sys
def mapped():
    with open("/proc/self/maps") as f:
        names = {os.path.basename(line.split()[5]) for line in f if len(line.split()) >= 6}
    return ",".join(sorted(n for n in names if n.startswith(("libmpfr", "libgmp", "libmpfi"))))
import torch
print(mapped())
import cgad, cgad.torch
p = torch.nn.Parameter(torch.ones(8))
opt = cgad.torch.CGAD([p], lr=1e-3)
p.grad = torch.full((8,), 0.5)
assert opt.step(staleness=1).applied and not torch.equal(p.detach(), torch.ones(8))
assert isinstance(cgad.InputError("x"), ValueError)
print(mapped())
if sys.argv[1:] == ["numerics"]:
    import cgad.numerics
    print(mapped())
"""


def _run(*args):
    out = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    return [set(filter(None, line.split(","))) for line in out.stdout.splitlines()]


def test_import_cgad_torch_and_a_step_map_no_arbitrary_precision_library():
    torch_only, trained = _run()
    assert trained - torch_only == set(), "cgad.torch mapped " + ", ".join(sorted(trained - torch_only))
    assert not any(n.startswith(("libmpfr", "libmpfi")) for n in trained)


def test_the_numerics_map_them_when_imported():
    # The check above can fail: the numerics' module does map MPFR and MPFI (and GMP, under them).
    torch_only, trained, numerics = _run("numerics")
    added = numerics - torch_only
    assert any(n.startswith("libmpfr") for n in added) and any(n.startswith("libmpfi") for n in added), numerics


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_the_fast_path_module_needs_no_arbitrary_precision_library_and_the_numerics_module_does():
    from cgad import _cgad, _numerics
    light, numerics = dynamic_links(_cgad.__file__)[0], dynamic_links(_numerics.__file__)[0]
    assert light and not [n for n in light if n.startswith(ARBITRARY_PRECISION)], light
    assert [n for n in numerics if n.startswith("libmpfr")], numerics


def test_input_error_is_one_class_across_both_modules():
    # Raised by the numerics' module (its own translator), caught as the class the fast path's module defines.
    from cgad import _numerics
    for call, message in ((lambda: _numerics.sigma_exact("1", "0.2", "32", "cosine", 1, None), "precision must be"),
                          (lambda: _numerics.sigma_exact("1", "0.2", "32", "no-gate", 64, None), "unknown gate")):
        with pytest.raises(cgad.InputError, match=message) as refused:
            call()
        assert type(refused.value) is cgad.InputError
