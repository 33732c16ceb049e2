"""Dense top-k for the embedded store: exact below a size threshold, HNSW above it.

- `exact_top_k(ids, matrix, queries, n)`: inner products of L2-normalised vectors, ties
  broken by chunk id (deterministic).
- `HnswIndex`: a usearch HNSW graph of a set of a SQLite store's chunk vectors (a
  `GraphStore`: a segment of the full vectors, `sqlite_segments.FullSegment`, or of the
  quick vectors, `quick_graph.QuickVectors`), persisted beside the database under the
  set's suffix (`<db>.full/<lo>_<hi>.hnsw`, `<db>.quick/<k>.hnsw`) with a JSON header
  (the same name and `.json`).
  It holds the vectors in the store's precision, float16 (`DTYPE`, `records.VECTOR_DTYPE`:
  the stored values exactly, half the bytes of float32; usearch rounds a query to it too),
  and ranks by inner product. usearch was measured
  against hnswlib and faiss (`benchmarks/ann_libraries.py`, figures in
  docs/results/search.md): the same recall and query time, a slower build, but the only
  one that deletes for real (hnswlib only marks, faiss's HNSW cannot) and memory-maps its
  saved file (`view`), so a cold CLI search reads only the pages its graph walk touches.

Keeping the index in step: every insert and delete of a chunk is appended to the store's
`chunk_log` (by SQL triggers, in the writing transaction). The header records the log
position (`seq`) the saved graph reflects, the store's id and dimension, the file's size,
and the chunk count and largest chunk id it holds. Opening an index replays the log after
`seq` (adds inserted chunks still present, removes deleted ones), unless nothing logged
since concerns the set (its `chunk_log_ids` gives none: `_quiet`), when the saved graph is
current as it is and stays memory-mapped; it is rebuilt from the
vectors, and logged, when the file or header is missing, unreadable, another store's or
another dimension's, when the file's bytes are not the ones saved (its CRC-32, in the
header; for a large memory-mapped graph a sample of its vectors and, when the file
changed since its save, its structure: `hnsw_file.graph_damage`), when the log no longer
reaches back to `seq` (pruned), or when its size
(after the replay) is not the store's chunk count or, with nothing to replay, its largest
id is not the store's. A run saves the caught-up graph when it finishes
(`SQLiteStore.finish_run`) and prunes the log. A searching process keeps the graph it
loaded and replays only what was logged since (`catch_up`), so a search during the full
pass does not read the whole graph again after each write.

Opening is cheap, so that a cold CLI search stays well under a second at a million
chunks (docs/architecture.md, "Search at scale"): the checks cost the store's log
position, its largest chunk id (one b-tree descent) and its chunk count (a scan of the
small (doc_id, ordinal) index, not of the vectors); a clean graph is memory-mapped
(`restore(view=True)`: pages are read as the walk touches them), and only a graph with
inserts or deletes to replay is loaded into memory. Large builds use every core
(`BUILD_THREADS`, from `PARALLEL_FROM` vectors a batch); such a graph is not bit-identical
from one build to the next, which is why recall is checked against exact search rather
than fixed neighbours.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from attnswitch.indexing.hnsw_file import graph_damage

if TYPE_CHECKING:
    import numpy.typing as npt
    import usearch.index

    # Chunk ids `[N]` and their vectors, float32 `[N, dim]`, as the stores give them.
    Ids = npt.NDArray[np.int64]
    Vectors = npt.NDArray[np.float32]

# Graph parameters: M=16, ef_construction=128. The search beam (ef) is a search-time
# setting: `store.EF_SEARCH` by default, or the store's or the call's.
CONNECTIVITY = 16
EXPANSION_ADD = 128
BUILD_THREADS = 0  # usearch: 0 is every core
# Batches smaller than this are added on one thread: fast anyway, and the same graph every
# time (concurrent inserts into a small graph measurably lost neighbours in the tests).
PARALLEL_FROM = 10_000
# usearch's name of the stored vectors' element (`records.VECTOR_DTYPE`) and its bytes.
DTYPE = "f16"
ITEM_BYTES = 2
# 2: the header names the largest chunk id; 3: and the graph file's CRC-32; 4: float16
# vectors (`DTYPE`; a float32 graph is rebuilt); graphs of an older format are rebuilt
INDEX_FORMAT = 4
# A saved graph up to this size is checked against its CRC-32 whenever it is opened (a
# read of the file: ~20 ms at this size; the store's `verify_whole_below`, which the quick
# graph's segments set to 0); a larger one memory-mapped for a search is checked by
# `VERIFY_SAMPLE` of its vectors instead, so that a cold search reads only the
# pages it touches (a graph loaded into memory is always checked whole).
VERIFY_WHOLE_BELOW = 64 * 2**20
VERIFY_SAMPLE = 32
log = logging.getLogger(__name__)


class GraphStore(Protocol):
    """What `HnswIndex` reads of its store (`store_sqlite.SQLiteStore` has it, and
    `quick_graph.QuickVectors` for a segment of the quick vectors): the file the graph lies
    beside and the suffix of the graph's file name, the lowest chunk id the set may hold,
    the size up to which a mapped graph's file is checked whole, the store's id and vector
    dimension (None before its first vector), one read snapshot (`reading`), the chunk log
    (`chunk_log_state`, `chunk_log_ids`), the largest chunk id, and the vectors (float32
    `[N, dim]` with their chunk ids `[N]`) of given ids, of all chunks in batches or at
    once."""

    @property
    def path(self) -> str | os.PathLike[str]: ...
    @property
    def first_id(self) -> int: ...
    @property
    def verify_whole_below(self) -> int: ...
    @property
    def graph_suffix(self) -> str: ...
    @property
    def store_id(self) -> str | None: ...
    @property
    def dim(self) -> int | None: ...
    def reading(self) -> AbstractContextManager[None]: ...
    def chunk_log_state(self) -> tuple[int | None, int, int]: ...
    def chunk_log_ids(self, after: int, upto: int) -> list[int]: ...
    def max_chunk_id(self) -> int: ...
    def vectors_of(self, ids: Iterable[int]) -> tuple[Ids, Vectors]: ...
    def iter_vectors(self) -> Iterator[tuple[Ids, Vectors]]: ...
    def vectors(self) -> tuple[Ids, Vectors]: ...


def exact_top_k(
    ids: Ids, matrix: Vectors, queries: Vectors, n: int
) -> list[list[tuple[int, float]]]:
    """The `n` best (chunk id, score) per row of `queries` `[Q, dim]` (normalised) among
    `matrix` `[N, dim]` with chunk ids `ids` `[N]`: score descending, then id ascending."""
    if len(ids) == 0:
        return [[] for _ in range(len(queries))]
    scores = queries @ matrix.T  # [Q, N]
    n = min(int(n), len(ids))
    out = []
    for row in scores:
        if n < len(row):  # the n best, plus any tied with the n-th, then sorted
            kth = row[np.argpartition(-row, n - 1)[n - 1]]
            top = np.flatnonzero(row >= kth)
        else:
            top = np.arange(len(row))
        order = np.lexsort((ids[top], -row[top]))[:n]
        out.append([(int(ids[i]), float(row[i])) for i in top[order]])
    return out


def nearest(
    searcher: tuple[Ids, Vectors] | HnswIndex, queries: Vectors, n: int, ef: int
) -> list[list[tuple[int, float]]]:
    """The `n` nearest (chunk id, score) per row of `queries` from a vector set's searcher
    (`SQLiteStore._current`): its vectors (ids, matrix), searched exactly, or its graph,
    with a search beam of `ef`."""
    if isinstance(searcher, tuple):
        return exact_top_k(*searcher, queries, n)
    return searcher.search(queries, n, ef)


def file_crc32(path: Path) -> int:
    """The CRC-32 of a file's bytes, read 1 MiB at a time."""
    crc = 0
    with open(path, "rb") as fh:
        while block := fh.read(2**20):
            crc = zlib.crc32(block, crc)
    return crc


