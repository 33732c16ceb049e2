"""A run's encode phase: the documents the read phase queued (`run_state.EncodeQueue`) are
encoded, and each is then written in its own transaction (`record.RunRecord.write`).

How they are encoded is the `Encoding` a run is given: in this process (`LocalEncoding`,
`run.run`) or by Ray actors (`ray_run.RayEncoding`). Either settles each encode call by
`encode.settle`: a failed call of several documents is retried one document at a time,
and a document that fails on its own is recorded as failed (`RunRecord.fail`).

`flush(queue, encoding, sink)` sends what is pending; `Encoding.finish` waits for what was
sent. An encoding that encodes here (`encode_here`) also serves what needs vectors outside
an encode call of documents: the full pass (`passes.full_pass`)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import numpy as np

from attnswitch.jobs.encode import (
    ChunkEncoder,
    count_diff,
    device_name,
    memory_report,
    peak_device_mb,
    settle,
)
from attnswitch.jobs.phases import Phases
from attnswitch.jobs.run_state import EncodeQueue, RunProgress

if TYPE_CHECKING:
    from attnswitch.documents.chunk import Chunk
    from attnswitch.documents.ingest import Document
    from attnswitch.engines.base import Encoder
    from attnswitch.engines.model import ModelSpec
    from attnswitch.indexing.config import IndexConfig
    from attnswitch.jobs.options import EncodeOptions
    from attnswitch.jobs.run_state import Pending, Vectors

# The attention counters of `observe.metrics.stats()`: kind ("calls", "fallbacks", ...) ->
# backend -> count.
AttentionCounts = dict[str, dict[str, Any]]


class EngineReport(TypedDict):
    """What a run's summary says of its encoding side: the engine that encoded last (None:
    the one the run chose), its device, the attention backends and fallbacks counted, the
    peak device memory (None off CUDA), the memory watchdog's verdict, and `ray` (the
    pools and actors of a Ray run, else None)."""

    engine: str | None
    device: str | None
    backends: dict[str, int]
    fallbacks: dict[str, int]
    peak_device_mb: float | None
    memory: dict[str, Any]
    ray: dict[str, Any] | None


class DocumentSink(Protocol):
    """Where an encoding settles the documents of its calls (`record.RunRecord`)."""

    def write(self, doc: Document, chunks: list[Chunk], vectors: Vectors | None) -> None:
        """`doc` is encoded: `vectors` of `chunks` (None: the encoder wrote it)."""

    def fail(self, doc: Document, kind: str, exc: Exception) -> None:
        """`doc` failed to encode on its own with `exc`."""

    def reused(self, repeats: Sequence[Chunk]) -> None:
        """`repeats` took the vector of a chunk of the same call with the same text."""


@dataclass(frozen=True)
class EncodeStart:
    """What an encoding learns when its run has begun: the model (`spec`), the run's
    encode options as resolved (`choose.choose`), the index `config`, the `run_id`, and
    the progress it updates (reported to `on_progress`)."""

    spec: ModelSpec
    options: EncodeOptions
    config: IndexConfig
    run_id: int
    progress: RunProgress
    on_progress: Callable[[RunProgress], None]


class Encoding(Protocol):
    """How a run's queued documents are encoded (see the module doc)."""

    def begin(self, start: EncodeStart) -> None:
        """The run has begun: what to encode with and under (before any `send`)."""

    def send(self, group: list[Pending], sink: DocumentSink) -> None:
        """Encode `group` (documents with the chunks to encode), each document settled
        through `sink` now or by a later `send` or `finish`."""

    def finish(self, sink: DocumentSink) -> None:
        """Settle every document sent."""

    def close(self) -> None:
        """Release what the encoding holds (its actors); it encodes no more."""

    @property
    def encode_here(self) -> Callable[[list[str]], Vectors] | None:
        """Vectors `[len(texts), dim]` of texts, in this process, for documents written
        here: what the full pass needs (a run that has one does two passes). None:
        every chunk of a document goes to the encoder with it (Ray: an actor may write the
        document itself)."""

    @property
    def seconds(self) -> float:
        """The seconds the run counts as encoding (the summary's `encode_s`)."""

    def report(self, calls_before: AttentionCounts) -> EngineReport:
        """The summary's encoding side (`calls_before`: the attention counters before the
        run encoded)."""

    def time_parts(self, phases: Phases, progress: RunProgress, wall: float) -> dict[str, float]:
        """Where the run's `wall` seconds went (`Phases.breakdown`)."""


def flush(queue: EncodeQueue, encoding: Encoding, sink: DocumentSink) -> None:
    """Send every pending document of `queue` to `encoding` in one group."""
    group = queue.take()
    if group:
        encoding.send(group, sink)


