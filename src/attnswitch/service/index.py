"""Search over the data folder's index, on a thread of its own.

The SQLite connection is made and used on one worker thread (sqlite3 connections belong to
their thread); the store keeps its dense index (exact vectors or HNSW graph) loaded and
reloads it when a job or a CLI run has committed since, and the index config is checked
again then (`PRAGMA data_version` on a read-only connection of its own), so a search
always sees the committed index without rereading it per query.

Queries must be encoded by the index's model: a store whose recorded model fingerprint is
not the service's is refused (409), as the CLI's search refuses it.
"""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.service.errors import ServiceError


class SearchIndex:
    """The index at `path`, searched on its own thread. `fingerprint` is the service
    model's fingerprint (`pipeline.config.model_fingerprint`), set once the model loaded."""

    def __init__(self, path: Path):
        self.path = path
        self.fingerprint: str | None = None
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="attnswitch-search")
        self._store: Any = None
        self._watch: sqlite3.Connection | None = None
        self._count = 0
        self._version: int | None = None

    def search(self, vector: np.ndarray | None, k: int, text: str | None = None,
               mode: str = "dense") -> list[Any]:
        """The `k` best `pipeline.search.Hit`s for a query's vector and text in `mode`
        (`pipeline.search.search`; runs on `executor`)."""
        from attnswitch.pipeline.search import search

        return search(self._current(), vector, k, text=text, mode=mode)

    def _current(self) -> Any:
        from attnswitch.pipeline.config import stored_config
        from attnswitch.pipeline.store import SQLiteStore

        if self._store is None:
            if not self.path.is_file():
                raise ServiceError(409, "index: expected documents to search, got no index "
                                   "yet: POST /v1/jobs to index a folder first",
                                   code="index_empty")
            self._store = SQLiteStore(self.path)
            self._watch = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        version = self._watch.execute("PRAGMA data_version").fetchone()[0]
        if self._version is None or version != self._version:
            config = stored_config(self._store)
            if config is not None and self.fingerprint is not None and (
                    config.model_fingerprint != self.fingerprint):
                raise ServiceError(409, f"index: expected vectors of the served model, got "
                                   f"{config.describe()}; serve with that model (--model) or "
                                   "use another --db", code="index_model_mismatch")
            self._version, self._count = version, self._store.count()
        if self._count == 0:
            raise ServiceError(409, "index: expected documents to search, got an empty index: "
                               "POST /v1/jobs to index a folder first", code="index_empty")
        return self._store

    def close(self) -> None:
        def close_store() -> None:
            if self._store is not None:
                self._store.close()
                self._store = None
            if self._watch is not None:
                self._watch.close()
                self._watch = None

        try:
            self.executor.submit(close_store).result(timeout=5)
        except Exception:
            pass
        self.executor.shutdown(wait=False)
