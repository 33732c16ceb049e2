"""A vector set's HNSW graph kept in segments, each an `ann.HnswIndex` of its own beside
the database, searched together (docs/architecture.md, "Two passes"). The SQLite store
keeps two such sets: the quick vectors of the chunks without a full one, cut by chunk id
(`quick_graph.QuickVectors`), and the full vectors, cut by the generation they were sealed
in (`sqlite_segments.FullSegments`).

A segment's files are `<db><graph_dir>/<name>.hnsw` with their JSON header; each is
memory-mapped when it has nothing to replay, else loaded and replayed, or rebuilt when it
does not match, exactly as one graph is. What building a graph holds in memory is bounded
by a segment's size, and a search's cost grows with the number of segments (each is walked
with a narrower beam: `SegmentGraph.segment_beam`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from attnswitch.indexing.ann import HnswIndex


class SegmentedSet(Protocol):
    """A set of vectors kept in segments: where its graphs lie (`path`, `graph_dir`), its
    store's log position, one read snapshot, and its segments that hold chunks."""

    @property
    def path(self) -> Path: ...
    @property
    def graph_dir(self) -> str: ...
    def log_position(self) -> int: ...
    def reading(self) -> AbstractContextManager[None]: ...
    def segments(self) -> Sequence[Any]: ...


def segment_paths(db_path: Path, graph_dir: str) -> list[Path]:
    """The saved segment files (graphs and headers) in the folder `graph_dir` beside the
    database at `db_path`."""
    folder = db_path.with_name(db_path.name + graph_dir)
    return sorted(folder.glob("*.hnsw*")) if folder.is_dir() else []


class SegmentGraph:
    """A set's graph: one `ann.HnswIndex` per segment that holds chunks, searched
    together (`search`), caught up together (`catch_up`), saved together (`save`)."""

    def __init__(self, parts: list[tuple[Any, HnswIndex]], seq: int) -> None:
        self.parts = parts
        self.seq = seq  # the log position every segment reflects

    @classmethod
    def open(cls, vectors: SegmentedSet) -> SegmentGraph:
        """The graph of `vectors` current to the store's committed state, for searching:
        each saved segment memory-mapped when it has nothing to replay, else loaded and
        replayed, or rebuilt (`ann.HnswIndex.open`)."""
        from attnswitch.indexing.ann import HnswIndex

        with vectors.reading():
            seq = vectors.log_position()
            return cls([(part, HnswIndex.open(part)) for part in vectors.segments()], seq)

    @classmethod
    def sync(cls, vectors: SegmentedSet) -> SegmentGraph:
        """Bring every segment's saved graph up to the committed state, one segment in
        memory at a time (loaded or built, replayed, saved, dropped; a segment that nothing
        logged since its save concerns keeps its file, and only its header moves on:
        `ann.HnswIndex.advance`); remove the files of segments that no longer hold
        chunks; then the graph as `open` maps it. For a writer, under the run lock."""
        from attnswitch.indexing.ann import HnswIndex

        with vectors.reading():
            parts = vectors.segments()
            kept = {p.graph_suffix for p in parts}
            for path in segment_paths(Path(vectors.path), vectors.graph_dir):
                if f"{vectors.graph_dir}/{path.name.removesuffix('.json')}" not in kept:
                    path.unlink(missing_ok=True)
            for part in parts:
                if not HnswIndex.advance(part):
                    graph = HnswIndex.open(part, writable=True)
                    graph.save(part)
                    del graph
            return cls.open(vectors)

    @property
    def mapped(self) -> bool:
        """Every segment memory-mapped (none loaded to replay or rebuild)."""
        return all(graph.mapped for _, graph in self.parts)

    @property
    def rebuilt(self) -> bool:
        """Some segment was built from the vectors by this open."""
        return any(graph.rebuilt for _, graph in self.parts)

    def __len__(self) -> int:
        return sum(len(graph) for _, graph in self.parts)

    def catch_up(self, vectors: SegmentedSet) -> bool:
        """Replay what was logged since into each segment (`ann.HnswIndex.catch_up`), in
        one read snapshot. False when some segment cannot, or the set's segments are not
        these any more (one emptied, or chunks in a new one): the caller opens it again."""
        with vectors.reading():
            parts = vectors.segments()
            if [p.segment for p in parts] != [p.segment for p, _ in self.parts]:
                return False
            self.parts = [(part, graph) for part, (_, graph) in zip(parts, self.parts)]
            if not all(graph.catch_up(part) for part, graph in self.parts):
                return False
            self.seq = vectors.log_position()
            return True

    def search(self, queries: np.ndarray, n: int, ef: int) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, inner product) per row of `queries` `[Q, dim]` over
        every segment: each segment's `n` best, found with a beam of `segment_beam(ef)`,
        merged by score descending, then id."""
        merged: list[list[tuple[int, float]]] = [[] for _ in range(len(queries))]
        beam = self.segment_beam(ef)
        for _, graph in self.parts:
            for row, hits in zip(merged, graph.search(queries, n, beam), strict=True):
                row.extend(hits)
        return [sorted(row, key=lambda hit: (-hit[1], hit[0]))[:n] for row in merged]

    def segment_beam(self, ef: int) -> int:
        """The beam each segment is walked with for a search beam of `ef` over the whole
        set: `ef / sqrt(segments)`, rounded up (`ann.HnswIndex.search` widens it to `n`
        still). A segment holds a fraction of the set, so a narrower beam finds its share
        of the nearest as well, and the segments' walks add up: on the 1 GB drive's quick
        vectors (nine segments, `benchmarks/quick_graph_segments.py`) the store's beam of
        512 in each segment took 17.6 ms a search with the pages in memory, 171 (this
        rule) 8.1 ms, finding 0.999 and 0.998 of the exact 10 nearest of stored points; near,
        not on, stored points 171 found 0.986 and 512 0.996."""
        return max(1, math.ceil(ef / math.sqrt(max(1, len(self.parts)))))

    def save(self, vectors: SegmentedSet) -> None:
        """Save the segments this process loaded (replayed or rebuilt); mapped ones are
        their saved files already."""
        for part, graph in self.parts:
            if not graph.mapped:
                graph.save(part)


__all__ = ["SegmentGraph", "SegmentedSet", "segment_paths"]
