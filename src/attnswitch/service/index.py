"""Search over the server's store (`serve --db`: a data folder, an index file or a
PostgreSQL URL, opened by `indexing.location.open_store`), on a small pool of threads of its
own, each search within its request's deadline.

`SEARCH_WORKERS` threads (`SearchIndex.executor`) each make and use their own connection
to the store (sqlite3 connections belong to their thread; SQLite in WAL lets readers run
side by side, PostgreSQL serves each connection in a process of its own), so one slow
search holds one thread, never every search. A search carries its request's deadline down
into its work (`indexing.search.search(deadline=)`, `Store.deadline`): a SQLite statement is
interrupted by its progress handler, a PostgreSQL one by its statement timeout, and the
loops in Python over documents and chunks look at the clock, so a search past its deadline
stops (`StoreDeadlineError`, the service's 504) and its thread is free again at once. A
search waits for a free thread with its deadline too: one that is still waiting when its
request gives up is dropped unrun (the 504 of the request's deadline). `busy` counts the
threads at work.

Each thread's SQLite store keeps its own dense index (exact vectors or HNSW graph) loaded
and reloads it when a job or a CLI run has committed since, and the index config is
checked again then (`PRAGMA data_version` on a read-only connection of its own), so a
search always sees the committed index without rereading it per query. One copy per
thread rather than one shared: the exact vectors are below `EXACT_BELOW` rows (29 MiB at
dimension 384: at most `SEARCH_WORKERS` times that), and a saved graph is memory-mapped
read-only, its pages shared by the threads through the page cache; a graph loaded into
memory to replay writes is saved at once when no run holds the store
(`SQLiteStore._keep`), so the threads loading after that map it. Loading runs to its end
whatever the request's deadline (every later search reuses it). A PostgreSQL store is
searched on its server (pgvector's index); its config and chunk count are read again per
search (other processes and nodes may write to it at any time).

Queries must be encoded by the index's model: a store whose recorded model fingerprint is
not the service's is refused (409), as the CLI's search refuses it.

A store that is unusable (a SQLite file corrupt, locked, of another schema, a vector of the
wrong length: `indexing.store_errors`; a PostgreSQL server that refuses or drops the
connection, e.g. while it restarts) answers 503 (`index_unavailable`) with what is wrong,
without the store's path or address; every search tries the store again (the thread that
met the error drops its connections), so replacing the file or restarting the server heals
the service without a restart. Embeddings never touch the store and stay up.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.service.errors import ServiceError

log = logging.getLogger("attnswitch.service")
INDEX_NAME = "the server's index"  # what answers call the index file (never its path)
CLOSE_WAIT_S = 5.0  # how long `SearchIndex.close` waits for the threads


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says the store's server cannot be reached or dropped the connection
    (`StoreConnectError` when connecting; psycopg's operational and interface errors on a
    connection that was open: a server restarting, a network cut)."""
    from attnswitch.indexing.store_errors import StoreConnectError

    if isinstance(exc, StoreConnectError):
        return True
    psycopg = sys.modules.get("psycopg")  # imported only by a PostgreSQL store
    return psycopg is not None and isinstance(
        exc, (psycopg.OperationalError, psycopg.InterfaceError)
    )


@contextlib.contextmanager
def store_errors_unavailable() -> Iterator[None]:
    """Turn an error about the store (its file: `indexing.store_errors`; its server: a lost
    connection) into 503 `index_unavailable`, saying what is wrong without the store's path
    or address (that goes to the log)."""
    from attnswitch.indexing.store_errors import describe, is_store_error

    try:
        yield
    except Exception as exc:
        if connection_lost(exc):
            log.warning(
                "attnswitch serve: the store's server: %s: %s",
                type(exc).__name__,
                str(exc).strip().splitlines()[0] if str(exc).strip() else "",
            )
            raise ServiceError(
                503,
                "index: expected the PostgreSQL server to answer, got a "
                "refused or lost connection; retry shortly",
                code="index_unavailable",
                headers={"Retry-After": "1"},
            ) from None
        if not is_store_error(exc):
            raise
        raise ServiceError(
            503, f"index: {describe(exc, INDEX_NAME)}", code="index_unavailable"
        ) from None


