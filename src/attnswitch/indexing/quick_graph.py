"""The quick vectors of a SQLite store and their HNSW graph, in segments of chunk ids
(docs/architecture.md, "Two passes").

The set is the chunks that have a quick vector and no full one (`QUICK_ONLY`): the quick
pass adds them, the full pass and query-time encoding take each out as its full vector is
written. Both kinds of change are in the store's chunk log (the triggers log every insert,
delete and change of either vector), so the graph of this set is kept in step exactly as the
full vectors' graph is, from the same log.

The set's graph is cut by chunk id into segments of `SEGMENT_IDS` ids (`QuickVectors` of
one segment: ids in `(k * SEGMENT_IDS, (k + 1) * SEGMENT_IDS]`), each an `ann.HnswIndex` of
its own, saved as `<db>.quick/<k>.hnsw` with its JSON header (`segment_paths`), replayed on
open, rebuilt when it does not match, exactly as one graph is. `segment_graph.SegmentGraph`
searches them all and merges their hits. The segments bound what building the graph takes: it is
built and saved one segment at a time (`SegmentGraph.sync`), so a run holds at most one
segment's graph (about 60 MB at 384 dimensions) however large the drive, where one graph
of the 1 GB drive's 572,779 chunks held 525 MB. Segments are fixed ranges of ids rather
than Lucene's merged segments of whatever was written together: a chunk's segment follows
from its id, so no table of segments has to be kept in step with the files, and the set
only shrinks once the quick pass is done (new chunks take new ids, in the last segments).
A search maps each saved segment and walks each (about 0.9 ms a full segment on the 1 GB
drive, `SegmentGraph.segment_beam`), so a search's cost grows with the number of segments: 16 at a million chunks. Counts and
largest ids of every segment come from one scan of the partial index of these chunks
(`sqlite_schema.QUICK_ONLY_INDEX`), so opening the graph reads no vector.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from attnswitch.indexing.segment_graph import segment_paths as saved_segments
from attnswitch.indexing.sqlite_vectors import QUICK_ONLY as QUICK_VECTORS
from attnswitch.indexing.sqlite_vectors import VectorColumn, VectorSet, VectorSource

if TYPE_CHECKING:
    pass


# The chunks of the set: a quick vector, and no full vector yet.
QUICK_ONLY = QUICK_VECTORS.condition
# Chunk ids a segment spans: its graph holds at most this many vectors (~60 MB in memory
# at 384 float16 dimensions while it is built).
SEGMENT_IDS = 65_536
# Rows read at once while a segment is built: enough to add on every core
# (`ann.PARALLEL_FROM`), a fraction of the segment's memory.
SEGMENT_BATCH = 16_384
# The folder of the segments' files beside the database (`<db>.quick`), and the name of
# the one graph earlier versions kept (removed when the segments are saved).
GRAPH_DIR = ".quick"
SINGLE_GRAPH = ".quick.hnsw"


def segment_paths(db_path: Path) -> list[Path]:
    """The saved segment files beside the database at `db_path` (graphs and headers)."""
    return saved_segments(db_path, GRAPH_DIR)


def remove_graph(db_path: Path) -> None:
    """Remove every saved segment of the quick graph (and an earlier version's one graph)."""
    shutil.rmtree(db_path.with_name(db_path.name + GRAPH_DIR), ignore_errors=True)
    remove_single_graph(db_path)


def remove_single_graph(db_path: Path) -> None:
    """Remove the one quick graph an earlier version kept (`SINGLE_GRAPH`) and its header."""
    for end in ("", ".json"):
        db_path.with_name(db_path.name + SINGLE_GRAPH + end).unlink(missing_ok=True)


class QuickSource(VectorSource, Protocol):
    """What `QuickVectors` reads of `store_sqlite.SQLiteStore`."""

    def quick_model(self) -> dict[str, Any] | None: ...


class QuickVectors(VectorSet):
    """The quick-only chunks of one SQLite store, or of one segment of ids (`segment`),
    as `sqlite_vectors.VectorSet` reads a set: float32 vectors of the static model's
    dimension."""

    graph_dir = GRAPH_DIR  # the folder of its segments' graphs (`segment_graph.SegmentedSet`)
    # A segment is checked as a large graph is (`ann.HnswIndex._file_damage`): by its
    # structure and a sample of its vectors, not by a read of all its bytes at every open
    # (a search opens every segment).
    verify_whole_below = 0
    batch = SEGMENT_BATCH

    def __init__(self, store: QuickSource, segment: int | None = None) -> None:
        column, self._ids = QUICK_VECTORS, ""  # `_ids`: SQL, the segment's ids in the log
        if segment is not None:
            low, high = segment * SEGMENT_IDS, (segment + 1) * SEGMENT_IDS
            self.first_id = low + 1
            self._ids = f"chunk_id > {low} AND chunk_id <= {high}"
            column = VectorColumn(
                QUICK_VECTORS.column, f"{QUICK_ONLY} AND id > {low} AND id <= {high}"
            )
        super().__init__(store, column)
        self.store: QuickSource = store
        self.segment = segment

    @property
    def graph_suffix(self) -> str:
        """The segment's graph file beside the database (`ann.HnswIndex.paths`)."""
        return f"{GRAPH_DIR}/{self.segment}.hnsw"

    @property
    def dim(self) -> int | None:
        model = self.store.quick_model()
        return None if model is None else int(model["dim"])

    def segments(self) -> list[QuickVectors]:
        """The segments of this set that hold chunks, by segment number: one scan of the
        set's partial index gives each its count and largest id."""
        with self.store.reading():
            position = self.store._log_position()
            rows = self.store._conn.execute(
                f"SELECT (id - 1) / {SEGMENT_IDS}, COUNT(*), MAX(id) FROM chunks "
                f"WHERE {QUICK_ONLY} GROUP BY 1 ORDER BY 1"
            ).fetchall()
        parts = []
        for k, n, top in rows:
            part = QuickVectors(self.store, int(k))
            part._counted = (position, int(n), int(top))
            parts.append(part)
        return parts

    def chunk_log_ids(self, after: int, upto: int) -> list[int]:
        """The chunk ids (of the segment) inserted, deleted or changed at log positions
        (after, upto]."""
        ids = f" AND {self._ids}" if self._ids else ""
        return [
            r[0]
            for r in self.store._conn.execute(
                f"SELECT DISTINCT chunk_id FROM chunk_log WHERE seq > ? AND seq <= ?{ids}",
                (after, upto),
            )
        ]


__all__ = [
    "GRAPH_DIR",
    "QUICK_ONLY",
    "SEGMENT_IDS",
    "QuickVectors",
    "remove_graph",
    "remove_single_graph",
    "segment_paths",
]
