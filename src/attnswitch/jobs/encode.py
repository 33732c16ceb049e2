"""Encoding a run's chunks: the one routine the single-process run (`run.py`) and the Ray
actors (`ray_encoders.py`) share.

- `resolve_precision`: "auto" precision made concrete (the index records the concrete one);
- `resolve_engine` and `load_encoder`: the engine a run's options ask for, through the
  engine interface and registry only (`attnswitch.engines`);
- `ChunkEncoder`: an `Encoder` driven in calls of at most `chunks_per_call` texts, the memory
  watchdog sampled after each call and the seconds counted;
- `settle`: the outcome of one encode call over a group of documents: on success each
  document gets its slice of the vectors; a failed call of several documents is retried one
  document at a time; a document that fails on its own has failed;
- the report helpers a run summary and an actor's report are made of.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence, Sized
from dataclasses import Field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, cast

import numpy as np

from attnswitch.errors import ConfigError

if TYPE_CHECKING:
    import numpy.typing as npt

    from attnswitch.engines.base import Encoder
    from attnswitch.engines.model import ModelSpec
    from attnswitch.observe.memwatch import MemoryWatchdog

    # Vectors float32 `[N, dim]`, one per text or chunk.
    Vectors = npt.NDArray[np.float32]

log = logging.getLogger("attnswitch.jobs.run")

# The memory watchdog's warm-up and its fewest samples, in encode calls. Encoding
# examples/corpus, RSS rose by about 100 MiB over the first 11 calls of 128-300 chunks (the
# allocator meeting new batch shapes), then stayed flat for 30 more; three full runs in one
# process ended at 843, 848 and 853 MiB. Judged earlier or on fewer samples, the tail of
# that warm-up was once flagged as growth.
WATCH_WARMUP_CALLS = 12
WATCH_MIN_CALLS = 12


class EncodeOptions(Protocol):
    """What encoding reads of a run's options: a run's `options.EncodeOptions` (its
    `RunOptions.encode`, a dataclass, which `resolve_precision` copies with
    `dataclasses.replace`) has it."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def model(self) -> str | None: ...
    @property
    def engine(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def layout(self) -> str: ...
    @property
    def chunks_per_call(self) -> int: ...
    @property
    def batch_tokens(self) -> int | None: ...


_Options = TypeVar("_Options", bound=EncodeOptions)
_Doc = TypeVar("_Doc")
_Chunks = TypeVar("_Chunks", bound=Sized)
# A group of documents encoded in one call: (document, its chunks, its kind: new/changed),
# whatever the caller's document and chunk types (`settle` only counts the chunks).
Group = Sequence[tuple[_Doc, _Chunks, str]]


class _LayoutEngine(Protocol):
    """An engine that declares a batch layout beyond padded (`Engine.layouts`): its
    `load` takes the layout (`registry.Engine.load`)."""

    def load(self, spec: ModelSpec, precision: str, *, layout: str) -> Encoder: ...


def resolve_precision(
    options: _Options, progress: Callable[[int, int, str], None] | None = None
) -> tuple[_Options, str]:
    """`options` (a run's `options.EncodeOptions`) with precision "auto" made concrete (the
    measured pick of `engines.explain_precision`, for the engine the run asks for), and why.
    `progress(done, total, what)` follows the measurement when none is recorded here."""
    if options.precision != "auto":
        return options, f"{options.precision} asked for"
    import dataclasses

    from attnswitch.engines import explain_precision

    engine = "torch" if options.layout != "padded" and options.engine == "auto" else options.engine
    plan = explain_precision(options.model, engine, progress=progress)
    return dataclasses.replace(options, precision=plan.chosen), plan.reason()


def resolve_engine(
    options: EncodeOptions, progress: Callable[[int, int, str], None] | None = None
) -> tuple[str, str]:
    """The engine a run with `options` (its `options.EncodeOptions`) encodes with, and why
    ("auto" is the measured pick, see `engines.explain_engine`; a layout other than padded needs an
    engine that declares it, see `engines.registry.Engine.layouts`). `progress(done, total,
    what)` follows the measurement of the engines when "auto" has none recorded here."""
    from attnswitch.engines import NoEngineError, explain_engine, registry

    if options.layout != "padded":
        name = "torch" if options.engine == "auto" else options.engine
        if options.layout not in registry.get(name).layouts:
            raise ConfigError(
                f"layout: expected 'padded' for the {name} engine (its layouts: "
                f"{', '.join(registry.get(name).layouts)}), got {options.layout!r}"
            )
        return name, f"{options.layout} batches are the {name} engine's"
    plan = explain_engine(options.model, options.engine, options.precision, progress=progress)
    if plan.chosen is None:
        raise NoEngineError(
            f"engine: expected an engine that can serve {options.precision} here, got none\n{plan}"
        )
    return plan.chosen, plan.reason()


def load_encoder(options: EncodeOptions, spec: ModelSpec) -> Encoder:
    """The `Encoder` for a run's options and model `spec`: the cached engine of
    `engines.get_engine` for padded batches, else the engine `resolve_engine` names, loaded
    with the layout."""
    from attnswitch.engines import get_engine, registry

    if options.layout == "padded":
        return get_engine(options.model, options.engine, options.precision)
    name, _ = resolve_engine(options)  # an engine that declares the layout, else ConfigError
    engine = cast(_LayoutEngine, registry.get(name))
    return engine.load(spec, options.precision, layout=options.layout)


class ChunkEncoder:
    """`encoder` driven as every run drives it: `encode(texts)` in calls of at most
    `chunks_per_call` texts with `batch_tokens`, the memory watchdog sampled after each call;
    `seconds` counts the time spent in the encoder (failed calls included)."""

    def __init__(self, encoder: Encoder, chunks_per_call: int, batch_tokens: int | None) -> None:
        from attnswitch.observe.memwatch import MemoryWatchdog

        self.encoder = encoder
        self.chunks_per_call, self.batch_tokens = chunks_per_call, batch_tokens
        self.watchdog = MemoryWatchdog(
            "auto", warmup=WATCH_WARMUP_CALLS, min_samples=WATCH_MIN_CALLS
        )
        self.seconds = 0.0

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Vectors float32 `[len(texts), dim]` of `texts`."""
        step = self.chunks_per_call
        parts = []
        for i in range(0, len(texts), step):
            start = time.perf_counter()
            try:
                parts.append(
                    self.encoder.encode(list(texts[i : i + step]), batch_tokens=self.batch_tokens)
                )
            finally:
                self.seconds += time.perf_counter() - start
                self.watchdog.check()
        return np.asarray(np.concatenate(parts), dtype=np.float32)


def settle(
    group: Group[_Doc, _Chunks],
    outcome: Vectors | BaseException | None,
    *,
    write: Callable[[_Doc, _Chunks, Vectors | None], None],
    retry: Callable[[list[list[tuple[_Doc, _Chunks, str]]]], None],
    fail: Callable[[_Doc, str, Exception], None],
) -> None:
    """Apply the outcome of one encode call over `group`: vectors (None: the encoder wrote
    them itself) -> `write(doc, chunks, its slice or None)` for each document in order; an
    exception on several documents -> a warning, then `retry` with one group per document;
    on one document -> `fail(doc, kind, exc)`."""
    if not isinstance(outcome, BaseException):
        start = 0
        for doc, chunks, _ in group:
            write(doc, chunks, None if outcome is None else outcome[start : start + len(chunks)])
            start += len(chunks)
        return
    exc = outcome if isinstance(outcome, Exception) else RuntimeError(str(outcome))
    if len(group) > 1:
        log.warning(
            "run: an encode call of %d documents failed (%s: %s); retrying them one at a time",
            len(group),
            type(exc).__name__,
            exc,
        )
        retry([[one] for one in group])
        return
    doc, _, kind = group[0]
    fail(doc, kind, exc)


def count_diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """The counters that grew from `before` to `after`, by how much."""
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v > before.get(k, 0)}


def device_name(encoder: object) -> str | None:
    """The device an encoder runs on, named as `observe.cost` prices it."""
    label = getattr(encoder, "device_label", None)
    return label() if label is not None else None


def peak_rss_mb() -> float:
    """The process's peak resident memory (its current one where no peak is kept)."""
    try:
        import resource
    except ImportError:  # Windows
        import psutil

        rss: int = psutil.Process().memory_info().rss  # psutil is untyped
        return rss / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def peak_device_mb(encoder: object) -> float | None:
    """The peak CUDA memory of the encoder's device, None off CUDA."""
    device = getattr(encoder, "device", None)
    if getattr(device, "type", None) == "cuda":
        import torch

        return torch.cuda.max_memory_allocated(device) / 2**20
    return None


def memory_report(watchdog: MemoryWatchdog | None) -> dict[str, Any]:
    """The memory watchdog's verdict for a summary (None: nothing was encoded)."""
    if watchdog is None:
        return {"growing": False, "samples": 0, "reason": "no encoding: memory not sampled"}
    v = watchdog.verdict()
    return {
        "growing": v.growing,
        "samples": v.samples,
        "mib_per_call": v.mb_per_step,
        "source": v.source,
        "reason": v.reason,
    }