# Threads that search the store side by side, each with its own connection: a slow search
# holds one of them, at most until its deadline, and the others answer meanwhile.
SEARCH_WORKERS = 4


class _Connections:
    """One search thread's connections to the store and what it knows of the index."""

    def __init__(self) -> None:
        self.store: Any = None
        self.watch: sqlite3.Connection | None = None  # SQLite: `PRAGMA data_version`
        self.version: int | None = None
        self.count = 0

    def close(self) -> None:
        for conn in (self.store, self.watch):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        self.store = self.watch = self.version = None
        self.count = 0


class SearchIndex:
    """The store at `location` (`ServiceConfig.store_location`: a SQLite file, or a
    PostgreSQL URL), searched on `workers` threads of its own (`executor`; see the module
    doc). `fingerprint` is the service model's fingerprint (`indexing.config.
    model_fingerprint`), set once the model loaded. `jobs`: whether this server indexes
    folders (`--jobs-root`), which decides what an answer on an empty index tells the user
    to do."""

    def __init__(
        self, location: str | os.PathLike, jobs: bool = False, workers: int = SEARCH_WORKERS
    ):
        from attnswitch.indexing.location import is_url

        self.location = location
        self.path = None if is_url(location) else Path(location)  # a SQLite store's file
        self.jobs = jobs
        self.fingerprint: str | None = None
        self.workers = workers
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="attnswitch-search")
        self._local = threading.local()  # each thread's `_Connections`
        self._busy = 0
        self._busy_lock = threading.Lock()

    @property
    def busy(self) -> int:
        """How many of the threads are searching (or reading a view) now."""
        return self._busy

    def search(
        self,
        vector: np.ndarray | None,
        k: int,
        text: str | None = None,
        mode: str = "dense",
        ef: int | None = None,
        where: Any = None,
        deadline: float | None = None,
    ) -> tuple[list[Any], int | None]:
        """The `k` best `indexing.search.Hit`s for a query's vector and text in `mode`, with
        ANN beam `ef`, among the documents the filter `where` keeps
        (`indexing.search.search`; runs on `executor`); and, when a filter gave no hit,
        how many documents it keeps (else None). `deadline` (a `time.monotonic()` time):
        the search stops by then with `StoreDeadlineError`, also before it starts when
        it waited for a thread past it."""
        from attnswitch.indexing.search import on_time, search

        with self._working(), self._unavailable_on_store_errors():
            on_time(deadline)
            store = self._current(deadline)
            with store.deadline(deadline):
                hits = search(
                    store, vector, k, text=text, mode=mode, ef=ef, where=where, deadline=deadline
                )
                kept = None if where is None or hits else len(store.allowed_documents(where))
            return hits, kept

    def view(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(store, *args)` on the index (read-only views, `overview`; runs on
        `executor`), or None when there is no index file yet."""
        with self._working(), self._unavailable_on_store_errors():
            store = self._open()
            return None if store is None else fn(store, *args)

    def stored_config(self) -> Any:
        """The index's recorded `IndexConfig`, or None when there is no index yet or its
        file is unusable (then logged: the service starts with its own defaults and search
        answers 503 until the file is fixed)."""
        from attnswitch.indexing.config import stored_config
        from attnswitch.indexing.location import open_store
        from attnswitch.indexing.store_errors import describe, is_store_error

        if self.path is not None and not self.path.is_file():
            return None
        try:
            with open_store(self.location) as store:
                return stored_config(store)
        except Exception as exc:
            if connection_lost(exc):
                log.warning(
                    "attnswitch serve: %s; search answers 503 until it answers", str(exc).strip()
                )
                return None
            if not is_store_error(exc):
                raise
            log.warning(
                "attnswitch serve: %s; search answers 503 until it is fixed",
                describe(exc, str(self.path)),
            )
            return None

    @contextlib.contextmanager
    def _working(self) -> Iterator[None]:
        """Count this thread in `busy` for the block."""
        with self._busy_lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._busy_lock:
                self._busy -= 1

    @contextlib.contextmanager
    def _unavailable_on_store_errors(self) -> Iterator[None]:
        """Store errors become 503 `index_unavailable` (this thread's connections are
        dropped, and its next search reopens the store)."""
        try:
            with store_errors_unavailable():
                yield
        except ServiceError as exc:
            if exc.code == "index_unavailable":
                self._forget()
            raise

    def _connections(self) -> _Connections:
        """This thread's connections (made on its first use)."""
        conns = getattr(self._local, "connections", None)
        if conns is None:
            conns = self._local.connections = _Connections()
        return conns

    def _current(self, deadline: float | None = None) -> Any:
        """This thread's open store, its config checked again when the index changed
        (`deadline` on the reads); 409 when there is no index or it is empty."""
        from attnswitch.indexing.config import stored_config

        if self._open() is None:
            raise self._empty("no index yet")
        conns = self._connections()
        store = conns.store
        with store.deadline(deadline):
            # SQLite: changed since the last search? Another store: always read again.
            version = (
                None
                if conns.watch is None
                else conns.watch.execute("PRAGMA data_version").fetchone()[0]
            )
            if conns.version is None or version is None or version != conns.version:
                config = stored_config(store)
                if (
                    config is not None
                    and self.fingerprint is not None
                    and (config.model_fingerprint != self.fingerprint)
                ):
                    raise ServiceError(
                        409,
                        f"index: expected vectors of the served model, "
                        f"got {config.describe()}; serve with that model "
                        "(--model) or use another --db",
                        code="index_model_mismatch",
                    )
                conns.version, conns.count = version, store.count()
        if conns.count == 0:
            raise self._empty("an empty index")
        return store

    def _open(self) -> Any:
        """This thread's open store (opened on first use), or None when there is no index
        file."""
        from attnswitch.indexing.location import open_store

        conns = self._connections()
        if conns.store is None:
            if self.path is not None and not self.path.is_file():
                return None
            conns.store = open_store(self.location)
            if hasattr(conns.store, "reconnect_for_s"):  # 503 at once, not a held request
                conns.store.reconnect_for_s = 0.0
            if self.path is not None:
                conns.watch = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        return conns.store

    def _empty(self, got: str) -> ServiceError:
        """The 409 for an index with nothing to search, saying how to fill it on this server:
        a job when jobs are on, else the CLI (the path of the server's --db is not shown)."""
        how = (
            "POST /v1/jobs to index a folder first"
            if self.jobs
            else "index a folder with `attnswitch run FOLDER` (with this server's --db, if "
            "it was given one), or serve with --jobs-root to index over HTTP"
        )
        return ServiceError(
            409, f"index: expected documents to search, got {got}: {how}", code="index_empty"
        )

    def _forget(self) -> None:
        """Close this thread's connections and drop its loaded vectors (its next search
        reopens)."""
        self._connections().close()

    def close(self) -> None:
        """Close every thread's connections, each on its thread (sqlite3 refuses another),
        then stop the threads. A barrier holds each thread to one `_forget`, so that every
        thread gets one; a thread still busy after `CLOSE_WAIT_S` keeps its connections
        until the process ends."""
        barrier = threading.Barrier(self.workers)

        def forget() -> None:
            self._forget()
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(CLOSE_WAIT_S)

        try:
            futures = [self.executor.submit(forget) for _ in range(self.workers)]
            concurrent.futures.wait(futures, timeout=2 * CLOSE_WAIT_S)
        except RuntimeError:  # shut down already
            pass
        self.executor.shutdown(wait=False, cancel_futures=True)
