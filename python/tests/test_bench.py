"""The roofline binding for Python benchmarks (cgad.bench, python/src/bench.cpp): the in-place twin runs and
reports a time per pass, counts the step's bytes, and refuses unknown names. No timing is asserted."""
import math

import pytest

import cgad
from cgad.bench import InPlaceTwin, roofline_seconds, step_bytes


@pytest.mark.parametrize("params,state,optimizer", [("fp32", "fp32", "adam"), ("bf16", "q8", "cgad"),
                                                    ("fp32", "bf16", "nesterov")])
def test_roofline_seconds_is_a_positive_finite_float(params, state, optimizer):
    seconds = roofline_seconds(params, state, optimizer, 4096, 1, 0.0, samples=1)
    assert isinstance(seconds, float)
    assert math.isfinite(seconds) and seconds > 0


def test_twin_runs_and_counts_the_step_bytes():
    twin = InPlaceTwin("fp32", "fp32", "adam", 4096, 1)
    twin.run()
    seconds = twin.time(0.0)
    assert math.isfinite(seconds) and seconds > 0
    # fp32 parameters r/w, fp32 gradient r, two fp32 moments r/w: 28 bytes a parameter
    assert twin.bytes == step_bytes("fp32", "fp32", "adam", 4096) == 28 * 4096
    assert step_bytes("fp32", "fp32", "nesterov", 4096) == 20 * 4096


@pytest.mark.parametrize("params,state,optimizer", [("fp16", "fp32", "adam"), ("fp32", "fp8", "adam"),
                                                    ("fp32", "fp32", "lion")])
def test_unknown_names_are_refused(params, state, optimizer):
    with pytest.raises(cgad.InputError):
        roofline_seconds(params, state, optimizer, 4096, 1, 0.0)
    with pytest.raises(ValueError):
        InPlaceTwin(params, state, optimizer, 4096, 1)


def test_bad_sizes_and_timings_are_refused():
    with pytest.raises(ValueError):
        roofline_seconds("fp32", "fp32", "adam", 0, 1, 0.0)
    with pytest.raises(ValueError):
        roofline_seconds("fp32", "fp32", "adam", 4096, 1, float("nan"))
    with pytest.raises(ValueError):
        roofline_seconds("fp32", "fp32", "adam", 4096, 1, 0.0, samples=0)


def test_cpu_isa_names_one_of_the_three():
    from cgad.bench import cpu_isa
    assert cpu_isa() in ("generic", "avx2", "avx512")
