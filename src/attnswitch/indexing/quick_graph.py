"""The quick vectors of a SQLite store as a vector set of their own (`QuickVectors`): what
`ann.HnswIndex` builds, replays and saves its second graph from, and what the store's quick
list searches (docs/architecture.md, "Two passes").

The set is the chunks that have a quick vector and no full one (`QUICK_ONLY`): the quick
pass adds them, the full pass and query-time encoding take each out as its full vector is
written. Both kinds of change are in the store's chunk log (the triggers log every insert,
delete and change of either vector), so the graph of this set is kept in step exactly as the
full vectors' graph is, from the same log: saved beside the database as `<db>.quick.hnsw`
(`GRAPH_SUFFIX`) with its JSON header, replayed on open, rebuilt when it does not match.
Its count and largest id are read from the partial index of these chunks only
(`sqlite_schema.QUICK_ONLY_INDEX`), so opening the graph reads no vector.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from attnswitch.indexing.sqlite_vectors import BATCH
from attnswitch.indexing.sqlite_vectors import QUICK_ONLY as QUICK_VECTORS

if TYPE_CHECKING:
    import sqlite3

# The chunks of the set: a quick vector, and no full vector yet.
QUICK_ONLY = QUICK_VECTORS.condition
GRAPH_SUFFIX = ".quick.hnsw"


class QuickSource(Protocol):
    """What `QuickVectors` reads of `store_sqlite.SQLiteStore`."""

    path: Path
    store_id: str | None
    _conn: sqlite3.Connection

    def reading(self) -> contextlib.AbstractContextManager[None]: ...
    def quick_model(self) -> dict[str, Any] | None: ...
    def _log_position(self) -> int: ...
    def chunk_log_ids(self, after: int, upto: int) -> list[int]: ...


class QuickVectors:
    """The quick-only chunks of one SQLite store, read as `ann.GraphStore` reads a store's
    full vectors: ids int64 `[N]` with float32 vectors `[N, dim]` (the static model's
    dimension), by id. `count` is kept per log position (every change to the set moves it)."""

    graph_suffix = GRAPH_SUFFIX

    def __init__(self, store: QuickSource) -> None:
        self.store = store
        self._counted: tuple[int, int] | None = None  # (log position, chunks in the set)

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def store_id(self) -> str | None:
        return self.store.store_id

    @property
    def dim(self) -> int | None:
        model = self.store.quick_model()
        return None if model is None else int(model["dim"])

    def reading(self) -> contextlib.AbstractContextManager[None]:
        return self.store.reading()

    def count(self) -> int:
        """How many chunks are in the set (a scan of its partial index), once per log
        position."""
        with self.store.reading():
            position = self.store._log_position()
            if self._counted is None or self._counted[0] != position:
                ((n,),) = self.store._conn.execute(
                    f"SELECT COUNT(*) FROM chunks WHERE {QUICK_ONLY}"
                ).fetchall()
                self._counted = (position, int(n))
            return self._counted[1]

    def chunk_log_state(self) -> tuple[int | None, int, int]:
        """(first logged position or None, last position ever logged, chunks in the set)."""
        ((first,),) = self.store._conn.execute("SELECT MIN(seq) FROM chunk_log").fetchall()
        return first, self.store._log_position(), self.count()

    def chunk_log_ids(self, after: int, upto: int) -> list[int]:
        return self.store.chunk_log_ids(after, upto)

    def max_chunk_id(self) -> int:
        """The largest id in the set (0 when empty): one descent of its partial index."""
        ((top,),) = self.store._conn.execute(
            f"SELECT COALESCE(MAX(id), 0) FROM chunks WHERE {QUICK_ONLY}"
        ).fetchall()
        return int(top)

    def vectors_of(self, ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """(ids, quick vectors) of those of these chunk ids that are in the set, by id."""
        return QUICK_VECTORS.of(self.store._conn, ids, self.dim or 0, self.path)

    def iter_vectors(self, batch: int = BATCH) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The whole set in batches of `batch` rows, by id."""
        return QUICK_VECTORS.batches(self.store._conn, self.dim or 0, self.path, batch)

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """The whole set at once (for an exact search of a small one)."""
        parts = list(self.iter_vectors())
        if not parts:
            return np.zeros(0, np.int64), np.zeros((0, self.dim or 0), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


__all__ = ["GRAPH_SUFFIX", "QUICK_ONLY", "QuickVectors"]
