"""The SQLite store's full vectors and their HNSW graph, kept in segments sealed while the
vectors are written (docs/architecture.md, "The full vectors' segments in SQLite").

One graph of every full vector was built or replayed in one piece: a full pass of 2 M chunks
ended with 1,125 s and 2,353 MiB of building it, and each searching process built the
vectors written so far into its own graph while the pass ran
(docs/results/amd-epyc-avx512bf16/store_two_speed.md). So, as the PostgreSQL store does
(`postgres_segments`), the full vectors are indexed as a log-structured merge tree indexes
its writes:

- a full vector is written with `full_gen` NULL: it is in the tail, which no graph holds,
  and a search ranks the tail exactly (`FullGraph`). Writing it touches no graph;
- the segments (meta "full_segments": `[[lo, hi, vectors], ...]`, `layout`) tile the
  generations [0, H); segment [lo, hi) holds the full vectors with lo <= `full_gen` < hi,
  its graph saved as `<db>.full/<lo>_<hi>.hnsw` (`FullSegment`, an `ann.HnswIndex` of its
  own, searched with the others by `segment_graph.SegmentGraph`);
- `seal` makes the tail the segment [H, H + 1) once it holds `SEAL_AT` vectors: its graph
  is built from the tail's rows, then one transaction gives those rows generation H (an
  UPDATE the chunk log does not see: the graph is keyed by chunk id, and no vector changed)
  and names the segment in the layout, and its graph is saved; then the newest segments
  are merged while `segment_tiers.FANIN` of them share a tier (the largest one's graph
  loaded and the others' vectors added to it, saved before the layout names it), up to
  `segment_tiers.LARGEST` vectors a segment, which bounds what a merge holds in memory
  (about 1.2 KB a vector).

Only chunks whose rows change after a segment is built concern its graph: those deleted or
whose vector is replaced (the chunk log's `had_vector`) and those that now belong to it. A
full pass writes neither kind, so its fills leave every sealed graph memory-mapped in the
searching processes (`FullSegment.chunk_log_ids`, `ann.HnswIndex._quiet`). A process killed
during a seal or a merge leaves the layout it found; the files the layout does not name are
removed by the next sync (`SegmentGraph.sync`), and a named segment whose file is missing is
built when next opened.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from attnswitch.indexing.ann import VERIFY_WHOLE_BELOW
from attnswitch.indexing.segment_graph import SegmentGraph
from attnswitch.indexing.segment_tiers import LARGEST, merge_count
from attnswitch.indexing.sqlite_vectors import (
    FULL,
    FULL_TAIL,
    VectorColumn,
    VectorSet,
    VectorSource,
    joined,
)

if TYPE_CHECKING:
    import sqlite3

    from attnswitch.indexing.ann import HnswIndex

log = logging.getLogger("attnswitch.indexing.store_sqlite")  # the store's own log

# The tail becomes a segment once it holds this many full vectors: a search ranks the tail
# exactly (read back as float32: 16,384 x 384 is 24 MiB), below the store's own exact
# threshold (`store_sqlite.EXACT_BELOW`).
SEAL_AT = 16_384
# The folder of the segments' graphs beside the database, and the meta key of the layout.
GRAPH_DIR = ".full"
LAYOUT = "full_segments"
# The one graph of every full vector that stores before schema version 13 kept (`.hnsw`).
SINGLE_GRAPH = ".hnsw"


class FullSource(VectorSource, Protocol):
    """What the full vectors' sets read of `store_sqlite.SQLiteStore`."""

    @property
    def dim(self) -> int | None: ...
    def meta(self, key: str) -> str | None: ...
    def _transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]: ...


def layout(store: FullSource) -> list[tuple[int, int, int]]:
    """The segments, oldest first: (lo, hi, vectors when built)."""
    raw = store.meta(LAYOUT)
    return [(int(lo), int(hi), int(n)) for lo, hi, n in json.loads(raw)] if raw else []


def _set_layout(conn: sqlite3.Connection, segments: list[tuple[int, int, int]]) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO meta VALUES (?, ?)",
        (LAYOUT, json.dumps([list(s) for s in segments])),
    )


