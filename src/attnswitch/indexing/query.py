"""A query's vector: its text encoded by the model, engine and precision its index was
built with (`config.IndexConfig`), refusing another model. The one path of the CLI's
`search`, the Python call `attnswitch.search` and the integrations; the service keeps its
loaded encoder and batches queries itself (`service/batching.py`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.indexing.config import IndexConfig, IndexMismatchError


@dataclass
class QuerySteps:
    """Seconds spent by a search's steps in this process (`cli.timings.search_timings`)."""

    runtime_import_s: float = 0.0
    tokenizer_s: float = 0.0
    load_s: float = 0.0
    encode_s: float = 0.0
    search_s: float = 0.0
    engine: str = ""  # the engine the query was encoded by, and why that one
    engine_reason: str = ""


def encode_query(
    text: str, config: IndexConfig, model: str | None = None, steps: QuerySteps | None = None
) -> np.ndarray:
    """The vector `[dim]` of `text` by the index's model (`model`, when given, must be that
    model: `IndexMismatchError` otherwise) and precision, on the engine quickest to start
    whose vectors are the index's (`engines.query_engine`: the index's own engine unless
    another one's parity is recorded and its model built); the seconds of each step, and
    the engine and why, go to `steps`. Only that engine is loaded (once per process);
    nothing is measured or checked."""
    steps = steps if steps is not None else QuerySteps()
    encoder = index_encoder(config, model, steps)
    start = time.perf_counter()
    vector: np.ndarray = encoder.encode([text])[0]
    steps.encode_s = time.perf_counter() - start
    return vector


def index_encoder(
    config: IndexConfig, model: str | None = None, steps: QuerySteps | None = None
) -> Any:
    """The loaded encoder whose vectors are the index's (see `encode_query`), checked
    against the index's model; the seconds of loading it go to `steps`."""
    from attnswitch.engines import ModelSpec, get_engine, query_engine, registry
    from attnswitch.engines.model import model_fingerprint

    steps = steps if steps is not None else QuerySteps()
    spec = ModelSpec.load(model if model is not None else config.model)
    name = spec.path.parent.name if spec.path.name == "model" else spec.path.name
    if spec.dim != config.dim:
        raise IndexMismatchError(
            f"model: expected vectors of dimension {config.dim} (the index's), got "
            f"{spec.dim} from {name}; search with the model the index was built with"
        )
    fingerprint = model_fingerprint(spec.path)
    if fingerprint != config.model_fingerprint:
        where = str(Path(model).resolve()) if model is not None else config.model
        raise IndexMismatchError(
            f"model: expected the index's model {config.describe()}, got "
            f"{name} ({where or 'default model'}, {fingerprint[:12]}); search with the "
            "model the index was built with, or re-run `attnswitch run` to rebuild it"
        )
    start = time.perf_counter()
    steps.engine, steps.engine_reason = query_engine(spec.path, config.engine, config.precision)
    chosen = time.perf_counter() - start
    start = time.perf_counter()
    registry.get(steps.engine).import_runtime()
    steps.runtime_import_s = time.perf_counter() - start
    start = time.perf_counter()
    encoder = get_engine(spec.path, steps.engine, config.precision, check_parity=False)
    wall = time.perf_counter() - start + chosen
    loaded: dict[str, Any] = getattr(encoder, "load_times", {})
    if sum(loaded.values()) > wall + 1e-3:  # loaded earlier in this process: free now
        loaded = {}
    steps.runtime_import_s += loaded.get("import_s", 0.0)
    steps.tokenizer_s = loaded.get("tokenizer_s", 0.0)
    steps.load_s = max(0.0, wall - loaded.get("import_s", 0.0) - steps.tokenizer_s)
    return encoder
