"""The explicit state of a run (`run.RunJob`), each object with one job:

- `Resolution`: what `resolve` chose (engine, precision, index config), set once before
  anything is read;
- `RunProgress`: what a progress display reads, updated as the run goes;
- `RunCounts`: what the run did to the documents of its root (the summary's counts, its
  skipped files and notes);
- `RunTarget`: where the run writes (the root, the store, the run's writer and its run id);
- `EncodeQueue`: the documents waiting for vectors (`pending`), and the stored vectors
  the waiting documents keep (`kept`).

Where a run's wall time goes is `phases.Phases`. The job owns these objects and hands them
to the functions that change them (`read_phase`, `encode_phase`, `record`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attnswitch.documents.rules import FileRules
from attnswitch.indexing.config import IndexConfig
from attnswitch.indexing.records import root_key

if TYPE_CHECKING:
    import numpy.typing as npt

    from attnswitch.documents.chunk import Chunk
    from attnswitch.documents.ingest import Document
    from attnswitch.indexing.store import Store
    from attnswitch.indexing.writer import IndexWriter

    # Vectors float32 `[N, dim]`, one per chunk or text.
    Vectors = npt.NDArray[np.float32]
    # A document waiting for vectors: (document, the chunks to encode, "new" or "changed").
    Pending = tuple[Document, list[Chunk], str]


@dataclass(frozen=True)
class Resolution:
    """The engine and precision a run chose (`engine`, and why: `engine_reason`,
    `precision_reason`; `choose.choose`) and the index config they give (`config`: its
    `fingerprint` is the documents' config, its `vector_fingerprint` the vectors')."""

    engine: str
    engine_reason: str
    precision_reason: str
    config: IndexConfig


MEASURING = "measuring engines"


@dataclass
class RunProgress:
    """What a progress display needs, updated as the run goes. Files and bytes count the
    files that had to be read: `files_read`/`bytes_read` when a reader gave them to the
    run, `files_done`/`bytes_done` when committed to the index (or found unchanged, or
    skipped). `tokens_per_s` is over the encoder's time (`encode_s`).

    `stage` is "measuring engines" (`MEASURING`) while the engines or precisions are
    measured on this machine (once per machine, model and library versions; a minute or two
    on a small CPU, before any file is read; see `jobs/choose.py`), or an engine is
    checked against torch float32 once: `measure_note` says what for and about how long,
    `measure_done` of `measure_total` (estimated seconds, or steps) are done, the current
    step named by `measure_step`; `measure_s` is the seconds it took. Then "scanning",
    "reading", "loading model" (on Ray: "starting actors"), "encoding", and "done".

    A run of two passes (`jobs/passes.py`) reads every file in the quick pass, then
    encodes in the full pass: `searchable_s` is the seconds from the start until the quick
    pass ended (None: not yet, or one pass), and `fill_done` of `fill_total` chunks have
    been given their full vector by the full pass, in `fill_s` seconds."""

    files_total: int = 0
    files_done: int = 0
    files_read: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    bytes_read: int = 0
    chunks: int = 0
    tokens: int = 0
    stage: str = "scanning"
    started: float = field(default_factory=time.perf_counter)
    load_s: float = 0.0
    encode_s: float = 0.0
    measure_note: str = ""
    measure_done: float = 0.0
    measure_total: float = 0.0
    measure_step: str = ""
    measure_s: float = 0.0
    searchable_s: float | None = None
    fill_done: int = 0
    fill_total: int = 0
    fill_s: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.encode_s if self.encode_s > 0 and self.tokens else 0.0


# The kinds of a document whose chunks a run writes (`IndexWriter.classify`).
KINDS = ("new", "changed")


@dataclass
class RunCounts:
    """What a run did to the documents of its root, as its summary reports it.

    Documents: `new`, `changed` (of them `copied`: given an indexed document's chunks and
    vectors without being read), `unchanged`, `deleted`, `moved`, `skipped` (of them
    `failed`: the encoder failed on them alone), `permissions_changed` (of the unchanged:
    their recorded access brought up to date, nothing read). Chunks: `chunks` encoded by this run
    (`tokens` of them), `reused` (a stored vector, or one encoded for another chunk of the
    same call), `quick` (written with quick vectors only), `filled` (given their full
    vector by the full pass; `filled_encoded` of them by the encoder). `skips`: the skipped
    documents, with their reasons; `notes`: what a written document's reading noted
    (`{"source", "note"}`). `failures_in_row`: documents failed one after another since
    the last one written (not summarised: `record.MAX_FAILURES_IN_ROW` stops the run)."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    moved: int = 0
    copied: int = 0
    skipped: int = 0
    failed: int = 0
    chunks: int = 0
    tokens: int = 0
    reused: int = 0
    quick: int = 0
    filled: int = 0
    filled_encoded: int = 0
    permissions_changed: int = 0
    skips: list[Document] = field(default_factory=list)
    notes: list[dict[str, str]] = field(default_factory=list)
    failures_in_row: int = 0

    def add_kind(self, kind: str, n: int = 1) -> None:
        """Add `n` to the count of `kind` ("new" or "changed")."""
        if kind == "new":
            self.new += n
        elif kind == "changed":
            self.changed += n
        else:
            raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}")


@dataclass
class RunTarget:
    """Where a run writes: `root` (`root_id`: the (device, inode) it must have, for a
    caller that checked the folder before; `ingest.scan`), the `store`, and `writer`, the
    run's writes through the store (holding its run lock from `begin_run` to
    `finish_run`). `run_id`: the run's row in the runs table, once begun; `rules`: the
    root's file rules, once read (`read_phase.list_root`)."""

    root: Path
    store: Store
    writer: IndexWriter
    root_id: tuple[int, int] | None = None
    run_id: int = 0
    rules: FileRules = field(default_factory=FileRules)

    @property
    def key(self) -> str:
        """The root as the store names it (`records.root_key`)."""
        return root_key(self.root)


@dataclass
class EncodeQueue:
    """The documents waiting for vectors, gathered several at a time until
    `chunks_per_call` chunks are pending (`full`), then taken all at once (`take`) for one
    encode call."""

    chunks_per_call: int
    pending: list[Pending] = field(default_factory=list)

    def add(self, doc: Document, chunks: list[Chunk], kind: str) -> None:
        self.pending.append((doc, chunks, kind))

    @property
    def full(self) -> bool:
        return sum(len(c) for _, c, _ in self.pending) >= self.chunks_per_call

    def take(self) -> list[Pending]:
        """Every pending document, the queue left empty."""
        taken, self.pending = self.pending, []
        return taken


__all__ = [
    "KINDS",
    "MEASURING",
    "EncodeQueue",
    "Resolution",
    "RunCounts",
    "RunProgress",
    "RunTarget",
]
