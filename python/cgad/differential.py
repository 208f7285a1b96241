"""`cgad replay` and `cgad noise` from Python: the same engines (cgad::differential), returning plain Python and
NumPy data. See docs/python.md."""
import json
import math
import os
from typing import Any, Optional, Union

import numpy as np

from . import _cgad, _numerics
from ._arguments import INT64_MAX, Number, integer
from ._arguments import number_text as _text
from .numerics import _precision

_FASTPATH_ONLY = ("params", "state", "rounding", "seed", "device", "q8_semantics", "v_map", "min_q8_size", "q8_maps")


class Replay:
    """A replay's result. ``records``: one dict per event exactly as `cgad replay` writes it (every real as a
    decimal string that reads back to the exact value: MPFR for the reference backend). As NumPy arrays, one row
    per event: ``params``, ``state[name]`` ("m", "v" or "b"; float64, the exact values rounded to nearest),
    ``counters[name]`` ("t", "age"; int64), ``sigma`` (NaN where the event was refused), ``tau_effective``,
    ``skipped`` (bool). ``counts``: events, nonfinite, zero_gate, overflowing; ``notes``: what the command
    would print on standard error about skipped events; ``precision_bits``: the MPFR precision."""

    records: list[dict[str, Any]]
    counts: dict[str, int]
    notes: str
    precision_bits: int
    params: np.ndarray
    state: dict[str, np.ndarray]
    counters: dict[str, np.ndarray]
    sigma: np.ndarray
    tau_effective: np.ndarray
    skipped: np.ndarray

    def __init__(self, raw: dict[str, Any]) -> None:
        self.records = [json.loads(r) for r in raw["records"]]
        self.counts = {k: raw[k] for k in ("events", "nonfinite", "zero_gate", "overflowing")}
        self.notes = raw["notes"]
        self.precision_bits = raw["precision_bits"]
        rows = self.records
        self.params = np.array([[float(x) for x in r["params"]] for r in rows], dtype=np.float64)
        self.state, self.counters = {}, {}
        for name in (rows[0]["state"] if rows else {}):
            values = [r["state"][name] for r in rows]
            if values and values[0] and isinstance(values[0][0], str):
                self.state[name] = np.array([[float(x) for x in v] for v in values], dtype=np.float64)
            else:
                self.counters[name] = np.array(values, dtype=np.int64)
        self.sigma = np.array([math.nan if r["sigma"] is None else float(r["sigma"]) for r in rows])
        self.tau_effective = np.array([r["tau_effective"] for r in rows], dtype=np.int64)
        self.skipped = np.array([r["skipped"] for r in rows], dtype=bool)


def _stream_text(stream: Any) -> str:
    """JSON-lines text of a stream given as {"params": [...], "tensors": [...], "events": [{"grad": [...],
    "tau": k, "fragment": f}, ...]}: the dict's entries other than "events" make the header line, and each event
    its line, with their values as they are -- no value is converted to what the stream wants -- so the stream
    reader `cgad replay` uses (differential/replay_stream.hpp) refuses exactly what it refuses in a file: a
    missing or non-integer tau (16.5, True, "3"), an unknown key ("evnets"), a bool in params. NumPy arrays and
    tensors become flat lists; a float is written as its shortest decimal (which the reader rounds once, exactly,
    to each backend's format), a NaN or an infinity as the text "nan", "inf", "-inf" that the reader takes."""
    if not isinstance(stream, dict):
        raise _cgad.InputError(f"replay: a stream is a path or a dict, got {type(stream).__name__}")
    events = stream.get("events", [])
    if not isinstance(events, (list, tuple)):
        raise _cgad.InputError(f"replay: the stream's \"events\" must be a list of dicts, got {type(events).__name__}")
    header = {k: _json_value(v, k) for k, v in stream.items() if k != "events"}
    lines = [json.dumps(header, allow_nan=False)]
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise _cgad.InputError(f"replay: event {i} must be a dict, got {type(e).__name__}")
        lines.append(json.dumps({k: _json_value(v, k) for k, v in e.items()}, allow_nan=False))
    return "\n".join(lines) + "\n"


def _json_value(x: Any, key: Any) -> Any:
    """``x`` as JSON data, unchanged but for the forms JSON lacks (see _stream_text)."""
    if not isinstance(key, str):
        raise _cgad.InputError(f"replay: a stream's keys are strings, got {key!r}")
    if hasattr(x, "__array__") and not isinstance(x, (list, tuple)):
        x = np.asarray(x)
        x = x.reshape(-1).tolist() if x.ndim > 0 else x.item()
    if isinstance(x, (list, tuple)):
        return [_json_value(v, key) for v in x]
    if isinstance(x, dict):
        return {k: _json_value(v, k) for k, v in x.items()}
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise _cgad.InputError(f"replay: the stream's \"{key}\" holds a {type(x).__name__}, not JSON data (a number, "
                           "string, list or dict)")


