"""Search over the data folder's index, on a thread of its own.

The SQLite connection is made and used on one worker thread (sqlite3 connections belong to
their thread); the store keeps its dense index (exact vectors or HNSW graph) loaded and
reloads it when a job or a CLI run has committed since, and the index config is checked
again then (`PRAGMA data_version` on a read-only connection of its own), so a search
always sees the committed index without rereading it per query.

Queries must be encoded by the index's model: a store whose recorded model fingerprint is
not the service's is refused (409), as the CLI's search refuses it.

A store whose file is unusable (corrupt, locked, another schema, a vector of the wrong
length: `pipeline.store_errors`) answers 503 (`index_unavailable`) with what is wrong,
without the file's path; every search tries the file again, so replacing it heals the
service without a restart. Embeddings never touch the store and stay up.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.service.errors import ServiceError

log = logging.getLogger("attnswitch.service")
INDEX_NAME = "the server's index"  # what answers call the index file (never its path)


@contextlib.contextmanager
def store_errors_unavailable() -> Iterator[None]:
    """Turn an error about the store's file (`pipeline.store_errors`) into 503
    `index_unavailable`, saying what is wrong without the file's path."""
    from attnswitch.pipeline.store_errors import describe, is_store_error

    try:
        yield
    except Exception as exc:
        if not is_store_error(exc):
            raise
        raise ServiceError(503, f"index: {describe(exc, INDEX_NAME)}",
                           code="index_unavailable") from None


class SearchIndex:
    """The index at `path`, searched on its own thread. `fingerprint` is the service
    model's fingerprint (`pipeline.config.model_fingerprint`), set once the model loaded.
    `jobs`: whether this server indexes folders (`--jobs-root`), which decides what an
    answer on an empty index tells the user to do."""

    def __init__(self, path: Path, jobs: bool = False):
        self.path = path
        self.jobs = jobs
        self.fingerprint: str | None = None
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="attnswitch-search")
        self._store: Any = None
        self._watch: sqlite3.Connection | None = None
        self._count = 0
        self._version: int | None = None

    def search(self, vector: np.ndarray | None, k: int, text: str | None = None,
               mode: str = "dense", ef: int | None = None) -> list[Any]:
        """The `k` best `pipeline.search.Hit`s for a query's vector and text in `mode`, with
        ANN beam `ef` (`pipeline.search.search`; runs on `executor`)."""
        from attnswitch.pipeline.search import search

        with self._unavailable_on_store_errors():
            return search(self._current(), vector, k, text=text, mode=mode, ef=ef)

    def view(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(store, *args)` on the index (read-only views, `overview`; runs on
        `executor`), or None when there is no index file yet."""
        with self._unavailable_on_store_errors():
            store = self._open()
            return None if store is None else fn(store, *args)

    def stored_config(self) -> Any:
        """The index's recorded `IndexConfig`, or None when there is no index yet or its
        file is unusable (then logged: the service starts with its own defaults and search
        answers 503 until the file is fixed)."""
        from attnswitch.pipeline.config import stored_config
        from attnswitch.pipeline.store import SQLiteStore
        from attnswitch.pipeline.store_errors import describe, is_store_error

        if not self.path.is_file():
            return None
        try:
            with SQLiteStore(self.path) as store:
                return stored_config(store)
        except Exception as exc:
            if not is_store_error(exc):
                raise
            log.warning("attnswitch serve: %s; search answers 503 until it is fixed",
                        describe(exc, str(self.path)))
            return None

    @contextlib.contextmanager
    def _unavailable_on_store_errors(self) -> Iterator[None]:
        """Store errors become 503 `index_unavailable` (on the search thread: the
        connections are dropped, and the next search reopens the file)."""
        try:
            with store_errors_unavailable():
                yield
        except ServiceError as exc:
            if exc.code == "index_unavailable":
                self._forget()
            raise

    def _current(self) -> Any:
        from attnswitch.pipeline.config import stored_config

        if self._open() is None:
            raise self._empty("no index yet")
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
            raise self._empty("an empty index")
        return self._store

    def _open(self) -> Any:
        """The open store (opened on first use), or None when there is no index file."""
        from attnswitch.pipeline.store import SQLiteStore

        if self._store is None:
            if not self.path.is_file():
                return None
            self._store = SQLiteStore(self.path)
            self._watch = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        return self._store

    def _empty(self, got: str) -> ServiceError:
        """The 409 for an index with nothing to search, saying how to fill it on this server:
        a job when jobs are on, else the CLI (the path of the server's --db is not shown)."""
        how = ("POST /v1/jobs to index a folder first" if self.jobs else
               "index a folder with `attnswitch run FOLDER` (with this server's --db, if "
               "it was given one), or serve with --jobs-root to index over HTTP")
        return ServiceError(409, f"index: expected documents to search, got {got}: {how}",
                            code="index_empty")

    def _forget(self) -> None:
        """Close the connections and drop the loaded vectors (the next search reopens)."""
        for conn in (self._store, self._watch):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        self._store = self._watch = self._index = self._version = None

    def close(self) -> None:
        try:
            self.executor.submit(self._forget).result(timeout=5)
        except Exception:
            pass
        self.executor.shutdown(wait=False)