def _threads(n: int) -> int:
    """usearch threads for adding `n` vectors at once."""
    return BUILD_THREADS if n >= PARALLEL_FROM else 1


def _dimension(store: GraphStore) -> int:
    """The store's vector dimension: a graph is of a store with vectors (usearch cannot
    make one of no dimension)."""
    if store.dim is None:
        raise ValueError(
            f"{store.path}: expected a store with vectors for an HNSW graph, got none yet"
        )
    return store.dim


class HnswIndex:
    """The HNSW graph of one SQLite store (see the module doc). `open` loads, replays or
    rebuilds it; `search` answers; `save` persists it (writers only)."""

    def __init__(
        self,
        db_path: Path,
        index: usearch.index.Index,
        seq: int,
        rebuilt: bool,
        mapped: bool = False,
        suffix: str = ".hnsw",
    ) -> None:
        self.db_path = db_path
        self.suffix = suffix  # the graph file's name: the database's and this
        self.index = index
        self.seq = seq
        self.rebuilt = rebuilt  # built from the vectors by this open (not loaded)
        self.mapped = mapped  # the saved file memory-mapped (read-only), not loaded

    @staticmethod
    def paths(db_path: Path, suffix: str = ".hnsw") -> tuple[Path, Path]:
        """(graph file, header file) beside the database: the full vectors' graph, or with
        `suffix` another vector set's (`quick_graph.QuickVectors.graph_suffix`)."""
        graph = db_path.parent / (db_path.name + suffix)  # a suffix may name a folder
        return graph, graph.with_name(graph.name + ".json")

    @classmethod
    def open(cls, store: GraphStore, *, writable: bool = False) -> HnswIndex:
        """The store's index, current to its committed state. Read-only opens memory-map
        the saved graph when nothing is to replay (`writable=False`)."""
        from usearch.index import Index

        with store.reading():  # one snapshot: the log, the count and the vectors agree
            return cls._open(store, Index, writable)

    @classmethod
    def _open(
        cls, store: GraphStore, Index: type[usearch.index.Index], writable: bool
    ) -> HnswIndex:
        db_path = Path(store.path)
        dim = _dimension(store)
        graph, header = cls.paths(db_path, store.graph_suffix)
        log_first, log_last, count = store.chunk_log_state()
        try:
            meta = json.loads(header.read_text())
            behind = meta["seq"] < log_last
            quiet = behind and cls._quiet(store, meta["seq"], log_first, log_last)
            pending = behind and not quiet
            current = meta["seq"] == log_last or quiet
            usable = (
                meta.get("format") == INDEX_FORMAT
                and meta["store_id"] == store.store_id
                and meta["dim"] == dim
                and graph.stat().st_size == meta["size"]
                and (
                    pending
                    or (
                        current
                        and meta["count"] == count
                        and meta["max_id"] == store.max_chunk_id()
                    )
                )
                and (not pending or (log_first is not None and log_first <= meta["seq"] + 1))
            )
            why = "" if usable else "its header is of another store, format or state"
        except (OSError, ValueError, KeyError, TypeError) as exc:
            usable, meta = False, None
            why = f"{type(exc).__name__}: {exc}"
        if usable:
            view = not (writable or pending)
            index: usearch.index.Index | None = None
            # The file is checked before usearch reads it: usearch trusts what it restores.
            whole = meta["size"] <= store.verify_whole_below
            why = cls._file_damage(graph, meta, dim, view, whole) or ""
            if not why:
                try:
                    index = Index.restore(str(graph), view=view)
                except Exception as exc:  # a torn or foreign file: rebuilt below
                    why = f"unreadable ({type(exc).__name__})"
            if index is not None and index.ndim != dim:
                why = f"of dimension {index.ndim}"
                index = None
            if index is not None and view and not whole:
                why = cls._sample_damage(index, meta, store) or ""
                index = None if why else index
            if index is not None:
                self = cls(db_path, index, meta["seq"], False, view, suffix=store.graph_suffix)
                if pending:
                    self._replay(store, log_last)
                self.seq = log_last
                if len(self.index) == count:
                    return self
                why = f"holding {len(self.index)} vectors, not the store's {count}"
        if meta is not None or graph.exists():
            log.warning(
                "%s: the HNSW graph beside it is unusable (%s: %s); rebuilt from the stored "
                "vectors",
                db_path,
                graph.name,
                why,
            )
        return cls._build(store, db_path)

    @staticmethod
    def _quiet(store: GraphStore, seq: int, log_first: int | None, log_last: int) -> bool:
        """Whether nothing the store logged after `seq` concerns this graph (the store's
        `chunk_log_ids` gives none: a set that tells which logged chunks may be in its
        graph or belong in it, `sqlite_segments.FullSegment`), so that a graph saved at
        `seq` is current without a replay; False when the log no longer reaches back."""
        return (
            log_first is not None
            and log_first <= seq + 1
            and not store.chunk_log_ids(seq, log_last)
        )

    @staticmethod
    def _file_damage(
        graph: Path, meta: dict[str, Any], dim: int, view: bool, whole: bool
    ) -> str | None:
        """Why the saved file is not safe to restore, or None: its CRC-32 is not the
        header's (a graph to load, or one to map that is checked `whole`: up to the store's
        `verify_whole_below` bytes); another one to map has its structure checked
        (`hnsw_file.graph_damage`) unless its size and mtime are still those it was saved
        with (so the check reads no more than the graph section, once per saved graph: a
        cold search over an untouched graph reads only the pages its walk touches).
        `_sample_damage` then checks such a graph's vectors."""
        if not view or whole:
            if file_crc32(graph) != meta.get("crc32"):
                return "damaged (its bytes are not the ones saved)"
            return None
        if meta.get("mtime_ns") == graph.stat().st_mtime_ns:
            return None
        damage = graph_damage(graph, dim, ITEM_BYTES)
        return f"damaged ({damage})" if damage else None

    @staticmethod
    def _sample_damage(
        index: usearch.index.Index, meta: dict[str, Any], store: GraphStore
    ) -> str | None:
        """Why a large mapped graph is not the one saved, or None: a sample of
        `VERIFY_SAMPLE` of its vectors must equal the store's."""
        ids, vectors = store.vectors_of(
            np.random.default_rng().integers(store.first_id, meta["max_id"] + 1, VERIFY_SAMPLE)
        )
        if not len(ids):
            return None
        present = np.array([index.contains(int(i)) for i in ids])
        if not present.all():
            return "damaged (stored chunks are missing from it)"
        got = np.asarray(index.get(ids.astype(np.uint64)), np.float32)
        if got.shape != vectors.shape or not np.allclose(got, vectors, atol=1e-6):
            return "damaged (its vectors are not the store's)"
        return None

    @classmethod
    def _build(cls, store: GraphStore, db_path: Path) -> HnswIndex:
        from usearch.index import Index

        index = Index(
            ndim=_dimension(store),
            metric="ip",
            dtype=DTYPE,
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
        )
        seq = store.chunk_log_state()[1]
        for ids, matrix in store.iter_vectors():
            index.add(ids.astype(np.uint64), matrix, threads=_threads(len(ids)))
        return cls(db_path, index, seq, rebuilt=True, suffix=store.graph_suffix)

    def _replay(self, store: GraphStore, upto: int) -> None:
        """Apply the logged inserts and deletes after `self.seq`: the net effect per chunk
        id (a chunk deleted then inserted again is re-added with its new vector)."""
        touched = store.chunk_log_ids(self.seq, upto)
        present = [int(i) for i in touched if self.index.contains(int(i))]
        if present:
            self.index.remove(np.asarray(present, np.uint64))
        self.add(*store.vectors_of(touched))
        self.seq = upto

    def add(self, ids: Ids, matrix: Vectors) -> None:
        """Add chunks `ids` `[N]` with their vectors `[N, dim]` (on every core for a large
        batch: `PARALLEL_FROM`)."""
        if len(ids):
            self.index.add(ids.astype(np.uint64), matrix, threads=_threads(len(ids)))

    def catch_up(self, store: GraphStore) -> bool:
        """Bring this graph up to the store's committed state by replaying the log since
        `self.seq` (one read snapshot) into the graph loaded into memory; a memory-mapped
        graph (read-only) only moves on to the log's end when nothing logged concerns it
        (`_quiet`). False when it cannot: a mapped graph that something logged concerns, a
        log pruned past `self.seq`, or a replay that leaves another count than the
        store's; the caller then drops this graph and opens it again (`open`)."""
        with store.reading():
            first, last, count = store.chunk_log_state()
            if last > self.seq:
                if first is None or first > self.seq + 1:
                    return False
                if self.mapped:
                    if store.chunk_log_ids(self.seq, last):
                        return False
                    self.seq = last
                else:
                    self._replay(store, last)
            return len(self.index) == count

    def __len__(self) -> int:
        return len(self.index)

    def search(self, queries: Vectors, n: int, ef: int) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, inner product) per row of `queries` `[Q, dim]`, with a
        search beam of `max(ef, n)` candidates (wider: higher recall, slower)."""
        from usearch.index import Matches

        n = min(int(n), len(self.index))
        if n == 0:
            return [[] for _ in range(len(queries))]
        # not kept in the saved file; usearch declares this setter apart from its getter,
        # which mypy does not recognise as one
        self.index.expansion_search = max(int(ef), n)  # type: ignore[misc]
        found = self.index.search(queries, n, threads=1)
        # One query gives `Matches` (its hits only), several `BatchMatches` (padded rows
        # and `counts`). usearch's "ip" distance is 1 - inner product.
        if isinstance(found, Matches):
            return [
                [
                    (int(key), float(1.0 - d))
                    for key, d in zip(found.keys, found.distances, strict=True)
                ]
            ]
        return [
            [
                (int(found.keys[q, j]), float(1.0 - found.distances[q, j]))
                for j in range(int(found.counts[q]))
            ]
            for q in range(len(queries))
        ]

    @classmethod
    def advance(cls, store: GraphStore) -> bool:
        """Move the saved header of `store`'s graph on to the store's log position when
        nothing logged since its save concerns the set (`_quiet`) and the header still
        describes the set (its count and largest id) and the file beside it (its size),
        without reading the graph: a process that opens it later looks at the log from
        here only. Whether the saved pair is current now; False leaves it as it was (an
        open replays or rebuilds it). For a writer, under the run lock."""
        graph, header = cls.paths(Path(store.path), store.graph_suffix)
        with store.reading():
            log_first, log_last, count = store.chunk_log_state()
            try:
                meta = json.loads(header.read_text())
                described = (
                    meta.get("format") == INDEX_FORMAT
                    and meta["store_id"] == store.store_id
                    and meta["seq"] <= log_last
                    and graph.stat().st_size == meta["size"]
                    and meta["count"] == count
                    and meta["max_id"] == store.max_chunk_id()
                )
            except (OSError, ValueError, KeyError, TypeError):
                return False
            if not described:
                return False
            if meta["seq"] == log_last:
                return True
            if not cls._quiet(store, meta["seq"], log_first, log_last):
                return False
        tmp_header = header.with_name(header.name + f".{os.getpid()}.tmp")
        tmp_header.write_text(json.dumps({**meta, "seq": log_last}))
        os.replace(tmp_header, header)
        return True

    def save(self, store: GraphStore) -> None:
        """Write the graph and its header atomically (a reader sees the old pair or the
        new one: the header names the graph's size, so a mix is rebuilt, not trusted)."""
        graph, header = self.paths(self.db_path, self.suffix)
        tmp = graph.with_name(graph.name + f".{os.getpid()}.tmp")
        graph.parent.mkdir(exist_ok=True)
        self.index.save(str(tmp))
        os.replace(tmp, graph)
        meta = {
            "format": INDEX_FORMAT,
            "store_id": store.store_id,
            "dim": store.dim,
            "seq": self.seq,
            "size": graph.stat().st_size,
            "crc32": file_crc32(graph),
            "mtime_ns": graph.stat().st_mtime_ns,
            "count": len(self.index),
            "dtype": DTYPE,
            "max_id": store.max_chunk_id(),
            "connectivity": CONNECTIVITY,
            "expansion_add": EXPANSION_ADD,
        }
        tmp_header = header.with_name(header.name + f".{os.getpid()}.tmp")
        tmp_header.write_text(json.dumps(meta))
        os.replace(tmp_header, header)

    @classmethod
    def remove_files(cls, db_path: Path, suffix: str = ".hnsw") -> None:
        for path in cls.paths(db_path, suffix):
            path.unlink(missing_ok=True)
