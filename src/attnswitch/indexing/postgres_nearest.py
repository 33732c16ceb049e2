"""Nearest-neighbour search of the PostgreSQL store's two vector columns (mixed into
`store_postgres.PostgresStore`): `dense` over the full vectors (`embedding`: pgvector's HNSW
index of each segment, and an exact scan of the tail not yet in one, `postgres_segments`),
`quick` over the quick vectors of the chunks still without a full one (their partial HNSW
index, `postgres_schema.QUICK_HNSW`, once `PostgresStore.sync_index` made it; else an exact
scan), both through one query shape (`_nearest`: each part's best rows, then the best of
all, in one statement)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.postgres_schema import QUICK_HNSW, QUICK_ONLY, pgvector_version
from attnswitch.indexing.postgres_segments import layout, parts
from attnswitch.indexing.records import MAX_EF_SEARCH

T = TypeVar("T")


class NearestVectors:
    """`dense` and `quick` for a store that provides the hooks below (`PostgresStore`)."""

    _scan_on: bool | None  # pgvector's iterative index scan, once asked (`_iterative_scan`)

    if TYPE_CHECKING:
        _conn: Any

        @property
        def dim(self) -> int | None: ...
        def beam(self, ef: int | None) -> int: ...
        def quick_model(self) -> dict[str, Any] | None: ...
        def allowed_documents(self, where: SearchFilter) -> list[int]: ...
        def _retrying(self, fn: Callable[[], T]) -> T: ...
        def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def dense(
        self, queries: np.ndarray, n: int, ef: int | None = None, where: SearchFilter | None = None
    ) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, inner product) per row of `queries` `[Q, dim]`: each
        segment's by pgvector's HNSW index with a search beam of `ef` (default `ef_search`)
        and the tail's exactly, the best `n` of them (ties by chunk id). With `where`,
        among the chunks of the documents it keeps: the indexes scan on past their beam
        until `n` rows pass (pgvector's iterative scan), and a query that still has fewer
        than the chunks that pass is answered exactly (no index scan), so `n` hits come
        back whenever `n` chunks pass."""
        ef = self.beam(ef)
        if self.dim is None:
            return [[] for _ in range(len(queries))]
        generation, segments = self._retrying(lambda: layout(self._conn))
        return self._nearest("embedding", parts(generation, segments), queries, n, ef, where)

    def quick(
        self,
        queries: np.ndarray,
        n: int,
        where: SearchFilter | None = None,
        ef: int | None = None,
    ) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, cosine) per row of `queries` `[Q, quick dim]`
        (normalised) among the chunks that have a quick vector and no full one (with
        `where`, of the documents it keeps), as `dense` ranks the full vectors: by their
        partial HNSW index (`QUICK_HNSW`, beam `ef`) where `sync_index` made it, else
        exactly (a scan of those chunks; ties by id)."""
        ef = self.beam(ef)
        if self.quick_model() is None:
            return [[] for _ in range(len(queries))]
        indexed = self._quick_indexed()
        return self._nearest("quick", [(QUICK_ONLY, indexed)], queries, n, ef, where)

    def _nearest(
        self,
        column: str,
        among: list[tuple[str, bool]],
        queries: np.ndarray,
        n: int,
        ef: int,
        where: SearchFilter | None,
    ) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, inner product) per row of `queries` by the vector
        column `column` among the chunks of the conditions `among` (each with whether an
        HNSW index of the column has that condition as its predicate; with `where`, of the
        documents it keeps), ties by id: each condition's best `n`, then the best `n` of
        them, in one statement. An indexed condition is searched by its index, with beam
        `ef` widened to `n` (it returns at most its beam's rows), scanning on past it with
        a filter (pgvector 0.8+); the others exactly. A filtered query that still has
        fewer than `n` rows and than the chunks that pass is answered exactly."""
        ef = min(max(ef, int(n)), MAX_EF_SEARCH)
        docs = None if where is None else self.allowed_documents(where)
        if docs == []:
            return [[] for _ in range(len(queries))]
        allowed = "" if docs is None else " AND doc_id = ANY(%s)"
        # An index serves `ORDER BY <distance> LIMIT`; an exact scan breaks ties by id.
        selects = [
            f"(SELECT id, {column} <#> %s AS d FROM chunks WHERE {condition}{allowed} "
            f"ORDER BY {column} <#> %s{'' if indexed else ', id'} LIMIT %s)"
            for condition, indexed in among
        ]
        sql = f"SELECT id, d FROM ({' UNION ALL '.join(selects)}) t ORDER BY d, id LIMIT %s"
        indexed = any(by_index for _, by_index in among)
        whole = " OR ".join(f"({condition})" for condition, _ in among)
        from pgvector import HalfVector

        # A filtered statement is never prepared: psycopg prepares a statement run five
        # times, and PostgreSQL's generic plan for `doc_id = ANY($n)` then ranked the
        # allowed chunks exactly instead of scanning the graph (34 ms against 10 ms at
        # 100,000 chunks, half allowed: benchmarks/reader_filter.py).
        prepare = None if docs is None else False

        def nearest(
            q: Any, settings: tuple[str, ...], prepare: bool | None
        ) -> list[tuple[int, float]]:
            # the settings hold for this query's transaction only (`SET LOCAL`)
            with self._conn.transaction() if settings else contextlib.nullcontext():
                for setting in settings:
                    self._conn.execute(f"SET LOCAL {setting}")
                each = (q, *(() if docs is None else (docs,)), q, int(n))
                return [
                    (int(r[0]), -float(r[1]))
                    for r in self._conn.execute(sql, each * len(among) + (int(n),), prepare=prepare)
                ]

        scan: tuple[str, ...] = (f"hnsw.ef_search = {ef}",) if indexed else ()
        if indexed and docs is not None and self._iterative_scan():
            scan += ("hnsw.iterative_scan = relaxed_order",)
        exactly = ("enable_indexscan = off",)
        out = []
        for row in np.asarray(queries, np.float32):
            q = HalfVector(row)
            hits = self._retrying(functools.partial(nearest, q, scan, prepare))
            if (
                indexed
                and docs is not None
                and len(hits) < n
                and len(hits) < self._chunks_of(whole, docs)
            ):
                hits = self._retrying(functools.partial(nearest, q, exactly, False))
            out.append(hits)
        return out

    def _quick_indexed(self) -> bool:
        """Whether the quick list's HNSW index exists (the catalog only: no table lock)."""
        return bool(
            self._one(
                "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = "
                "current_schema() AND indexname = %s)",
                (QUICK_HNSW,),
            )[0]
        )

    def _iterative_scan(self) -> bool:
        """Whether the server's pgvector scans an HNSW index on past its beam (0.8+)."""
        if self._scan_on is None:
            self._scan_on = pgvector_version(self._conn) >= (0, 8)
        return self._scan_on

    def _chunks_of(self, among: str, docs: list[int]) -> int:
        """How many chunks of condition `among` the documents `docs` hold."""
        return int(
            self._one(f"SELECT COUNT(*) FROM chunks WHERE {among} AND doc_id = ANY(%s)", (docs,))[0]
        )
