"""The one parser of cgad.torch's hyperparameters (python/cgad/torch/_hyperparameters.py; docs/python.md, "Refused
input"): every class takes a NumPy scalar, a one-element tensor or decimal text as the number it is, refuses any
other text with a one-line cgad.InputError, and checks its hyperparameters before torch.optim.Optimizer.__init__
reads the params, with torch's exception type where torch has a rule."""
import numpy as np
import pytest
import torch

import cgad
from cgad.torch import Gated, Nesterov
from conftest import bits, torch_version
from optimizer_cases import OPTIMIZERS, feed, params

# Python numbers, and the same values as NumPy scalars and as decimal text (np.float32(0.25) is 0.25 exactly).
PLAIN = dict(lr=0.003, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01, alpha=0.25, tau_cut=16, momentum=0.85)
NUMPY = dict(lr=np.float64(0.003), betas=(np.float64(0.8), np.float64(0.99)), eps=np.float64(1e-6),
             weight_decay=np.float64(0.01), alpha=np.float32(0.25), tau_cut=np.int64(16), momentum=np.float64(0.85))
TEXT = dict(lr="0.003", betas=("0.8", "0.99"), eps="1e-6", weight_decay="0.01", alpha="0.25", tau_cut="16",
            momentum="0.85")
# Text that str.isdigit() or int() would take or choke on: a superscript digit, past int()'s 4300 digits, a
# fraction, a sign, nothing.
BAD_TEXT = ["²", "1" * 5000, "3.5", "-4", " "]
IDS = [cls.__name__ for cls, _ in OPTIMIZERS]


def taken(cls, values):
    return {k: v for k, v in values.items() if k in cls._hyperparameters}


def stepped_bits(cls, kwargs):
    ps = params(sizes=(40,))
    opt = cls(ps, **kwargs)
    for e in range(2):
        feed(ps, e)
        opt.step(staleness=e)
    return [bits(p).tobytes() for p in ps]


@pytest.mark.parametrize("cls,base", OPTIMIZERS, ids=IDS)
def test_numpy_scalars_and_decimal_text_step_as_the_python_numbers(cls, base):
    expected = stepped_bits(cls, dict(base, **taken(cls, PLAIN)))
    assert stepped_bits(cls, dict(base, **taken(cls, NUMPY))) == expected
    assert stepped_bits(cls, dict(base, **taken(cls, TEXT))) == expected


def test_gated_takes_numpy_scalars_and_text_as_the_python_numbers():
    def sigmas(**kwargs):
        opt = Gated(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1), **kwargs)
        return opt.alpha, opt.tau_cut, [opt._config.sigma(t) for t in range(18)]
    expected = sigmas(alpha=0.3, tau_cut=16)
    assert sigmas(alpha=np.float64(0.3), tau_cut=np.int64(16)) == expected
    assert sigmas(alpha="0.3", tau_cut="16") == expected


def one_line_input_error(make, short=True):
    """The message of the InputError make() raises: one line, and (short) one that quotes a long text cut short.
    The library quotes number text it cannot parse whole (core/src/number_text.cpp), so lr's is not short."""
    with pytest.raises(cgad.InputError) as raised:
        make()
    message = str(raised.value)
    assert "\n" not in message and (not short or len(message) < 400), message
    return message


@pytest.mark.parametrize("text", BAD_TEXT, ids=["superscript", "5000-digits", "fraction", "negative", "blank"])
def test_bad_text_is_a_one_line_input_error_in_every_class(text):
    for cls, base in OPTIMIZERS:
        if "tau_cut" in cls._hyperparameters:
            assert "tau_cut" in one_line_input_error(lambda: cls(params(sizes=(4,)), **dict(base, tau_cut=text)))
        if text != "3.5":  # a valid lr
            assert "lr" in one_line_input_error(lambda: cls(params(sizes=(4,)), **dict(base, lr=text)), short=False)
    sgd = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    assert "tau_cut" in one_line_input_error(lambda: Gated(sgd, tau_cut=text))
    if text != "3.5":  # a valid alpha
        assert "alpha" in one_line_input_error(lambda: Gated(sgd, alpha=text), short=False)


@pytest.mark.parametrize("cls,base", OPTIMIZERS + [(torch.optim.Adam, {})], ids=IDS + ["torch.optim.Adam"])
def test_hyperparameters_are_checked_before_the_params_are_read(cls, base):
    """torch's test_optim gives params=None with a bad hyperparameter and expects the hyperparameter's error;
    torch.optim.Adam is the rule followed (its tensor-lr check is torch >= 2.2's)."""
    if cls is torch.optim.Adam and torch_version() < (2, 2):
        pytest.skip("torch.optim.Adam checks a tensor lr's size from torch 2.2")
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        cls(None, **dict(base, lr=torch.tensor([1e-3, 1e-3])))
    p = torch.nn.Parameter(torch.zeros(2))
    given = iter([p])
    with pytest.raises(ValueError, match="lr|learning rate"):
        cls(given, **dict(base, lr=-1.0))
    assert next(given) is p  # a refused construction used up nothing of the caller's iterator
    if cls is not torch.optim.Adam:
        with pytest.raises(cgad.InputError, match="lr"):
            cls(None, **dict(base, lr=-1.0))


def test_a_param_groups_text_hyperparameter_is_parsed_by_the_same_rule():
    ps = params(sizes=(4,))
    opt = Nesterov([{"params": ps[:1], "momentum": "0.5"}], lr=0.1)
    feed(ps, 0)
    opt.step()
    opt.param_groups[0]["momentum"] = "²"
    with pytest.raises(cgad.InputError, match="momentum"):
        opt.step()


def test_the_numerics_take_tau_cut_by_the_same_rule():
    """cgad.gate_table, bound_constants and replay take τ_cut as the classes do: a NumPy integer or its text."""
    expected = cgad.gate_table(tau_cut=3, precision=64)
    assert cgad.gate_table(tau_cut=np.int64(3), precision=64) == expected
    assert cgad.gate_table(tau_cut="3", precision=64) == expected
    for text in BAD_TEXT:
        for call in (lambda: cgad.gate_table(tau_cut=text, precision=64),
                     lambda: cgad.bound_constants(tau_cut=text, precision=64)):
            assert "tau_cut" in one_line_input_error(call)
