"""cgad's numerics from Python against the `cgad` command, which calls the same libraries: the gate table of
`cgad gate --json` and the constants of `cgad bound --json`, string for string; sigma in double within its
rounding budget of the MPFR value; bad input refused."""
import json
import math
import subprocess

import pytest

import cgad
from conftest import cgad_binary


def cli_json(*args):
    run = subprocess.run([cgad_binary(), *args, "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def digits(text):
    """Significant digits of a decimal in scientific notation ("1.2345e-01" -> 5)."""
    return len(text.split("e")[0].replace("-", "").replace(".", ""))


@pytest.mark.parametrize("alpha,tau_cut", [("0.2", 32), ("0.05", 7), ("1.5", 3)])
def test_gate_table_is_cgad_gate(alpha, tau_cut):
    cli = cli_json("gate", "--alpha", alpha, "--tau-cut", str(tau_cut))
    n = digits(cli["rows"][1]["sigma"])
    ours = cgad.gate_table(alpha=alpha, tau_cut=tau_cut, digits=n)
    assert [(r["tau"], r["gamma"], r["sigma"]) for r in ours] == \
        [(r["tau"], r["gamma"], r["sigma"]) for r in cli["rows"]]
    for r in ours:
        assert cgad.sigma_exact(r["tau"], alpha=alpha, tau_cut=tau_cut, digits=n) == r["sigma"]
        # double: about 10 correctly or faithfully rounded operations (pi, the quotient, sin, its square, the
        # exponent's product, exp, the final product), so within 16 ulps of the MPFR value.
        exact = float(r["sigma"])
        assert abs(cgad.sigma(r["tau"], alpha=float(alpha), tau_cut=tau_cut) - exact) <= 16 * 2.0 ** -53 * exact


def test_gate_facts():
    assert cgad.sigma(0) == 1.0 and cgad.gamma(0) == 1.0
    assert cgad.sigma(32) == 0.0 and cgad.sigma(40) == 0.0 and cgad.sigma_exact(33) .startswith("0")
    assert cgad.sigma(5, gate="exponential") == pytest.approx(math.exp(-1.0), rel=1e-15)
    assert cgad.sigma(5, gate="none") == 1.0
    assert cgad.sigma(2.5) < cgad.sigma(2) and cgad.sigma(2.5) > cgad.sigma(3)  # real tau for the theory
    # alpha = 0.2 is the decimal 0.2 in MPFR, whichever way it is written
    assert cgad.sigma_exact(3, alpha=0.2) == cgad.sigma_exact(3, alpha="0.2")
    assert cgad.sigma_exact(3, precision=512) != cgad.sigma_exact(3, precision=256)


def test_bound_constants_are_cgad_bound():
    cli = cli_json("bound", "--alpha", "0.3", "--tau-cut", "12", "--precision", "160")
    # The command prints values and enclosures with different digit counts; each is asked for its own.
    n_value, n_enclosure = digits(cli["B1"]["value"]), digits(cli["B1"]["enclosure"]["lo"])
    by_value = cgad.bound_constants(alpha="0.3", tau_cut=12, precision=160, digits=n_value)
    by_enclosure = cgad.bound_constants(alpha=0.3, tau_cut=12, precision=160, digits=n_enclosure)
    assert by_value["precision_bits"] == cli["precision_bits"]
    for name in ("B1", "B2"):
        assert by_value[name]["value"] == cli[name]["value"]
        assert by_value[name]["argmax"] == cli[name]["argmax"]
        assert by_value[name]["integer_argmax"] == cli[name]["integer_argmax"]
        for key in ("enclosure", "argmax_enclosure", "integer_value_enclosure", "cutoff_bound_enclosure"):
            assert {k: by_enclosure[name][key][k] for k in ("lo", "hi")} == \
                {k: cli[name][key][k] for k in ("lo", "hi")}, (name, key)
        lo, hi = by_enclosure[name]["enclosure"]["lo"], by_enclosure[name]["enclosure"]["hi"]
        assert float(lo) <= by_value[name]["float"] <= float(hi)
    assert {k: by_enclosure["W"]["enclosure"][k] for k in ("lo", "hi")} == \
        {k: cli["W"]["enclosure"][k] for k in ("lo", "hi")}
    assert [(q["statement"], q["verdict"]) for q in by_value["inequalities"]] == \
        [(q["statement"], q["verdict"]) for q in cli["inequalities"]]
    assert all(q["proved"] for q in by_value["inequalities"])
    # The theory's bound, as floats: B1 <= 1/(e*alpha)
    assert by_value["B1"]["float"] <= 1 / (math.e * 0.3)


@pytest.mark.parametrize("call,message", [
    (lambda: cgad.sigma(1, alpha=-0.1), "alpha must be finite and >= 0"),
    (lambda: cgad.sigma(-1), "staleness tau must be finite and >= 0"),
    (lambda: cgad.sigma(1, tau_cut=0), "tau_cut must be finite and > 0"),
    (lambda: cgad.sigma(1, gate="sigmoid"), "gate must be one of"),
    (lambda: cgad.sigma("0x1p-3"), "tau"),
    (lambda: cgad.sigma_exact(1, precision=8), "precision must be in"),
    (lambda: cgad.sigma_exact(1, digits=1), "digits must be an integer in \\[2, "),
    (lambda: cgad.bound_constants(alpha="-1"), "alpha"),
    (lambda: cgad.bound_constants(tau_cut=0), "tau"),
    (lambda: cgad.gate_table(tau_cut=1.5), "tau_cut must be an integer"),
], ids=["alpha", "tau", "tau_cut", "gate", "hex", "precision", "digits", "bound-alpha", "bound-tau-cut", "table"])
def test_bad_input_is_refused(call, message):
    with pytest.raises(cgad.InputError, match=message):
        call()
