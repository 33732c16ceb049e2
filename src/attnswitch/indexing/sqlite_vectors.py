"""Reading one kind of vector of a SQLite store's chunks (`VectorColumn`: the full vectors,
or the quick vectors of the chunks without a full one, `quick_graph`): of given chunk ids,
or all of them in batches, by id, as (chunk ids int64 `[N]`, float32 `[N, dim]`); and a set
of them read as an HNSW graph of it reads its vectors (`VectorSet`, `ann.GraphStore`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from attnswitch.indexing.store_base import unpack_vectors

IDS_PER_STATEMENT = 500  # bound parameters of one `id IN (...)`
BATCH = 65536  # rows read at once when all are read


@dataclass(frozen=True)
class VectorColumn:
    """`column` of the chunks that meet `condition` (SQL over the chunks' columns)."""

    column: str
    condition: str

    def of(
        self, conn: sqlite3.Connection, ids: Iterable[int], dim: int, where: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of those of chunk ids `ids` that meet the condition, by id (`dim`
        and `where`, the file, name a stored vector of another length)."""
        wanted = sorted({int(i) for i in ids})
        found: list[tuple[int, bytes]] = []
        for start in range(0, len(wanted), IDS_PER_STATEMENT):
            part = wanted[start : start + IDS_PER_STATEMENT]
            found += conn.execute(
                f"SELECT id, {self.column} FROM chunks WHERE id IN "
                f"({', '.join('?' * len(part))}) AND {self.condition} ORDER BY id",
                part,
            ).fetchall()
        return unpack_vectors(found, dim, where)

    def batches(
        self, conn: sqlite3.Connection, dim: int, where: Any, batch: int = BATCH
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """All the vectors that meet the condition, in batches of `batch` rows, by id."""
        last = -1
        while True:
            rows = conn.execute(
                f"SELECT id, {self.column} FROM chunks WHERE id > ? AND {self.condition} "
                "ORDER BY id LIMIT ?",
                (last, batch),
            ).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield unpack_vectors(rows, dim, where)


FULL = VectorColumn("vector", "vector IS NOT NULL")
# The full vectors in no segment of their graph yet (`sqlite_segments`: the tail).
FULL_TAIL = "vector IS NOT NULL AND full_gen IS NULL"
# The quick vectors of the chunks with no full vector yet (`quick_graph.QuickVectors`).
QUICK_ONLY = VectorColumn("quick", "vector IS NULL AND quick IS NOT NULL")


class VectorSource(Protocol):
    """What a `VectorSet` reads of `store_sqlite.SQLiteStore`."""

    path: Path
    store_id: str | None
    _conn: sqlite3.Connection

    def reading(self) -> contextlib.AbstractContextManager[None]: ...
    def _log_position(self) -> int: ...


class VectorSet:
    """The vectors of `column` (its kind and condition) of one SQLite store, read as
    `ann.GraphStore` reads the set its graph holds: ids int64 `[N]` with float32 vectors
    `[N, dim]`, by id, `batch` rows at a time when all are read. `count` and
    `max_chunk_id` are kept per log position (every change to a set moves it). A set's
    own class names its `dim`, its graph's file (`graph_suffix`) and which logged chunks
    concern it (`chunk_log_ids`)."""

    first_id = 1  # the lowest chunk id the set may hold
    batch = BATCH

    def __init__(self, store: VectorSource, column: VectorColumn) -> None:
        self.store = store
        self._column = column
        self._counted: tuple[int, int, int] | None = None  # (log position, count, largest)

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def store_id(self) -> str | None:
        return self.store.store_id

    @property
    def dim(self) -> int | None:
        raise NotImplementedError

    def reading(self) -> contextlib.AbstractContextManager[None]:
        return self.store.reading()

    def log_position(self) -> int:
        return self.store._log_position()

    def _state(self) -> tuple[int, int]:
        """(vectors in the set, largest id or 0): one scan of the partial index its
        condition names, once per log position."""
        with self.store.reading():
            position = self.store._log_position()
            if self._counted is None or self._counted[0] != position:
                ((n, top),) = self.store._conn.execute(
                    f"SELECT COUNT(*), COALESCE(MAX(id), 0) FROM chunks "
                    f"WHERE {self._column.condition}"
                ).fetchall()
                self._counted = (position, int(n), int(top))
            return self._counted[1], self._counted[2]

    def count(self) -> int:
        """How many chunks are in the set."""
        return self._state()[0]

    def max_chunk_id(self) -> int:
        """The largest id in the set (0 when empty)."""
        return self._state()[1]

    def chunk_log_state(self) -> tuple[int | None, int, int]:
        """(first logged position or None, last position ever logged, chunks in the set)."""
        ((first,),) = self.store._conn.execute("SELECT MIN(seq) FROM chunk_log").fetchall()
        return first, self.store._log_position(), self.count()

    def vectors_of(self, ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of those of these chunk ids that are in the set, by id."""
        return self._column.of(self.store._conn, ids, self.dim or 0, self.path)

    def iter_vectors(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The whole set in batches of `batch` rows, by id."""
        return self._column.batches(self.store._conn, self.dim or 0, self.path, self.batch)

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """The whole set at once (for an exact search of a small one)."""
        return joined(self.iter_vectors(), self.dim or 0)


def joined(
    parts: Iterable[tuple[np.ndarray, np.ndarray]], dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """Batches of (ids `[n]`, vectors `[n, dim]`) as one pair (empty ones of `dim`)."""
    got = list(parts)
    if not got:
        return np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
    return np.concatenate([p[0] for p in got]), np.concatenate([p[1] for p in got])