class FullSegment(VectorSet):
    """The full vectors of one segment, generations [lo, hi) (with `tail`, the tail's
    vectors that a seal makes that segment), as `sqlite_vectors.VectorSet` reads a set."""

    # Its graph's CRC-32 read at each open up to this size; a larger one mapped for a
    # search is checked by its structure and a sample of its vectors (`ann.HnswIndex`).
    verify_whole_below = VERIFY_WHOLE_BELOW

    def __init__(self, store: FullSource, lo: int, hi: int, *, tail: bool = False) -> None:
        among = f"vector IS NOT NULL AND full_gen >= {lo} AND full_gen < {hi}"
        super().__init__(store, VectorColumn(FULL.column, FULL_TAIL if tail else among))
        self.store: FullSource = store
        self.segment = (lo, hi)

    @property
    def graph_suffix(self) -> str:
        lo, hi = self.segment
        return f"{GRAPH_DIR}/{lo}_{hi}.hnsw"

    @property
    def dim(self) -> int | None:
        return self.store.dim

    def chunk_log_ids(self, after: int, upto: int) -> list[int]:
        """The chunk ids logged at positions (after, upto] that may be in this segment's
        graph (deleted, or their full vector replaced: `had_vector`) or belong in it now."""
        return [
            r[0]
            for r in self.store._conn.execute(
                "SELECT chunk_id FROM chunk_log WHERE seq > ? AND seq <= ? AND had_vector "
                "UNION SELECT l.chunk_id FROM chunk_log l JOIN chunks ON chunks.id = l.chunk_id "
                f"WHERE l.seq > ? AND l.seq <= ? AND {self._column.condition}",
                (after, upto, after, upto),
            )
        ]


class FullSegments:
    """Every full vector of a SQLite store, as `segment_graph.SegmentedSet` reads a set
    kept in segments: the layout's segments, and the tail (`tail`) beside them."""

    graph_dir = GRAPH_DIR

    def __init__(self, store: FullSource) -> None:
        self.store = store

    @property
    def path(self) -> Path:
        return self.store.path

    def reading(self) -> contextlib.AbstractContextManager[None]:
        return self.store.reading()

    def log_position(self) -> int:
        return self.store._log_position()

    def segments(self) -> list[FullSegment]:
        return [FullSegment(self.store, lo, hi) for lo, hi, _ in layout(self.store)]

    def tail(self) -> tuple[np.ndarray, np.ndarray]:
        """The tail's ids `[N]` and vectors `[N, dim]`, by id."""
        column = VectorColumn(FULL.column, FULL_TAIL)
        dim = self.store.dim or 0
        return joined(column.batches(self.store._conn, dim, self.path), dim)

    def tail_size(self, limit: int) -> int:
        """How many vectors the tail holds, counted up to `limit`."""
        ((n,),) = self.store._conn.execute(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM chunks WHERE {FULL_TAIL} LIMIT ?)", (limit,)
        ).fetchall()
        return int(n)

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Every full vector (for an exact search of a small store)."""
        return joined(
            FULL.batches(self.store._conn, self.store.dim or 0, self.path), self.store.dim or 0
        )


class FullGraph:
    """A searcher of every full vector: the segments' graphs (`SegmentGraph`) and the
    tail's vectors, ranked exactly, as of one log position (`seq`)."""

    def __init__(self, graph: SegmentGraph, tail: tuple[np.ndarray, np.ndarray]) -> None:
        self.graph = graph
        self.tail = tail

    @classmethod
    def open(cls, vectors: FullSegments) -> FullGraph:
        with vectors.reading():
            return cls(SegmentGraph.open(vectors), vectors.tail())

    @property
    def seq(self) -> int:
        return self.graph.seq

    @property
    def mapped(self) -> bool:
        return self.graph.mapped

    @property
    def rebuilt(self) -> bool:
        return self.graph.rebuilt

    def __len__(self) -> int:
        return len(self.graph) + len(self.tail[0])

    def catch_up(self, vectors: FullSegments) -> bool:
        """The segments caught up (`SegmentGraph.catch_up`) and the tail read again, in one
        read snapshot; False when the segments cannot be (the caller opens it again)."""
        with vectors.reading():
            if not self.graph.catch_up(vectors):
                return False
            self.tail = vectors.tail()
            return True

    def search(self, queries: np.ndarray, n: int, ef: int) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, inner product) per row of `queries` `[Q, dim]`: the
        segments' hits and the tail's exact ones, merged by score descending, then id."""
        from attnswitch.indexing.ann import exact_top_k

        found = self.graph.search(queries, n, ef)
        if len(self.tail[0]):
            # the query in the graphs' precision, as usearch rounds it: scores comparable
            rounded = np.asarray(queries, np.float32).astype(np.float16).astype(np.float32)
            exact = exact_top_k(*self.tail, rounded, n)
            found = [
                sorted(a + b, key=lambda hit: (-hit[1], hit[0]))[:n]
                for a, b in zip(found, exact, strict=True)
            ]
        return found

    def save(self, vectors: FullSegments) -> None:
        self.graph.save(vectors)


def seal(store: FullSource, *, at: int = SEAL_AT) -> bool:
    """Make the tail a segment when it holds at least `at` full vectors (`at` 1: whenever
    it holds any), move the older segments' headers on (`ann.HnswIndex.advance`), then
    merge the newest segments while `segment_tiers.merge_count` says; under the caller's
    run lock. Whether it sealed."""
    from attnswitch.indexing.ann import HnswIndex

    vectors = FullSegments(store)
    if store.dim is None or vectors.tail_size(max(1, at)) < max(1, at):
        return False
    started = time.monotonic()
    segments = layout(store)
    lo = segments[-1][1] if segments else 0
    graph = HnswIndex.open(FullSegment(store, lo, lo + 1, tail=True), writable=True)
    keys = np.asarray(graph.index.keys, np.int64)
    with store._transaction() as conn:
        conn.executemany(
            f"UPDATE chunks SET full_gen = {lo} WHERE id = ? AND {FULL_TAIL}",
            ((int(k),) for k in keys),
        )
        segments.append((lo, lo + 1, len(keys)))
        _set_layout(conn, segments)
    graph.save(FullSegment(store, lo, lo + 1))
    log.info(
        "%s: full vectors' segment %d_%d made (%s vectors, %.1f s)",
        store.path,
        lo,
        lo + 1,
        f"{len(keys):,}",
        time.monotonic() - started,
    )
    for part in vectors.segments()[:-1]:
        # the newest (just sealed) is current; the others' headers move on when quiet, so
        # that a process opening them later looks at the log since this seal only
        HnswIndex.advance(part)
    while count := merge_count([n for _, _, n in segments], at, LARGEST):
        merged = segments[-count:]
        started = time.monotonic()
        part = FullSegment(store, merged[0][0], merged[-1][1])
        graph = _merged(store, merged, part)
        graph.save(part)
        into = (*part.segment, len(graph))
        del graph
        with store._transaction() as conn:
            segments[-count:] = [into]
            _set_layout(conn, segments)
        for old in merged:
            HnswIndex.remove_files(
                Path(store.path), FullSegment(store, old[0], old[1]).graph_suffix
            )
        log.info(
            "%s: full vectors' segments %s merged into %d_%d (%s vectors, %.1f s)",
            store.path,
            ", ".join(f"{a}_{b}" for a, b, _ in merged),
            into[0],
            into[1],
            f"{into[2]:,}",
            time.monotonic() - started,
        )
    return True


def _merged(store: FullSource, merged: list[tuple[int, int, int]], part: FullSegment) -> HnswIndex:
    """The graph of `part`, the generations of the `merged` segments: the largest one's
    graph loaded (or built, when it cannot be loaded as it is) and the others' vectors
    added to it, so that the largest one's vectors are not built again; to be saved as
    `part`'s."""
    from attnswitch.indexing.ann import HnswIndex

    lo, hi, _ = max(merged, key=lambda segment: segment[2])
    with store.reading():
        graph = HnswIndex.open(FullSegment(store, lo, hi), writable=True)
        for other in merged:
            if other[:2] != (lo, hi):
                for ids, matrix in FullSegment(store, other[0], other[1]).iter_vectors():
                    graph.add(ids, matrix)
    graph.suffix = part.graph_suffix
    return graph


