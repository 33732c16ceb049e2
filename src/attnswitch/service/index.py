"""Search over the server's index (`serve --db`: a data folder, an index file or a
PostgreSQL URL, opened by `indexing.index.Index.open`), on a small pool of threads of its
own, each search within its request's deadline.

`SEARCH_WORKERS` threads (`SearchIndex.executor`) each open and use their own `Index`
(sqlite3 connections belong to their thread; SQLite in WAL lets readers run side by side,
PostgreSQL serves each connection in a process of its own), so one slow search holds one
thread, never every search. A search is the index's `Searcher` with the query's vector the
service encoded, and carries its request's deadline down into its work
(`Searcher.search(deadline=)`, `Store.deadline`): a SQLite statement is
interrupted by its progress handler, a PostgreSQL one by its statement timeout, and the
loops in Python over documents and chunks look at the clock, so a search past its deadline
stops (`StoreDeadlineError`, the service's 504) and its thread is free again at once. A
search waits for a free thread with its deadline too: one that is still waiting when its
request gives up is dropped unrun (the 504 of the request's deadline). `busy` counts the
threads at work.

Each thread's SQLite store keeps its own dense index (exact vectors or HNSW graph) loaded
and reloads it when a job or a CLI run has committed since, and the index config and
chunk count are read again then (`Index.refresh`: `PRAGMA data_version` on the thread's
own connection, which only reads), so a search always sees the committed index without
rereading it per query. One copy per
thread rather than one shared: the exact vectors are below `EXACT_BELOW` rows (29 MiB at
dimension 384: at most `SEARCH_WORKERS` times that), and a saved graph is memory-mapped
read-only, its pages shared by the threads through the page cache; a graph loaded into
memory to replay writes is saved at once when no run holds the store
(`SQLiteStore._keep`), so the threads loading after that map it. Loading runs to its end
whatever the request's deadline (every later search reuses it). A PostgreSQL store is
searched on its server (pgvector's index); its config and chunk count are read again per
search (other processes and nodes may write to it at any time). The page's views
(`overview`) run on the same threads, on the same `Index`.

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
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnswitch.service.errors import ServiceError

if TYPE_CHECKING:
    from attnswitch.indexing.index import Index
    from attnswitch.indexing.requests import SearchRequest
    from attnswitch.indexing.searcher import SearchResult

log = logging.getLogger("attnswitch.service")
INDEX_NAME = "the server's index"  # what answers call the index file (never its path)
CLOSE_WAIT_S = 5.0  # how long `SearchIndex.close` waits for the threads


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says the store's server cannot be reached or dropped the connection
    (`store_errors.connection_lost`)."""
    from attnswitch.indexing.store_errors import connection_lost as lost

    return lost(exc)


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


class SearchIndex:
    """The index at `location` (`ServiceConfig.store_location`: a SQLite file, or a
    PostgreSQL URL), searched on `workers` threads of its own (`executor`; see the module
    doc). `fingerprint` is the service model's fingerprint (`indexing.config.
    model_fingerprint`), set once the model loaded. `jobs`: whether this server indexes
    folders (`--jobs-root`), which decides what an answer on an empty index tells the user
    to do. `fill`: the chunks without a full vector one search may encode (`--query-fill`;
    None: `query_fill.QUERY_FILL`)."""

    def __init__(
        self,
        location: str | Path,
        jobs: bool = False,
        workers: int = SEARCH_WORKERS,
        fill: int | None = None,
    ):
        self.location = location
        self.jobs = jobs
        self.fill = fill
        self.fingerprint: str | None = None
        self.workers = workers
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="attnswitch-search")
        self._local = threading.local()  # each thread's open `Index` (`index`), or none
        self._busy = 0
        self._busy_lock = threading.Lock()

    @property
    def busy(self) -> int:
        """How many of the threads are searching (or reading a view) now."""
        return self._busy

    def search(
        self,
        request: SearchRequest,
        vector: np.ndarray | None = None,
        deadline: float | None = None,
    ) -> SearchResult:
        """The answer to `request` (`Searcher.search`; runs on `executor`) with the
        query's `vector` when its mode needs one. `deadline` (a `time.monotonic()` time):
        the search stops by then with `StoreDeadlineError`, also before it starts when
        it waited for a thread past it."""
        from attnswitch.indexing.search import on_time

        with self._working(), self._unavailable_on_store_errors():
            on_time(deadline)
            index = self._current(deadline)
            return index.searcher(fill=self.fill).search(request, vector=vector, deadline=deadline)

    def view(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(index, *args)` on this thread's `Index` (read-only views, `overview`; runs on
        `executor`), or None when there is no index file yet."""
        with self._working(), self._unavailable_on_store_errors():
            index = self._open()
            return None if index is None else fn(index, *args)

    def stored_config(self) -> Any:
        """The index's recorded `IndexConfig`, or None when there is no index yet or it is
        unusable (then logged: the service starts with its own defaults and search answers
        503 until it is fixed)."""
        from attnswitch.indexing.index import Index, IndexMissingError
        from attnswitch.indexing.store_errors import describe, is_store_error

        try:
            with Index.open(self.location) as index:
                return index.config
        except IndexMissingError:
            return None
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
                describe(exc, str(self.location) if isinstance(self.location, Path) else ""),
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
        """Store errors become 503 `index_unavailable` (this thread's index is closed, and
        its next search opens it again)."""
        try:
            with store_errors_unavailable():
                yield
        except ServiceError as exc:
            if exc.code == "index_unavailable":
                self._forget()
            raise

    def _current(self, deadline: float | None = None) -> Index:
        """This thread's open index, its config and count read again when it changed
        (`Index.refresh`; `deadline` on the reads); 409 when there is no index, it is
        empty, or it holds another model's vectors."""
        from attnswitch.indexing.index import IndexEmptyError

        index = self._open()
        if index is None:
            raise self._empty("no index yet")
        with index.deadline(deadline):
            index.refresh()
            config = index.config
            if (
                config is not None
                and self.fingerprint is not None
                and config.model_fingerprint != self.fingerprint
            ):
                raise ServiceError(
                    409,
                    f"index: expected vectors of the served model, "
                    f"got {config.describe()}; serve with that model "
                    "(--model) or use another --db",
                    code="index_model_mismatch",
                )
            try:
                index.check_searchable()
            except IndexEmptyError:
                raise self._empty("an empty index") from None
        return index

    def _open(self) -> Index | None:
        """This thread's open index (opened on first use; a PostgreSQL one answers 503 at
        once on a lost connection rather than hold the request), or None when there is no
        index file."""
        from attnswitch.indexing.index import Index, IndexMissingError

        index = getattr(self._local, "index", None)
        if index is None:
            try:
                index = Index.open(self.location, reconnect_for_s=0.0)
            except IndexMissingError:
                return None
            self._local.index = index
        return index

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
        """Close this thread's index and drop its loaded vectors (its next search opens it
        again)."""
        index, self._local.index = getattr(self._local, "index", None), None
        if index is not None:
            with contextlib.suppress(Exception):
                index.close()

    def close(self) -> None:
        """Close every thread's index, each on its thread (sqlite3 refuses another),
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
