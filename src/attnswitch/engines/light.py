"""The engines quickest to start: what a job too small to repay measuring encodes with, and
what a one-off query is encoded with.

`QUICK_START` orders the built-in engines by what a fresh process pays before its first
vector, measured on a 2-core AMD EPYC (AVX2; all-MiniLM-L6-v2, fp32, cached models, a
warm page cache; `attnswitch search` timings): onnxruntime 0.2 s to import and 0.05 s to
start a session (weights mapped); openvino 0.3 s to import and 0.3-0.4 s to compile; torch
4.5 s to import torch and transformers, 0.5 s to load, 1.9 s for its first call; jax 1.7 s
to import and 2-3 s to compile its first call.

- `unmeasured(spec, engine, precision)`: the choice without a measurement. A precision
  given, or recorded for "auto", else float32 (the reference; no precision was measured to
  keep float32's answers); an engine named, or recorded for "auto", else the quickest to
  start of those that can serve here. A named engine other than torch is checked against
  torch float32 on its first use, as always (`engines.get_engine`).
- `query_engine(spec, engine, precision)`: the engine a query of an index built by `engine`
  in `precision` is encoded with. Vectors must be comparable with the index's: in float32,
  every engine whose parity with torch float32 is recorded here (min cosine >= 0.9999 and
  the same top-10 on the retrieval check, `autopick.known_parity`) gives the index's
  answers, so the quickest to start among those lighter than the index's own engine is
  taken, when its model is built (`Engine.ready`): nothing is built, measured or checked
  for a query. bf16 and int8 vectors differ from engine to engine by their rounding, so an
  index in those precisions is queried by its own engine. `$ATTNSWITCH_QUERY_ENGINE`
  overrides: "index" (the index's own engine) or an engine's name (read once, into the
  engines runtime).
"""

from __future__ import annotations

from attnswitch.engines import registry, runtime
from attnswitch.engines.model import ModelSpec

QUICK_START = ("onnxruntime", "openvino", "torch", "jax")
ENV_QUERY_ENGINE = runtime.ENVIRONMENT["query_engine"]
FALLBACK_PRECISION = "fp32"


def _rank(name: str) -> int:
    return QUICK_START.index(name) if name in QUICK_START else len(QUICK_START)


def quickest(spec: ModelSpec, precision: str) -> str | None:
    """The registered engine quickest to start (`QUICK_START`, then the others in the fixed
    order) that can serve `precision` for `spec` here; None when none can."""
    device = registry.host_device()
    for engine in sorted(registry.engines(), key=lambda e: _rank(e.name)):
        if engine.unavailable() is None and not engine.declines(device, precision, spec):
            return engine.name
    return None


def unmeasured(spec: ModelSpec, engine: str, precision: str) -> tuple[str | None, str, str, str]:
    """(engine, precision, why that engine, why that precision) without measuring
    anything: see the module doc. `engine` and `precision` as asked ("auto" or a concrete
    one, the environment already read)."""
    from attnswitch.engines import autopick, autoprecision

    why_precision = f"{precision} asked for"
    if precision == "auto":
        recorded = autoprecision.recorded(spec, engine)
        if recorded is not None:
            precision, why_precision = recorded.chosen, recorded.reason()
        else:
            precision, why_precision = FALLBACK_PRECISION, "float32, the reference"
    if engine != "auto":
        return engine, precision, "asked for", why_precision
    plan = autopick.recorded(spec, precision)
    if plan is not None and plan.chosen is not None:
        return plan.chosen, precision, plan.reason(), why_precision
    return quickest(spec, precision), precision, "the quickest engine to start here", why_precision


def query_engine(spec: ModelSpec, engine: str, precision: str) -> tuple[str, str]:
    """(the engine to encode a query with, why) for an index built by `engine` in
    `precision`: see the module doc. Reads recorded verdicts and the model cache only."""
    forced = runtime.settings().query_engine
    if forced == "index":
        return engine, f"the index's engine (${ENV_QUERY_ENGINE}=index)"
    if forced:
        registry.get(forced, f"${ENV_QUERY_ENGINE}")
        return forced, f"${ENV_QUERY_ENGINE}={forced}"
    if precision != "fp32":
        return engine, f"the index's engine ({precision} vectors differ between engines)"
    from attnswitch.engines import autopick

    device = registry.host_device()
    for name in QUICK_START[: _rank(engine)]:
        candidate = registry.get(name)
        if candidate.unavailable() is not None or candidate.declines(device, precision, spec):
            continue
        row = autopick.known_parity(spec, candidate, precision)
        if (
            row is None
            or not row.parity
            or row.top10 != 1.0
            or not candidate.ready(spec, precision)
        ):
            continue
        return name, (
            f"quicker to start than {engine}, with the same answers "
            f"({autopick.parity_figures(row, autopick.PARITY[precision])})"
        )
    return engine, "the index's engine"


__all__ = ["ENV_QUERY_ENGINE", "QUICK_START", "query_engine", "quickest", "unmeasured"]