class LocalEncoding:
    """The `Encoding` of a run in this process: `get_encoder()` (default: the engine of the
    run's resolved options, `encode.load_encoder`) is called once, on first need, and
    driven as `encode.ChunkEncoder`; each call of a group encodes each distinct encoder
    text once."""

    def __init__(self, get_encoder: Callable[[], Encoder] | None = None) -> None:
        self._get_encoder = get_encoder
        self._start: EncodeStart | None = None
        self.encoding: ChunkEncoder | None = None  # once the model is loaded

    def begin(self, start: EncodeStart) -> None:
        self._start = start

    @property
    def start(self) -> EncodeStart:
        if self._start is None:
            raise RuntimeError("encoding: expected the run begun first, got none")
        return self._start

    def send(self, group: list[Pending], sink: DocumentSink) -> None:
        """Encode every chunk of `group` in one call, then settle each document
        (`encode.settle`: a failed call is retried one document at a time)."""
        todo = deque([group])
        while todo:
            part = todo.popleft()
            if not part:
                continue
            outcome: Vectors | Exception
            try:
                outcome = self._encode_distinct([c for _, chunks, _ in part for c in chunks], sink)
            except Exception as exc:
                outcome = exc
            settle(
                part,
                outcome,
                write=sink.write,
                fail=sink.fail,
                retry=lambda singles: todo.extendleft(reversed(singles)),
            )

    def finish(self, sink: DocumentSink) -> None:
        """Nothing: `send` settles its group before it returns."""

    def close(self) -> None:
        """Nothing: the encoder is the caller's to keep (`get_encoder`)."""

    def _encode_distinct(self, chunks: list[Chunk], sink: DocumentSink) -> Vectors:
        """Vectors of `chunks`, each distinct encoder text encoded once: the chunks that
        repeat one are reported as reused (`sink.reused`)."""
        texts = [c.encoder_text for c in chunks]
        where: dict[str, int] = {}  # distinct text -> its row in the encoded call
        repeats = []
        for c in chunks:
            if c.encoder_text in where:
                repeats.append(c)
            else:
                where[c.encoder_text] = len(where)
        if not repeats:
            return self.encode(texts)
        vectors = np.asarray(self.encode(list(where)))
        sink.reused(repeats)
        return vectors[[where[t] for t in texts]]

    def encode(self, texts: list[str]) -> Vectors:
        """Vectors of `texts` (`encode.ChunkEncoder`), the model loaded on first need."""
        encoding = self.encoding if self.encoding is not None else self._load()
        progress = self.start.progress
        progress.stage = "encoding"
        try:
            return encoding.encode(texts)
        finally:
            progress.encode_s = encoding.seconds

    @property
    def encode_here(self) -> Callable[[list[str]], Vectors]:
        return self.encode

    def _load(self) -> ChunkEncoder:
        from attnswitch.jobs.encode import load_encoder

        start = self.start
        start.progress.stage = "loading model"
        start.on_progress(start.progress)
        started = time.perf_counter()
        get = self._get_encoder
        encoder = get() if get is not None else load_encoder(start.options, start.spec)
        start.progress.load_s = time.perf_counter() - started
        self.encoding = ChunkEncoder(
            encoder, start.options.chunks_per_call, start.options.batch_tokens
        )
        return self.encoding

    @property
    def seconds(self) -> float:
        return 0.0 if self.encoding is None else self.encoding.seconds

    def report(self, calls_before: AttentionCounts) -> EngineReport:
        """Device, attention backends and fallbacks (since `calls_before`), device memory
        and the memory watchdog's verdict of this process's encoder."""
        from attnswitch.observe.metrics import stats

        calls_after = stats()
        encoder = None if self.encoding is None else self.encoding.encoder
        return {
            "engine": None if encoder is None else (getattr(encoder, "engine", None) or None),
            "device": device_name(encoder) if encoder is not None else None,
            "backends": count_diff(calls_after["calls"], calls_before["calls"]),
            "fallbacks": count_diff(calls_after["fallbacks"], calls_before["fallbacks"]),
            "peak_device_mb": peak_device_mb(encoder),
            "memory": memory_report(None if self.encoding is None else self.encoding.watchdog),
            "ray": None,
        }

    def time_parts(self, phases: Phases, progress: RunProgress, wall: float) -> dict[str, float]:
        """Seconds per part (`phases`), with the measuring, the model's load and the
        encoder's calls timed where they happen."""
        return phases.breakdown(
            wall, measure=progress.measure_s, load=progress.load_s, encode=self.seconds
        )


__all__ = [
    "AttentionCounts",
    "DocumentSink",
    "EncodeStart",
    "Encoding",
    "EngineReport",
    "LocalEncoding",
    "flush",
]