def unseal(store: FullSource) -> None:
    """Return every segment's vectors to the tail and remove the segments' graphs: a store
    below its exact threshold keeps no graph (its searches rank every vector exactly)."""
    if not layout(store):
        return
    with store._transaction() as conn:
        conn.execute("UPDATE chunks SET full_gen = NULL WHERE full_gen IS NOT NULL")
        conn.execute("DELETE FROM meta WHERE key = ?", (LAYOUT,))
    shutil.rmtree(store.path.with_name(store.path.name + GRAPH_DIR), ignore_errors=True)


def convert_single_graph(db_path: Path) -> None:
    """Move the one graph a store before schema version 13 kept (`<db>.hnsw` and its
    header) to the segment of generation 0 that the upgrade made of its vectors; a header
    that no longer matches is rebuilt when the segment is next opened, as any is."""
    folder = db_path.with_name(db_path.name + GRAPH_DIR)
    single = db_path.with_name(db_path.name + SINGLE_GRAPH)
    if not single.exists():
        return
    folder.mkdir(exist_ok=True)
    for end in ("", ".json"):
        source = single.with_name(single.name + end)
        if source.exists():
            source.replace(folder / f"0_1.hnsw{end}")


def remove_graphs(db_path: Path) -> None:
    """Remove every saved segment of the full vectors' graph (and an earlier version's one
    graph)."""
    shutil.rmtree(db_path.with_name(db_path.name + GRAPH_DIR), ignore_errors=True)
    for end in ("", ".json"):
        db_path.with_name(db_path.name + SINGLE_GRAPH + end).unlink(missing_ok=True)


__all__ = [
    "GRAPH_DIR",
    "SEAL_AT",
    "FullGraph",
    "FullSegment",
    "FullSegments",
    "convert_single_graph",
    "layout",
    "remove_graphs",
    "seal",
    "unseal",
]
