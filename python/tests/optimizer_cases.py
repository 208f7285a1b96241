"""Every cgad.torch optimizer in every state format it takes, for the protocol tests that must hold for each of them
(docs/python.md, "torch 2.x protocol"): fp32, bf16 and q8 state; for the Adam family also q8 with bitsandbytes'
semantics and with the zero-free v map. Nesterov and SDM have one moment and cgad's q8 semantics only."""
import pytest
import torch

from cgad.torch import CGAD, PACGAD, SDM, Adam, AdamDecay, Nesterov

ADAM_FORMATS = [
    ("fp32", dict(state="fp32")),
    ("bf16", dict(state="bf16")),
    ("q8", dict(state="q8")),
    # min_q8_size=0: every tensor 8-bit, so the small ones are too (bnb's default keeps tensors under 4096 in fp32)
    ("q8-bnb", dict(state="q8", q8_semantics="bnb", min_q8_size=0)),
    ("q8-zero-free", dict(state="q8", v_map="zero-free")),
]
MOMENTUM_FORMATS = ADAM_FORMATS[:3]

# (class, keywords besides the state format): PACGAD with two fragments, so a tensor straddles them.
OPTIMIZERS = [(CGAD, {}), (PACGAD, dict(fragments=2)), (AdamDecay, {}), (Adam, {}), (Nesterov, dict(lr=0.1)),
              (SDM, dict(lr=0.1))]


def _cases():
    for cls, kwargs in OPTIMIZERS:
        formats = MOMENTUM_FORMATS if cls in (Nesterov, SDM) else ADAM_FORMATS
        for name, fmt in formats:
            yield pytest.param(cls, dict(kwargs, **fmt), id=f"{cls.__name__}-{name}")


CASES = list(_cases())


def params(dtype=torch.float32, sizes=(300, 17, 260), seed=0):
    """Three tensors: two span several 256-element q8 blocks, one is smaller than a block."""
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(n, generator=g).to(dtype)) for n in sizes]


def feed(ps, event):
    """A pseudo-gradient per parameter, the same for the same event whatever the parameters' values."""
    g = torch.Generator().manual_seed(1000 + event)
    for p in ps:
        p.grad = (torch.randn(p.shape, generator=g) * 0.1).to(p.dtype)
