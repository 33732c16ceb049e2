"""What a search filter keeps in a SQLite store, kept between searches (`AllowedChunks`),
and the vector and keyword searches among it (`nearest_within` over the full vectors,
`FullVectors`, or the quick-only chunks' quick vectors, `QuickOnly`; `keyword_within`).

A filtered search (paths, kinds, times, a reader's permissions: `filters.SearchFilter`)
needs the ids of the documents the filter keeps and of their chunks. Reading them is a
statement over the documents, one over their chunks and a set built in Python: at 100,000
chunks with half of them allowed, many times a graph search's cost, on every search of a
reader. They change only when the store does, so a store keeps the answers of its last
`ALLOWED_KEPT` filters, each under the filter and the database's version: SQLite's
`PRAGMA data_version`, which moves when another connection commits, and this connection's
`total_changes` (its own writes). A stale answer cannot be served: any committed write,
a permission refresh included, changes the version. A store is used by one thread at a
time (`open_indexes`), so the cache takes no lock.
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from attnswitch.indexing.ann import exact_top_k
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.quick_graph import QUICK_ONLY, QuickVectors

ALLOWED_KEPT = 4  # filters per store (a server's few readers); each holds ids, few vectors
# At least this share of the chunks allowed, keyword results are filtered here from the
# plain ranking read wider; fewer, by SQL (a join per match costs about one microsecond,
# the plain ranking's price again at 100,000 chunks, where Python's filter costs nothing).
FILTER_HERE_ABOVE = 0.1


class SQLiteStore(Protocol):
    """What these searches use of `store_sqlite.SQLiteStore` (which imports this module)."""

    exact_below: int
    _conn: sqlite3.Connection

    def data_version(self) -> int | None: ...

    def allowed_documents(self, where: SearchFilter) -> list[int]: ...

    def allowed_chunks(self, where: SearchFilter) -> Allowed: ...

    def count(self) -> int: ...

    def encoded(self) -> int: ...

    def vectors_of(self, ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]: ...

    def dense(
        self, queries: np.ndarray, n: int, ef: int | None = None, where: SearchFilter | None = None
    ) -> list[list[tuple[int, float]]]: ...

    def quick(
        self,
        queries: np.ndarray,
        n: int,
        where: SearchFilter | None = None,
        ef: int | None = None,
    ) -> list[list[tuple[int, float]]]: ...

    @property
    def quick_vectors(self) -> QuickVectors: ...

    def _check_deadline(self) -> None: ...


@dataclass
class Allowed:
    """What one filter keeps at one version of the store; the chunk ids and vectors are
    read the first time a search needs them."""

    documents: str  # a JSON list of the document ids (`json_each`'s argument)
    encoded: np.ndarray | None = None  # `[N]` ascending ids of their chunks with a vector
    chunks: np.ndarray | None = None  # `[M]` ascending ids of all their chunks
    exact: tuple[np.ndarray, np.ndarray] | None = None  # (ids `[N]`, vectors `[N, dim]`)
    quick: np.ndarray | None = None  # `[K]` ascending ids of their quick-only chunks
    # (ids `[K]`, quick vectors `[K, quick dim]`)
    quick_exact: tuple[np.ndarray, np.ndarray] | None = None


class VectorSet(Protocol):
    """One kind of vector of a store as a filtered search reads it: the allowed chunks
    that have it (ids ascending, kept in the filter's `Allowed`), how many chunks have it,
    the allowed ones' vectors (kept too), and the unfiltered search of it."""

    def allowed_ids(self, allowed: Allowed) -> np.ndarray: ...
    def total(self) -> int: ...
    def allowed_vectors(
        self, allowed: Allowed, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]: ...
    def search(self, queries: np.ndarray, n: int, ef: int) -> list[list[tuple[int, float]]]: ...


class FullVectors:
    """The chunks' full vectors (`store.dense`)."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def allowed_ids(self, allowed: Allowed) -> np.ndarray:
        return encoded_chunks(self.store, allowed)

    def total(self) -> int:
        return self.store.encoded()

    def allowed_vectors(self, allowed: Allowed, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if allowed.exact is None:
            allowed.exact = self.store.vectors_of(ids.tolist())
        return allowed.exact

    def search(self, queries: np.ndarray, n: int, ef: int) -> list[list[tuple[int, float]]]:
        return self.store.dense(queries, n, ef)


class QuickOnly:
    """The quick vectors of the chunks without a full one (`store.quick`)."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def allowed_ids(self, allowed: Allowed) -> np.ndarray:
        if allowed.quick is None:
            allowed.quick = _chunk_ids(self.store, allowed, f"{QUICK_ONLY} AND ")
        return allowed.quick

    def total(self) -> int:
        return self.store.quick_vectors.count()

    def allowed_vectors(self, allowed: Allowed, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if allowed.quick_exact is None:
            allowed.quick_exact = self.store.quick_vectors.vectors_of(ids.tolist())
        return allowed.quick_exact

    def search(self, queries: np.ndarray, n: int, ef: int) -> list[list[tuple[int, float]]]:
        return self.store.quick(queries, n, None, ef)


class AllowedChunks:
    """A store's last `kept` filters' `Allowed`, least recently used dropped first."""

    def __init__(self, kept: int = ALLOWED_KEPT):
        self.kept = kept
        self._entries: OrderedDict[tuple[Any, ...], Allowed] = OrderedDict()

    def of(self, store: SQLiteStore, where: SearchFilter) -> Allowed:
        """What `where` keeps in `store` now: from the cache when nothing was committed
        since it was read."""
        key = (where, store.data_version(), store._conn.total_changes)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        found = Allowed(json.dumps(store.allowed_documents(where)))
        self._entries[key] = found
        while len(self._entries) > self.kept:
            self._entries.popitem(last=False)
        return found


def encoded_chunks(store: SQLiteStore, allowed: Allowed) -> np.ndarray:
    """`allowed.encoded`, read once: the ids `[N]` (ascending) of the chunks with a full
    vector of the documents `allowed` keeps."""
    if allowed.encoded is None:
        allowed.encoded = _chunk_ids(store, allowed, "vector IS NOT NULL AND ")
    return allowed.encoded


def all_chunks(store: SQLiteStore, allowed: Allowed) -> np.ndarray:
    """`allowed.chunks`, read once: the ids `[M]` (ascending) of every chunk of the
    documents `allowed` keeps."""
    if allowed.chunks is None:
        allowed.chunks = _chunk_ids(store, allowed, "")
    return allowed.chunks


def _chunk_ids(store: SQLiteStore, allowed: Allowed, condition: str) -> np.ndarray:
    rows = store._conn.execute(
        f"SELECT id FROM chunks WHERE {condition}"
        "doc_id IN (SELECT value FROM json_each(?)) ORDER BY id",
        (allowed.documents,),
    )
    return np.fromiter((r[0] for r in rows), np.int64)


def nearest_within(
    store: SQLiteStore,
    vectors: VectorSet,
    queries: np.ndarray,
    n: int,
    ef: int,
    where: SearchFilter,
) -> list[list[tuple[int, float]]]:
    """The `n` nearest (chunk id, cosine) per row of `queries` `[Q, dim]` among the chunks
    of the documents `where` keeps that have `vectors`' kind of vector. Few of them (below
    `store.exact_below`): an exact search of their vectors (kept with the filter's entry).
    Many: the graph searched for more candidates than `n`, as many more as the filter is
    selective, doubled until every query has `n` allowed chunks or the whole graph is
    returned; so `n` hits come back whenever `n` chunks pass (hand-written: usearch's
    Python search takes no predicate)."""
    allowed = store.allowed_chunks(where)
    ids = vectors.allowed_ids(allowed)
    if len(ids) == 0:
        return [[] for _ in range(len(queries))]
    total = vectors.total()
    if len(ids) < store.exact_below or total < store.exact_below:
        return exact_top_k(*vectors.allowed_vectors(allowed, ids), queries, n)
    want = min(int(n), len(ids))
    wide = min(total, max(2 * want, int(2 * want * total / len(ids))))
    while True:
        store._check_deadline()
        found = vectors.search(queries, wide, ef)
        kept = [_kept(ids, hits)[:want] for hits in found]
        if all(len(hits) == want for hits in kept) or wide >= total:
            return kept
        wide = min(total, 2 * wide)


def keyword_within(
    store: SQLiteStore, ranked: str, match: str, rank: str, n: int, where: SearchFilter
) -> list[Any]:
    """The `n` best rows (chunk id, BM25 rank) of FTS5 `match` among the chunks of the
    documents `where` keeps, in the order of `ranked` (the unfiltered statement: `rank`,
    then id; parameters `match` and a limit). When they are at least `FILTER_HERE_ABOVE`
    of the chunks: `ranked` read for as many more rows as the filter is selective,
    doubled until `n` pass or every match was read, and filtered here (the first `n`
    allowed rows of one total order, as SQL's filter would give). Else SQL filters."""
    allowed = store.allowed_chunks(where)
    ids = all_chunks(store, allowed)
    total = store.count()
    if len(ids) == 0:
        return []
    if len(ids) < FILTER_HERE_ABOVE * total:
        return store._conn.execute(
            f"SELECT chunks_terms.rowid, {rank} FROM chunks_terms JOIN "
            "chunks c ON c.id = chunks_terms.rowid WHERE chunks_terms MATCH ? AND "
            f"c.doc_id IN (SELECT value FROM json_each(?)) ORDER BY {rank}, "
            "chunks_terms.rowid LIMIT ?",
            (match, allowed.documents, n),
        ).fetchall()
    wide = max(2 * n, int(2 * n * total / len(ids)))
    while True:
        store._check_deadline()
        rows = store._conn.execute(ranked, (match, wide)).fetchall()
        kept = _kept(ids, rows)
        if len(kept) >= n or len(rows) < wide:
            return kept[:n]
        wide *= 2


def _kept(ids: np.ndarray, hits: list[Any]) -> list[Any]:
    """The hits (chunk id first) whose chunk is in `ids` (ascending, not empty)."""
    found = np.fromiter((hit[0] for hit in hits), np.int64, len(hits))
    at = np.minimum(np.searchsorted(ids, found), len(ids) - 1)
    return [hit for hit, ok in zip(hits, ids[at] == found, strict=True) if ok]
