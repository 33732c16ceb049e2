"""Reading one kind of vector of a SQLite store's chunks (`VectorColumn`: the full vectors,
or the quick vectors of the chunks without a full one, `quick_graph`): of given chunk ids,
or all of them in batches, by id, as (chunk ids int64 `[N]`, float32 `[N, dim]`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

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