def replay(stream: Union[str, os.PathLike, dict[str, Any]], backend: str = "reference", optimizer: str = "cgad", *,
           lr: Optional[Number] = None, beta1: Optional[Number] = None, beta2: Optional[Number] = None,
           eps: Optional[Number] = None, weight_decay: Optional[Number] = None, momentum: Optional[Number] = None,
           alpha: Number = "0.2", tau_cut: int = 32, buffer: int = 4, fragments: int = 1, on_zero_gate: str = "apply",
           params: Optional[str] = None, state: Optional[str] = None, rounding: Optional[str] = None,
           seed: Optional[int] = None, device: Optional[str] = None, q8_semantics: Optional[str] = None,
           v_map: Optional[str] = None, min_q8_size: Optional[int] = None,
           q8_maps: Optional[Union[str, os.PathLike]] = None, precision: int = 256) -> Replay:
    """Replays a pseudo-gradient stream as `cgad replay` does, through the MPFR reference (backend="reference",
    at ``precision`` bits) or the fast path (backend="fastpath": params "bf16" (default) or "fp32", state "fp32"
    (default), "bf16" or "q8", rounding, seed, device "cpu" or "cuda", q8_semantics, v_map ("dynamic" or "zero-free",
    q8 state's second-moment map), min_q8_size, q8_maps (the path of a JSON file of q8 state's maps, as
    `cgad replay --q8-maps` reads it) -- options the reference backend refuses). ``stream``: the path of a JSON-lines
    file, or a dict (see _stream_text). Every option of `cgad replay` is a parameter here, with its name
    (--input is ``stream``; the records --output writes are the Replay's). Hyperparameters as in `cgad replay
    --help` (None: the optimizer's default). Returns a Replay."""
    fast = dict(params=params, state=state, rounding=rounding, seed=seed, device=device, q8_semantics=q8_semantics,
                v_map=v_map, min_q8_size=min_q8_size, q8_maps=q8_maps)
    given = [k for k in _FASTPATH_ONLY if fast[k] is not None]
    if backend == "reference" and given:
        raise _cgad.InputError(f"replay: {given[0]} applies to backend='fastpath' only")
    maps = fast.pop("q8_maps")
    if maps is not None:
        if not isinstance(maps, (str, os.PathLike)):
            raise _cgad.InputError("replay: q8_maps must be the path of a JSON file of q8 maps (as `cgad replay "
                                   f"--q8-maps` takes), got {type(maps).__name__}")
        maps = os.fspath(maps)
    opts = {"optimizer": optimizer, "alpha": _text(alpha, "alpha"),
            "tau_cut": integer(tau_cut, "tau_cut", -INT64_MAX - 1, INT64_MAX, text=True), "buffer": buffer,
            "fragments": fragments, "on_zero_gate": on_zero_gate}  # each converted by the module, or refused
    for key, value in (("lr", lr), ("beta1", beta1), ("beta2", beta2), ("eps", eps),
                       ("weight_decay", weight_decay), ("momentum", momentum)):
        if value is not None:
            opts[key] = _text(value, key)
    fast = {k: v for k, v in fast.items() if v is not None}
    if isinstance(stream, (str, os.PathLike)):
        raw = _numerics.replay(os.fspath(stream), None, backend, opts, fast, _precision(precision), maps)
    else:
        raw = _numerics.replay(None, _stream_text(stream), backend, opts, fast, _precision(precision), maps)
    return Replay(raw)


def noise(optimizer: str = "cgad", *, params: str = "bf16", state: str = "q8", rounding: str = "nearest",
          q8_semantics: str = "cgad", v_map: str = "dynamic", min_q8_size: Optional[int] = None,
          delays: str = "heavy", size: int = 1024,
          steps: int = 10000, log_every: int = 100, seed: int = 1, scale_range: float = 1e5,
          zero_fraction: float = 0.0, stream: Optional[Union[str, os.PathLike]] = None,
          precision: int = 128) -> dict[str, Any]:
    """One scenario of `cgad noise`: the fast path and the MPFR reference (at ``precision`` bits) in lockstep on
    one synthetic stream (or a recorded one: ``stream``, a replay JSON-lines path), never re-synchronized.
    optimizer: "cgad", "cgad-skip", "adam-decay" or "adam"; v_map: q8 state's v map, "dynamic" or "zero-free"
    (`cgad noise --v-map`). Returns a dict: ``scenario`` (its name),
    ``precision_bits``, ``samples`` (NumPy arrays, one entry per logged step: step, v_/m_/theta_ mean_abs, rms,
    max_abs, bias, v_zero_fraction, m_zero_fraction, step_over_5lr_fraction, max_step_over_lr,
    reference_max_step_over_lr, gated_to_zero), ``final`` (theta/m/v of both sides after the last step) and
    ``tensors`` (per tensor of the run's layout, the last sample's figures with its own trap counter: size, v_/m_/
    theta_ mean_abs, rms, max_abs, bias, v_zero_fraction, m_zero_fraction, step_over_5lr_fraction,
    max_step_over_lr, reference_max_step_over_lr)."""
    opts = dict(optimizer=optimizer, params=params, state=state, rounding=rounding, q8_semantics=q8_semantics,
                v_map=v_map, min_q8_size=min_q8_size, delays=delays, size=size, steps=steps, log_every=log_every, seed=seed,
                scale_range=scale_range, zero_fraction=zero_fraction,
                stream=None if stream is None else os.fspath(stream))
    return _numerics.noise(opts, _precision(precision))
