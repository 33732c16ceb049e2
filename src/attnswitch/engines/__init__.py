"""Engines: the same sentence-embedding model run natively on each chip, behind one interface.

Built-in engines (`registry`; plug-ins through the entry-point group `attnswitch.engines`):
- "torch": a transformers `AutoModel` with `attn_implementation="attnswitch"` (`torch_hf`);
  the parity reference of the others;
- "jax": the BERT encoder family written in JAX, same safetensors weights (`jax_encoder`);
  the TPU path;
- "openvino" and "onnxruntime": the model exported once and run by the fused CPU runtimes
  (`openvino_runtime`, `onnx_runtime`).

`engine="auto"` is chosen by measurement (`autopick`): the fastest engine on this machine
whose vectors match the torch float32 ones, measured on first use and remembered. An
explicit name, or `$ATTNSWITCH_ENGINE`, overrides it. `precision="auto"` (the default) is
chosen the same way (`autoprecision`): the fastest precision the chip runs natively whose
vectors keep float32's (cosine and top-10), measured on first use and remembered; an
explicit precision, or `$ATTNSWITCH_PRECISION` for "auto", is used as given. An engine that
fails at run time falls back to the next of the plan with a warning, as attention backends
do.

`encode(texts)` is the one-call entry; `get_engine` returns the cached `Encoder` behind it;
`engines_status()` and `explain_engine()` say which engines can run here and why each was
or was not picked. Importing this package imports neither torch nor jax.

The environment variables are read once, into the engines runtime (`engines/runtime.py`:
at the first engine call, and again after `runtime.current().reset()`), which also keeps
the loaded encoders.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.engines import registry, runtime
from attnswitch.engines.base import (
    PRECISION_CHOICES,
    PRECISIONS,
    EncodeInputError,
    Encoder,
    check_precision_choice,
)
from attnswitch.engines.model import ModelError, ModelSpec, default_model_path
from attnswitch.engines.registry import Engine
from attnswitch.errors import AttnswitchError

ENV_ENGINE = runtime.ENVIRONMENT["engine"]
ENV_PRECISION = runtime.ENVIRONMENT["precision"]


class NoEngineError(AttnswitchError, RuntimeError):
    """No engine can serve (model, precision) here; the message carries the engine plan."""


@dataclass(frozen=True)
class EngineStatus:
    """Whether an engine can run here. `reason` says why not (None when it can); `detail`
    says what it would run on; `auto` marks the engine `engine="auto"` picked (from the
    recorded plan of the precision "auto" stands for; None when nothing was recorded yet)."""

    name: str
    available: bool
    reason: str | None
    detail: str
    auto: bool | None = None


def _requested(engine: str) -> tuple[str, str]:
    """The engine asked for and by what: the argument, else $ATTNSWITCH_ENGINE (the
    runtime's setting), else auto."""
    if engine != "auto":
        return engine, "argument"
    env = runtime.settings().engine
    return (env, f"${ENV_ENGINE}") if env else ("auto", "auto")


def _spec(model: str | os.PathLike | None) -> ModelSpec:
    return ModelSpec.load(default_model_path() if model is None else Path(model))


def _check_explicit(name: str, precision: str, spec: ModelSpec | None, source: str) -> None:
    what = "engine" if source == "argument" else source
    engine = registry.get(name, what)
    why = engine.unavailable()
    if why is None:
        declines = engine.declines(registry.host_device(), precision, spec)
        why = "; ".join(declines) if declines else None
    if why is not None:
        raise EncodeInputError(
            what, f"an engine that can serve {precision} here", f"{name!r} ({why})"
        )


def explain_precision(
    model: str | os.PathLike | None = None,
    engine: str = "auto",
    *,
    measure: bool = True,
    progress: Any = None,
) -> Any:
    """The `autoprecision.PrecisionPlan` of `precision="auto"` for (model, engine): the
    recorded plan, measured now when there is none (None with `measure=False`). Without
    torch, the parity reference, nothing can be checked: the plan is float32, and says so.
    After a measurement only the picked precision's encoder stays loaded.
    `$ATTNSWITCH_PRECISION` names the precision "auto" stands for (nothing is measured).
    `progress(done, total, what)` follows a measurement (see `autoprecision.measure`)."""
    from attnswitch.engines import autoprecision

    forced = _forced_precision()
    if forced is not None:
        return autoprecision.PrecisionPlan(forced, [], f"forced by ${ENV_PRECISION}")
    spec = _spec(model)
    requested, _ = _requested(engine)
    with runtime.current().lock:
        plan = autoprecision.recorded(spec, requested)
        if plan is not None or not measure:
            return plan
        if not _reference_ok():
            return autoprecision.PrecisionPlan(
                autoprecision.FALLBACK, [], "fixed (torch, the parity reference, is not installed)"
            )
        before = set(runtime.current().encoders)
        plan = autoprecision.measure(
            spec,
            requested,
            lambda p, sub: explain_engine(model, engine, p, progress=sub),
            lambda name, p: _load_locked(spec, name, p),
            lambda: _load_locked(spec, "torch", "fp32"),
            progress,
        )
        chosen = plan.row(plan.chosen)
        keep = (str(spec.path.resolve()), chosen.engine if chosen else None, plan.chosen)
        _release(before, keep)
        return plan


def _forced_precision() -> str | None:
    """The precision $ATTNSWITCH_PRECISION (the runtime's setting) names for "auto"
    (checked), or None when it names none or "auto"."""
    forced = runtime.settings().precision
    if forced is None or forced == "auto":
        return None
    if forced not in PRECISIONS:
        raise EncodeInputError(f"${ENV_PRECISION}", f"one of {', '.join(PRECISIONS)}", repr(forced))
    return forced


def _asked_precision(precision: str) -> str:
    """`precision` with $ATTNSWITCH_PRECISION applied to "auto" (checked)."""
    if precision != "auto":
        return precision
    return _forced_precision() or precision


def measurement_ahead(
    model: str | os.PathLike | None = None, engine: str = "auto", precision: str = "auto"
) -> Any:
    """What resolving (engine, precision) for `model` would measure now, with an estimate
    of its seconds (`measuring.Measurement`); None when nothing would be measured (the
    plans are recorded, the choices forced, or torch, the parity reference, is missing).
    Reads the recorded tables only."""
    from attnswitch.engines import measuring

    check_precision_choice(precision)
    if not _reference_ok():
        return None
    with runtime.current().lock:
        return measuring.ahead(_spec(model), _requested(engine)[0], _asked_precision(precision))


def unmeasured_choice(
    model: str | os.PathLike | None = None, engine: str = "auto", precision: str = "auto"
) -> tuple[str, str, str, str]:
    """(engine, precision, why that engine, why that precision) for a job that does not
    measure: the recorded picks, else float32 and the engine quickest to start
    (`light.unmeasured`). Raises `NoEngineError` when no engine can serve."""
    from attnswitch.engines import light

    check_precision_choice(precision)
    name, source = _requested(engine)
    spec = _spec(model)
    chosen, concrete, why_engine, why_precision = light.unmeasured(
        spec, name, _asked_precision(precision)
    )
    if chosen is None:
        raise NoEngineError(f"engine: expected an engine that can serve {concrete} here, got none")
    if name != "auto":
        _check_explicit(chosen, concrete, spec, source)
        why_engine = f"forced by {source}"
    return chosen, concrete, why_engine, why_precision


def parity_known(model: str | os.PathLike | None, engine: str, precision: str) -> bool:
    """Whether engine `engine` in `precision` needs no parity check before use here: it is
    the reference in float32, torch is not installed, or its verdict is recorded."""
    from attnswitch.engines import autopick

    named = registry.get(engine)
    if named.reference and precision == "fp32" or not _reference_ok():
        return True
    return autopick.known_parity(_spec(model), named, precision) is not None


def check_engine(
    model: str | os.PathLike | None, engine: str, precision: str, progress: Any = None
) -> None:
    """Load engine `engine` in `precision` (kept for this process, as `get_engine` keeps it)
    and check it against torch float32 now unless its verdict is recorded; the reference is
    released afterwards. `progress(done, total, what)` follows the two steps."""
    report = progress or (lambda done, total, what: None)
    spec = _spec(model)
    with runtime.current().lock:
        before = set(runtime.current().encoders)
        report(0, 2, f"{engine}: load and parity check")
        encoder = _load_locked(spec, engine, precision)
        report(1, 2, "reference: torch float32 vectors")
        _check_parity(spec, engine, precision, encoder)
        keep = (str(spec.path.resolve()), engine, precision)
        _release(before, keep)
        report(2, 2, f"{engine} checked")


def query_engine(model: str | os.PathLike, engine: str, precision: str) -> tuple[str, str]:
    """The engine a query of an index built by `engine` in `precision` is encoded with,
    and why (`light.query_engine`: in float32 the quickest to start whose answers are the
    index's; otherwise the index's own)."""
    from attnswitch.engines import light

    return light.query_engine(_spec(model), engine, precision)


def resolve_precision(
    model: str | os.PathLike | None = None, engine: str = "auto", precision: str = "auto"
) -> str:
    """The concrete precision `precision` stands for: itself, or for "auto" the pick of
    `explain_precision` (measured on first use)."""
    check_precision_choice(precision)
    if precision != "auto":
        return precision
    return explain_precision(model, engine).chosen


def explain_engine(
    model: str | os.PathLike | None = None,
    engine: str = "auto",
    precision: str = "auto",
    *,
    measure: bool = True,
    progress: Any = None,
) -> Any:
    """The `autopick.EnginePlan` for (model, engine, precision) ("auto" precision resolved
    first, see `resolve_precision`): for "auto" engine, the recorded
    plan, measured now when there is none (or None with `measure=False`); for a named
    engine, a plan that says it was forced. `progress(done, total, what)` follows a
    measurement (see `autopick.measure`); it is not called when the plan was recorded.

    After a measurement only the pick stays loaded: the encoders it loaded for the other
    engines are released (a fallback is loaded again if it is ever needed)."""
    from attnswitch.engines import autopick

    check_precision_choice(precision)
    if precision == "auto":
        plan = explain_precision(model, engine, measure=measure)
        if plan is None:
            return None
        precision = plan.chosen
    name, source = _requested(engine)
    spec = _spec(model)
    if name != "auto":
        _check_explicit(name, precision, spec, source)
        return autopick.EnginePlan(precision, name, [], [], f"forced by {source}")
    with runtime.current().lock:
        plan = autopick.recorded(spec, precision)
        if plan is None and measure:
            if not _reference_ok():
                return _fixed_plan(spec, precision)
            before = set(runtime.current().encoders)
            plan = autopick.measure(
                spec,
                precision,
                lambda e, p: _load_locked(spec, e.name, p),
                lambda: _load_locked(spec, "torch", "fp32"),
                progress,
            )
            keep = (str(spec.path.resolve()), plan.chosen, precision)
            _release(before, keep)
        return plan


def _reference_ok() -> bool:
    return registry.get("torch").unavailable() is None


def _fixed_plan(spec: ModelSpec, precision: str) -> Any:
    """Without the reference engine nothing can be checked for parity: the first engine of
    the fixed order that serves is used, and the plan says so."""
    from attnswitch.engines import autopick

    able, rows = autopick.candidates(spec, precision)
    names = [e.name for e in able]
    return autopick.EnginePlan(
        precision,
        names[0] if names else None,
        names[1:],
        rows,
        "fixed order (torch, the parity reference, is not installed)",
    )


def choose(
    engine: str = "auto", model: str | os.PathLike | None = None, precision: str = "auto"
) -> str:
    """The engine name that `engine` resolves to for (model, precision) here."""
    plan = explain_engine(model, engine, precision)
    if plan.chosen is None:
        raise NoEngineError(
            f"engine: expected an engine that can serve {precision} here, got none\n{plan}"
        )
    return plan.chosen


def engines_status() -> list[EngineStatus]:
    """Every engine with whether it can run here and why not (for `attnswitch doctor`);
    `auto` marks the pick of the recorded plan for the precision "auto" stands for (fp32
    while none is recorded)."""
    try:
        chosen = explain_precision(None, "auto", measure=False)
        plan = explain_engine(
            None, "auto", "fp32" if chosen is None else chosen.chosen, measure=False
        )
    except (ModelError, EncodeInputError):
        plan = None
    out = []
    for engine in registry.engines():
        reason = engine.unavailable()
        auto = None if plan is None else engine.name == plan.chosen
        out.append(EngineStatus(engine.name, reason is None, reason, engine.detail(), auto))
    return out


def _load_locked(spec: ModelSpec, name: str, precision: str) -> Encoder:
    """The runtime's encoder for (model, engine, precision), loaded now when it has none
    (under the runtime's lock)."""
    encoders = runtime.current().encoders
    key = (str(spec.path.resolve()), name, precision)
    cached = encoders.get(key)
    if cached is None:
        cached = encoders[key] = registry.get(name).load(spec, precision)
    return cached


def _release(before: set, keep: tuple) -> None:
    """Drop the encoders the runtime loaded since it held the keys `before`, except `keep`
    (a measurement's pick stays loaded; under the runtime's lock)."""
    encoders = runtime.current().encoders
    for key in set(encoders) - before - {keep}:
        del encoders[key]


def get_engine(
    model: str | os.PathLike | None = None,
    engine: str = "auto",
    precision: str = "auto",
    *,
    check_parity: bool = True,
) -> Encoder:
    """The loaded `Encoder` for (model, engine, precision), loaded once per process.

    model: a local directory with a transformers model (None: all-MiniLM-L6-v2).
    engine: "auto" (measured: see `explain_engine`), or a registered name ("torch", "jax",
    "openvino", "onnxruntime", ...); `$ATTNSWITCH_ENGINE` names one when this is "auto".
    precision: "auto" (measured: see `explain_precision`), "fp32" (float32), "bf16"
    (bfloat16 matmuls) or "int8" (static int8, engines that declare it). The encoder's
    `precision` is the concrete one. With engine "auto" the encoder falls back along the
    plan when its engine fails at run time. `check_parity=False` skips the first-use parity
    check of a named engine (a query of an index built with it: see `query_engine`)."""
    precision = resolve_precision(model, engine, precision)
    plan = explain_engine(model, engine, precision)
    if plan.chosen is None:
        raise NoEngineError(
            f"engine: expected an engine that can serve {precision} here, got none\n{plan}"
        )
    spec = _spec(model)
    with runtime.current().lock:
        encoder = _load_locked(spec, plan.chosen, precision)
        if not plan.rows and check_parity:  # a named engine: parity checked on first use
            _check_parity(spec, plan.chosen, precision, encoder)
    if not plan.fallbacks:
        return encoder
    return FallbackEncoder(encoder, plan, lambda name: _load(spec, name, precision))


def _check_parity(spec: ModelSpec, name: str, precision: str, encoder: Encoder) -> None:
    """A named engine's vectors against the torch float32 ones, once per fingerprint (a
    verdict recorded here, by a measurement or an earlier check, is read, and torch is not
    loaded): a failure warns (the user asked for this engine by name, as with an attention backend
    forced by name), and is kept in the engine table for `attnswitch engines`."""
    from attnswitch.engines import autopick

    engine = registry.get(name)
    if engine.reference and precision == "fp32" or not _reference_ok():
        return
    row = autopick.check_parity(
        spec, engine, precision, encoder, lambda: _load_locked(spec, "torch", "fp32")
    )
    if not row.parity:
        warnings.warn(
            f"attnswitch: engine {name!r} ({precision}) failed its parity check: "
            f"min cosine {row.min_cosine:.6f} to torch float32 < "
            f"{autopick.PARITY[precision]}",
            RuntimeWarning,
            stacklevel=3,
        )


def _load(spec: ModelSpec, name: str, precision: str) -> Encoder:
    with runtime.current().lock:
        return _load_locked(spec, name, precision)


class FallbackEncoder:
    """An encoder that runs the plan's pick and moves to the next engine of the plan when
    one fails at run time (not for bad input): a warning once per engine, and the
    `attnswitch_engine_fallbacks` counter. Any other attribute is the current encoder's."""

    def __init__(self, encoder: Encoder, plan: Any, load: Any):
        self._encoder, self.plan, self._load = encoder, plan, load
        self._left = list(plan.fallbacks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    def _run(self, method: str, *args: Any, **kwargs: Any) -> np.ndarray:
        from attnswitch.observe.metrics import ENGINE_FALLBACKS

        while True:
            try:
                return getattr(self._encoder, method)(*args, **kwargs)
            except EncodeInputError:
                raise
            except Exception as exc:
                if not self._left:
                    raise
                failed, nxt = self._encoder.engine, self._left.pop(0)
                warnings.warn(
                    f"attnswitch: engine {failed!r} failed ({type(exc).__name__}: "
                    f"{exc}); falling back to {nxt!r}",
                    RuntimeWarning,
                    stacklevel=3,
                )
                ENGINE_FALLBACKS.labels(engine=failed, to=nxt).inc()
                self._encoder = self._load(nxt)

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        return self._run("encode", texts, **kwargs)

    def encode_ids(self, ids: Sequence[Sequence[int]], **kwargs: Any) -> np.ndarray:
        return self._run("encode_ids", ids, **kwargs)

    def __repr__(self) -> str:
        return f"<FallbackEncoder {self._encoder!r} then {self._left}>"


def encode(
    texts: Sequence[str],
    *,
    model: str | os.PathLike | None = None,
    engine: str = "auto",
    precision: str = "auto",
    batch_tokens: int | None = None,
    truncate: bool = True,
) -> np.ndarray:
    """Embed `texts`: float32 `[len(texts), dim]`, one row per text in input order.

    Texts longer than the model's `max_seq_length` tokens are truncated, or refused with
    `EncodeInputError` when `truncate=False`; an empty text is an error naming its index.
    `batch_tokens` bounds the padded tokens per batch (engine default when None). The engine
    is loaded once per (model, engine, precision) and reused."""
    return get_engine(model, engine, precision).encode(
        texts, batch_tokens=batch_tokens, truncate=truncate
    )


def engine_names() -> list[str]:
    """ "auto" and every registered engine name (for CLI choices and config checks)."""
    return ["auto", *registry.names()]


__all__ = [
    "ENV_ENGINE",
    "ENV_PRECISION",
    "PRECISIONS",
    "PRECISION_CHOICES",
    "EncodeInputError",
    "Encoder",
    "Engine",
    "EngineStatus",
    "FallbackEncoder",
    "ModelError",
    "ModelSpec",
    "NoEngineError",
    "choose",
    "encode",
    "engine_names",
    "engines_status",
    "explain_engine",
    "explain_precision",
    "get_engine",
    "check_engine",
    "measurement_ahead",
    "parity_known",
    "query_engine",
    "resolve_precision",
    "unmeasured_choice",
]
