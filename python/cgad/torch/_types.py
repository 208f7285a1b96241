"""The types of what cgad.torch's public methods take, for their annotations (docs/python.md, "Type checking").
Each names what the code accepts at run time -- nothing it refuses, nothing narrower than the documented inputs --
so a type checker's verdict on a user's call is the run time's. Annotations only: with ``from __future__ import
annotations`` in the modules that use them they are never evaluated, so torch 1.13 imports them unchanged."""
from typing import Any, Dict, Iterable, Optional, Tuple, TypeVar, Union

import numpy as np
import torch

# The parameters an optimizer takes, as torch.optim's constructors take them (torch 2.x's ParamsT): tensors, param
# group dicts, or (name, tensor) pairs (torch 2.x's named parameters).
Params = Union[Iterable[torch.Tensor], Iterable[Dict[str, Any]], Iterable[Tuple[str, torch.Tensor]]]

# A real hyperparameter (_hyperparameters.number): a Python or NumPy number, a one-element tensor (torch takes a
# tensor lr) or decimal text, read exactly.
Real = Union[float, str, torch.Tensor, "np.floating[Any]", "np.integer[Any]"]
Betas = Tuple[Real, Real]

# τ_cut (_hyperparameters.tau_cut): an integer, or the decimal text of one.
TauCut = Union[int, str, "np.integer[Any]"]

# A staleness (_protocol.staleness): one integer number of outer rounds -- a Python or NumPy integer, or a 0-dim
# integer tensor or array; a float or text is refused.
Staleness = Union[int, "np.integer[Any]", torch.Tensor, "np.ndarray[Any, Any]"]

# q8 state's maps (_q8_maps.q8_codes): None (cgad's build of bitsandbytes' maps), "bitsandbytes" (the installed
# bitsandbytes' own), or a pair (signed map, unsigned map) of 256-element float32 tensors or arrays.
Q8Maps = Optional[Union[str, Tuple[Union[torch.Tensor, "np.ndarray[Any, Any]"],
                                   Union[torch.Tensor, "np.ndarray[Any, Any]"]]]]

# What step(closure) returns: the closure's own value (torch.optim's rule, whatever the closure returns).
Loss = TypeVar("Loss")
