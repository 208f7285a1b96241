"""cgad.torch against `cgad replay --backend fastpath` on the same stream, bit for bit: parameters, every state
buffer (dequantized as the replay prints it), the step counts and ages, and each event's report -- for bf16 and
q8 state (cgad's and bitsandbytes' semantics, nearest and stochastic rounding), bf16 and fp32 parameters, every
optimizer, multi-tensor layouts (the stream's "tensors" header key: q8 blocks restart at every tensor, small
tensors keep fp32 state under min_q8_size), PA-CGAD fragments, a NaN event and zero-gate events.

The replay prints each value as the shortest decimal that reads back to it in its own format; conftest.denotes
decides in exact rational arithmetic that the decimal rounds to exactly cgad.torch's value."""
import pytest
import torch

from cgad.torch import CGAD, PACGAD, Adam, AdamDecay, Nesterov, SDM
from conftest import assert_denotes, decimal, denotes, replay

TAUS = [0, 2, 5, 1, 40, 3, 0, 33, 7, 1]
NAN_EVENT = 3


def make_params(sizes, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter((torch.randn(n, generator=g) * 0.5).to(dtype)) for n in sizes]


def deltas(sizes, dtype, events, seed):
    """Pseudo-gradients per event and tensor, in the parameters' dtype (torch keeps .grad in it)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for e in range(events):
        scale = 10.0 ** (e % 4 - 2)
        out.append([(torch.randn(n, generator=g) * scale).to(dtype) for n in sizes])
    out[NAN_EVENT][-1][0] = float("nan")
    return out


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def run_both(tmp_path, make_opt, options, sizes, dtype, fragments=1):
    params = make_params(sizes, dtype, seed=1)
    header = {"params": [decimal(x) for x in flat(params).float().tolist()], "tensors": sizes}
    opt = make_opt(params)
    events, grads = [], deltas(sizes, dtype, len(TAUS), seed=2)
    total = sum(sizes)
    for e, (tau, gs) in enumerate(zip(TAUS, grads)):
        fragment = (2 * e) % fragments
        whole = flat(gs).float()
        if fragments > 1:
            bounds = opt._groups[0].fragments[fragment]
            grad = whole[bounds[0]:bounds[0] + bounds[1]]
        else:
            grad = whole
        events.append({"grad": [decimal(x) for x in grad.tolist()], "tau": tau, "fragment": fragment})
    records = replay(tmp_path, header, events, *options)
    assert len(records) == len(TAUS)
    names = ["m", "v"] if not isinstance(opt, (Nesterov, SDM)) else ["b"]
    for e, (tau, gs, record) in enumerate(zip(TAUS, grads, records)):
        for p, g in zip(params, gs):
            p.grad = g.clone()
        if fragments > 1:
            report = opt.step(staleness=tau, fragment=events[e]["fragment"])
        else:
            report = opt.step(staleness=tau)
        where = f"event {e}"
        assert report.applied == (not record["skipped"]), where
        assert report.tau_effective == record["tau_effective"], where
        if record["skipped"]:
            assert report.reason == record["skip_reason"], where
        if record["sigma"] is not None:
            assert denotes(record["sigma"], report.sigma, torch.float32), where
        assert_denotes(record["params"], flat(params), dtype, f"{where} params")
        for name in names:
            assert_denotes(record["state"][name], flat([opt.state_buffer(p, name) for p in params]), torch.float32,
                           f"{where} {name}")
        counters = opt.counters()
        for key in ("t", "age"):
            if key in record["state"]:
                assert counters[key] == record["state"][key], where
    assert total == len(header["params"])
    return opt


LAYOUT = [300, 17, 515]

CASES = [
    # (id, optimizer class, keyword arguments, replay options, parameter dtype)
    ("cgad-bf16-state", CGAD, dict(state="bf16"), ["--state", "bf16"], torch.bfloat16),
    ("cgad-bf16-state-stochastic", CGAD, dict(state="bf16", rounding="stochastic", seed=99),
     ["--state", "bf16", "--rounding", "stochastic", "--seed", "99"], torch.bfloat16),
    ("cgad-q8", CGAD, dict(state="q8"), ["--state", "q8"], torch.bfloat16),
    ("cgad-q8-stochastic-min300", CGAD, dict(state="q8", rounding="stochastic", seed=5, min_q8_size=300),
     ["--state", "q8", "--rounding", "stochastic", "--seed", "5", "--min-q8-size", "300"], torch.bfloat16),
    ("cgad-q8-bnb", CGAD, dict(state="q8", q8_semantics="bnb", min_q8_size=256),
     ["--state", "q8", "--q8-semantics", "bnb", "--min-q8-size", "256"], torch.bfloat16),
    ("cgad-q8-bnb-fp32-params", CGAD, dict(state="q8", q8_semantics="bnb", min_q8_size=0),
     ["--state", "q8", "--q8-semantics", "bnb", "--min-q8-size", "0", "--params", "fp32"], torch.float32),
    ("cgad-q8-zero-free", CGAD, dict(state="q8", v_map="zero-free"), ["--state", "q8", "--v-map", "zero-free"],
     torch.bfloat16),
    ("adam-decay-q8-bnb-zero-free", AdamDecay, dict(state="q8", q8_semantics="bnb", min_q8_size=256, v_map="zero-free"),
     ["--optimizer", "adam-decay", "--state", "q8", "--q8-semantics", "bnb", "--min-q8-size", "256",
      "--v-map", "zero-free"], torch.bfloat16),
    ("cgad-q8-fp32-params", CGAD, dict(state="q8", weight_decay=0.01),
     ["--state", "q8", "--params", "fp32", "--weight-decay", "0.01"], torch.float32),
    ("cgad-q8-skip-zero-gate", CGAD, dict(state="q8", on_zero_gate="skip", tau_cut=20, alpha=0.1),
     ["--state", "q8", "--on-zero-gate", "skip", "--tau-cut", "20", "--alpha", "0.1"], torch.bfloat16),
    ("adam-decay-q8", AdamDecay, dict(state="q8"), ["--optimizer", "adam-decay", "--state", "q8"], torch.bfloat16),
    ("adam-q8-bnb", Adam, dict(state="q8", q8_semantics="bnb", min_q8_size=300),
     ["--optimizer", "adam", "--state", "q8", "--q8-semantics", "bnb", "--min-q8-size", "300"], torch.bfloat16),
    ("nesterov-q8", Nesterov, dict(state="q8"), ["--optimizer", "nesterov", "--state", "q8"], torch.bfloat16),
    ("sdm-bf16-state", SDM, dict(state="bf16", lr=0.5), ["--optimizer", "sdm", "--state", "bf16"],
     torch.bfloat16),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_equals_replay_bit_for_bit(tmp_path, case):
    _, cls, kwargs, options, dtype = case
    kwargs = dict(kwargs)
    lr = kwargs.pop("lr", 0.7 if cls in (Nesterov, SDM) else 1e-2)
    options = list(options) + ["--lr", repr(lr)]
    run_both(tmp_path, lambda ps: cls(ps, lr=lr, threads=2, **kwargs), options, LAYOUT, dtype)


@pytest.mark.parametrize("state", ["q8", "bf16"])
def test_pacgad_fragments_equal_replay_bit_for_bit(tmp_path, state):
    # Fragments cut across the tensors; a fragment's event reads only its part (the rest of .grad is ignored).
    opt = run_both(tmp_path, lambda ps: PACGAD(ps, lr=1e-2, fragments=3, state=state, threads=3),
                   ["--optimizer", "pa-cgad", "--fragments", "3", "--state", state, "--lr", "0.01"], LAYOUT,
                   torch.bfloat16, fragments=3)
    assert max(opt.counters()["age"]) >= 1


def test_one_tensor_and_many_small_tensors(tmp_path):
    for sizes in ([1000], [1, 2, 3, 256, 255, 257]):
        run_both(tmp_path, lambda ps: CGAD(ps, lr=1e-2, state="q8", threads=2), ["--state", "q8", "--lr", "0.01"],
                 sizes, torch.bfloat16)
