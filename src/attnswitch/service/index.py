"""Search over the server's store (`serve --db`: a data folder, an index file or a
PostgreSQL URL, opened by `index.location.open_store`), on a thread of its own.

The store's connection is made and used on one worker thread (sqlite3 connections belong
to their thread). A SQLite store keeps its dense index (exact vectors or HNSW graph) loaded
and reloads it when a job or a CLI run has committed since, and the index config is checked
again then (`PRAGMA data_version` on a read-only connection of its own), so a search
always sees the committed index without rereading it per query. A PostgreSQL store is
searched on its server (pgvector's index); its config and chunk count are read again per
search (other processes and nodes may write to it at any time).

Queries must be encoded by the index's model: a store whose recorded model fingerprint is
not the service's is refused (409), as the CLI's search refuses it.

A store that is unusable (a SQLite file corrupt, locked, of another schema, a vector of the
wrong length: `index.store_errors`; a PostgreSQL server that refuses or drops the
connection, e.g. while it restarts) answers 503 (`index_unavailable`) with what is wrong,
without the store's path or address; every search tries the store again, so replacing the
file or restarting the server heals the service without a restart. Embeddings never touch
the store and stay up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.service.errors import ServiceError

log = logging.getLogger("attnswitch.service")
INDEX_NAME = "the server's index"  # what answers call the index file (never its path)


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says the store's server cannot be reached or dropped the connection
    (`StoreConnectError` when connecting; psycopg's operational and interface errors on a
    connection that was open: a server restarting, a network cut)."""
    from attnswitch.index.store_errors import StoreConnectError

    if isinstance(exc, StoreConnectError):
        return True
    psycopg = sys.modules.get("psycopg")  # imported only by a PostgreSQL store
    return psycopg is not None and isinstance(exc, (psycopg.OperationalError,
                                                    psycopg.InterfaceError))


@contextlib.contextmanager
def store_errors_unavailable() -> Iterator[None]:
    """Turn an error about the store (its file: `index.store_errors`; its server: a lost
    connection) into 503 `index_unavailable`, saying what is wrong without the store's path
    or address (that goes to the log)."""
    from attnswitch.index.store_errors import describe, is_store_error

    try:
        yield
    except Exception as exc:
        if connection_lost(exc):
            log.warning("attnswitch serve: the store's server: %s: %s", type(exc).__name__,
                        str(exc).strip().splitlines()[0] if str(exc).strip() else "")
            raise ServiceError(503, "index: expected the PostgreSQL server to answer, got a "
                               "refused or lost connection; retry shortly",
                               code="index_unavailable",
                               headers={"Retry-After": "1"}) from None
        if not is_store_error(exc):
            raise
        raise ServiceError(503, f"index: {describe(exc, INDEX_NAME)}",
                           code="index_unavailable") from None


class SearchIndex:
    """The store at `location` (`ServiceConfig.store_location`: a SQLite file, or a
    PostgreSQL URL), searched on its own thread. `fingerprint` is the service model's
    fingerprint (`index.config.model_fingerprint`), set once the model loaded. `jobs`:
    whether this server indexes folders (`--jobs-root`), which decides what an answer on an
    empty index tells the user to do."""

    def __init__(self, location: str | os.PathLike, jobs: bool = False):
        from attnswitch.index.location import is_url

        self.location = location
        self.path = None if is_url(location) else Path(location)  # a SQLite store's file
        self.jobs = jobs
        self.fingerprint: str | None = None
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="attnswitch-search")
        self._store: Any = None
        self._watch: sqlite3.Connection | None = None
        self._count = 0
        self._version: int | None = None

    def search(self, vector: np.ndarray | None, k: int, text: str | None = None,
               mode: str = "dense", ef: int | None = None,
               where: Any = None) -> tuple[list[Any], int | None]:
        """The `k` best `index.search.Hit`s for a query's vector and text in `mode`, with
        ANN beam `ef`, among the documents the filter `where` keeps
        (`index.search.search`; runs on `executor`); and, when a filter gave no hit,
        how many documents it keeps (else None)."""
        from attnswitch.index.search import search

        with self._unavailable_on_store_errors():
            store = self._current()
            hits = search(store, vector, k, text=text, mode=mode, ef=ef, where=where)
            kept = None if where is None or hits else len(store.allowed_documents(where))
            return hits, kept

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
        from attnswitch.index.config import stored_config
        from attnswitch.index.location import open_store
        from attnswitch.index.store_errors import describe, is_store_error

        if self.path is not None and not self.path.is_file():
            return None
        try:
            with open_store(self.location) as store:
                return stored_config(store)
        except Exception as exc:
            if connection_lost(exc):
                log.warning("attnswitch serve: %s; search answers 503 until it answers",
                            str(exc).strip())
                return None
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
        from attnswitch.index.config import stored_config

        if self._open() is None:
            raise self._empty("no index yet")
        # SQLite: changed since the last search? Another store: always read again.
        version = (None if self._watch is None else
                   self._watch.execute("PRAGMA data_version").fetchone()[0])
        if self._version is None or version is None or version != self._version:
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
        from attnswitch.index.location import open_store

        if self._store is None:
            if self.path is not None and not self.path.is_file():
                return None
            self._store = open_store(self.location)
            if hasattr(self._store, "reconnect_for_s"):  # 503 at once, not a held request
                self._store.reconnect_for_s = 0.0
            if self.path is not None:
                self._watch = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro",
                                              uri=True)
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
