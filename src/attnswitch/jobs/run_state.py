"""The explicit state of a run (`run.RunJob`): what `resolve` chose (`Resolution`, set once
before anything is read) and what a progress display reads (`RunProgress`, updated as the
run goes)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from attnswitch.indexing.config import IndexConfig


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
    "reading", "loading model", "encoding", and "done"."""

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

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.encode_s if self.encode_s > 0 and self.tokens else 0.0


__all__ = ["MEASURING", "Resolution", "RunProgress"]
