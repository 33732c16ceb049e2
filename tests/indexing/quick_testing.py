"""What the quick-list tests of both stores share (tests/indexing/test_quick_graph.py,
test_store_postgres_quick.py): a folder of four documents, the quick pass's writes (chunks
with quick vectors and no full one), the full pass's, and the recall rule of an ANN quick
list against the exact one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.store import ChunkRecord

QUICK_DIM = 16
FULL_DIM = 24
SOURCES = ("a/1.txt", "a/2.txt", "b/1.txt", "b/2.txt")
# The full vectors' segments' tests (test_sqlite_segments.py, test_postgres_segments.py):
# chunks a document (600 in all), the tail sealed at each `SEAL_AT`, `FILL_BATCH` vectors
# a fill, and full-vector queries.
SEGMENTS_PER_DOC = 150
SEAL_AT = 100
FILL_BATCH = 50


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def queries(n: int, seed: int = 99) -> np.ndarray:
    """`n` random unit queries `[n, QUICK_DIM]`."""
    return unit(np.random.default_rng(seed).normal(size=(n, QUICK_DIM)))


def full_queries(n: int = 12, seed: int = 7) -> np.ndarray:
    """`n` random unit queries `[n, FULL_DIM]`."""
    return unit(np.random.default_rng(seed).normal(size=(n, FULL_DIM)))


def make_folder(tmp_path: Path) -> Path:
    """`SOURCES` under `tmp_path/docs`, each a short text of its own."""
    folder = tmp_path / "docs"
    for source in SOURCES:
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        (folder / source).write_text(f"document {source} " * 30)
    return folder


def write_quick(writer: Any, root: Path, per_doc: int, sources=SOURCES) -> None:
    """Write `sources` as the quick pass does, through `writer` (a store or an
    `IndexWriter` holding the lock): `per_doc` chunks each, quick vectors (seeded by the
    document's place), no full vector."""
    writer.set_quick_model("static-test", QUICK_DIM)
    docs = {d.source: d for d in ingest(root)}
    for seed, source in enumerate(sources):
        writer.write_document(
            docs[source],
            [ChunkRecord(f"{source} {i}", 1, i, i + 1) for i in range(per_doc)],
            None,
            quick=np.random.default_rng(seed).normal(size=(per_doc, QUICK_DIM)),
        )


def fill(store: Any, ids: list[int]) -> None:
    """Write full vectors for chunks `ids`, as the full pass does (their vector keys as
    the store gives them)."""
    keys = {u.id: u.vector_key for u in store.unencoded_among(sorted(ids))}
    vectors = np.random.default_rng(len(ids)).normal(size=(len(ids), FULL_DIM))
    assert store.fill_vectors(sorted(ids), [keys[i] for i in sorted(ids)], vectors) == len(ids)


def found(store: Any, queries: np.ndarray, n: int, where=None) -> list[list[int]]:
    """The chunk ids of each query's quick list."""
    return [[cid for cid, _ in hits] for hits in store.quick(queries, n, where)]


def assert_recall(got: list[list[int]], want: list[list[int]]) -> None:
    """An ANN quick list finds at least 98% of the exact neighbours (the stores' recall
    target, as for the full vectors' graph)."""
    hit = sum(len(set(g) & set(w)) for g, w in zip(got, want, strict=True))
    total = sum(len(w) for w in want)
    assert hit >= 0.98 * total, f"recall {hit / total:.3f} < 0.98"
