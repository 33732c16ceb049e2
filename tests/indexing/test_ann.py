"""The SQLite store's HNSW graph (`ann.HnswIndex`) on real files: saved beside the database
when a run ends, kept in step with inserts and deletes made since (replayed from the chunk
log), rebuilt when missing, torn, another store's or stale, never trusted blindly; exact
search below the threshold."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from graph_damage_testing import DAMAGES, damage_graph

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.ann import HnswIndex, exact_top_k
from attnswitch.indexing.sqlite_segments import FullSegment
from attnswitch.indexing.store import ChunkRecord, SQLiteStore, StoreInputError
from store_testing import FIRST_SEGMENT, as_float32_blobs

pytest.importorskip("usearch", reason="usearch (the HNSW library) is not installed")
DIM = 24
PER_DOC = 40
THRESHOLD = 100  # chunks: the tests' stores go above it with 3 documents


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a", "b", "c", "d"):
        (folder / f"{name}.txt").write_text(f"document {name} " * 30)
    return folder


def write(store: SQLiteStore, root: Path, source: str, seed: int) -> np.ndarray:
    (doc,) = [d for d in ingest(root) if d.source == source]
    vectors = np.random.default_rng(seed).normal(size=(PER_DOC, DIM))
    store.write_document(
        doc, [ChunkRecord(f"{source} {i}", 1, i, i + 1) for i in range(PER_DOC)], vectors
    )
    return vectors


def indexed(tmp_path: Path, root: Path, sources=("a.txt", "b.txt", "c.txt")) -> Path:
    db = tmp_path / "index.sqlite3"
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        run = store.begin_run(root)
        for i, source in enumerate(sources):
            write(store, root, source, seed=i)
        store.finish_run(run)
    return db


def exact(store: SQLiteStore, queries: np.ndarray, n: int) -> list[list[int]]:
    ids, matrix = store.vectors()
    return [[cid for cid, _ in hits] for hits in exact_top_k(ids, matrix, queries, n)]


def assert_recall(got: list[list[int]], want: list[list[int]]) -> None:
    """HNSW search is approximate: the graph must find at least 98% of the exact
    neighbours (the recall@k target of the store), over all queries."""
    found = sum(len(set(g) & set(w)) for g, w in zip(got, want, strict=True))
    total = sum(len(w) for w in want)
    assert found >= 0.98 * total, f"recall {found / total:.3f} < 0.98: {got} vs {want}"


def dense_ids(
    store: SQLiteStore, queries: np.ndarray, n: int, ef: int | None = None
) -> list[list[int]]:
    return [[cid for cid, _ in hits] for hits in store.dense(queries, n, ef)]


def sql(db: Path, *statements: str) -> list:
    """Run statements on the store's file through a connection of its own (SQLite, as any
    other program could), committed; the rows of the last one."""
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        rows: list = []
        for statement in statements:
            rows = conn.execute(statement).fetchall()
        return rows


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


QUERIES = unit(np.random.default_rng(99).normal(size=(8, DIM)))


def test_a_run_saves_the_graph_and_search_reads_it(tmp_path: Path, root: Path) -> None:
    db = indexed(tmp_path, root)
    graph, header = HnswIndex.paths(db, FIRST_SEGMENT)
    meta = json.loads(header.read_text())
    assert graph.is_file() and meta["count"] == 3 * PER_DOC and meta["dim"] == DIM
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        assert meta["store_id"] == store.store_id
        index = HnswIndex.open(FullSegment(store, 0, 1))
        assert not index.rebuilt and len(index) == 3 * PER_DOC
        assert_recall(dense_ids(store, QUERIES, 10), exact(store, QUERIES, 10))
        for q in QUERIES[:3]:  # one query at a time, as search asks
            assert_recall(dense_ids(store, q[None, :], 10), exact(store, q[None, :], 10))
    assert sql(db, "SELECT COUNT(*) FROM chunk_log") == [(0,)]


def test_inserts_and_deletes_since_the_save_are_replayed(tmp_path: Path, root: Path) -> None:
    db = indexed(tmp_path, root)
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        gone = {r.id for r in store.document_chunks(root, "a.txt")}
        store.remove(root, ["a.txt"])
        added = write(store, root, "d.txt", seed=7)
        write(store, root, "b.txt", seed=8)  # rewritten: same ordinals, new ids and vectors
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        index = HnswIndex.open(FullSegment(store, 0, 1))
        # the segment keeps c.txt's; d.txt's and b.txt's new vectors are in the tail
        assert not index.rebuilt and len(index) == PER_DOC and store.count() == 3 * PER_DOC
        assert not any(index.index.contains(i) for i in gone)
        found = dense_ids(store, unit(added), 1)
        d_ids = [r.id for r in store.document_chunks(root, "d.txt")]
        assert [hits[0] for hits in found] == d_ids  # each new vector finds its own chunk
        hits = dense_ids(store, QUERIES, 30)
        assert not gone & {cid for row in hits for cid in row}
        assert_recall(hits, exact(store, QUERIES, 30))


def test_a_clean_graph_is_memory_mapped_and_one_with_writes_to_replay_is_loaded(
    tmp_path: Path, root: Path
) -> None:
    db = indexed(tmp_path, root)
    graph = str(HnswIndex.paths(db, FIRST_SEGMENT)[0].resolve())
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        index = HnswIndex.open(FullSegment(store, 0, 1))
        assert index.mapped and not index.rebuilt
        maps = Path("/proc/self/maps")
        if maps.exists():  # Linux: the file itself is mapped into this process
            assert graph in maps.read_text()
        assert_recall(dense_ids(store, QUERIES, 10), exact(store, QUERIES, 10))
        write(store, root, "d.txt", seed=3)  # into the tail: nothing the segment holds
        quiet = HnswIndex.open(FullSegment(store, 0, 1))
        assert quiet.mapped and len(quiet) == 3 * PER_DOC and store.count() == 4 * PER_DOC
        store.remove(root, ["a.txt"])  # chunks the segment holds
        replayed = HnswIndex.open(FullSegment(store, 0, 1))
        assert not replayed.mapped and not replayed.rebuilt and len(replayed) == 2 * PER_DOC
        assert_recall(dense_ids(store, QUERIES, 10), exact(store, QUERIES, 10))


@pytest.mark.parametrize(("ef", "n"), [(1, 10), (10, 10), (64, 10), (300, 5)])
@pytest.mark.parametrize("given", ["store", "call"])
def test_the_search_beam_is_the_stores_or_the_calls_and_at_least_n(
    tmp_path: Path, root: Path, ef: int, n: int, given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = indexed(tmp_path, root)
    beams: list[int] = []  # the graph's beam at each search, as usearch holds it
    search = HnswIndex.search

    def recorded(self, queries, n, ef):
        found = search(self, queries, n, ef)
        beams.append(self.index.expansion_search)
        return found

    monkeypatch.setattr(HnswIndex, "search", recorded)
    with SQLiteStore(
        db, exact_below=THRESHOLD, ef_search=ef if given == "store" else None
    ) as store:
        hits = dense_ids(store, QUERIES, n, ef if given == "call" else None)
        assert beams == [max(ef, n)]
        assert [len(row) for row in hits] == [n] * len(QUERIES)
        if ef >= 64:  # a beam of about k finds fewer of the exact neighbours, by design
            assert_recall(hits, exact(store, QUERIES, n))
        if given == "call":  # the store's own beam is the default again for the next call
            store.dense(QUERIES, 1)
            assert beams[-1] == store.ef_search


@pytest.mark.parametrize("ef", [0, -3, 1001, 2.5, True, "64"])
def test_a_bad_search_beam_is_refused_by_name(tmp_path: Path, root: Path, ef: object) -> None:
    with pytest.raises(
        StoreInputError, match=r"ef_search: expected an integer from 1 to 1000, got"
    ):
        SQLiteStore(tmp_path / "other.sqlite3", ef_search=ef)
    with (
        SQLiteStore(indexed(tmp_path, root), exact_below=THRESHOLD) as store,
        pytest.raises(StoreInputError, match="ef_search: expected an integer from 1"),
    ):
        store.dense(QUERIES, 5, ef)


@pytest.mark.parametrize(
    "damage",
    [
        "missing",
        "torn",
        "other store",
        "other dim",
        "log pruned",
        "older format",
        "deleted behind the log",
        "replaced behind the log",
    ],
)
def test_a_damaged_or_stale_graph_is_rebuilt(tmp_path: Path, root: Path, damage: str) -> None:
    db = indexed(tmp_path, root)
    graph, header = HnswIndex.paths(db, FIRST_SEGMENT)
    meta = json.loads(header.read_text())
    if damage == "missing":
        graph.unlink()
    elif damage == "torn":
        graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
        meta["size"] = graph.stat().st_size
        header.write_text(json.dumps(meta))
    elif damage == "other store":
        other = indexed(tmp_path / "other", root, ("a.txt", "b.txt", "d.txt"))
        for src, dst in zip(HnswIndex.paths(other, FIRST_SEGMENT), (graph, header), strict=True):
            shutil.copy(src, dst)
    elif damage == "other dim":
        header.write_text(json.dumps({**meta, "dim": DIM * 2}))
    elif damage == "log pruned":  # a write after the save, then its log lost
        with SQLiteStore(db, exact_below=THRESHOLD) as store:
            write(store, root, "d.txt", seed=5)
        sql(db, "DELETE FROM chunk_log")
    elif damage == "older format":  # a format-1 header names no largest chunk id
        header.write_text(json.dumps({**meta, "format": 1}))
    else:  # chunks changed with the log's triggers off: the log position did not move
        with SQLiteStore(db, exact_below=THRESHOLD) as store:
            last = store.max_chunk_id()
        change = (
            f"DELETE FROM chunks WHERE id = {last}"  # the count differs
            if damage == "deleted behind the log"
            else f"UPDATE chunks SET id = {last + 1} WHERE id = {last}"
        )  # same count
        sql(db, "DROP TRIGGER chunks_indexed", "DROP TRIGGER chunks_unindexed", change)
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        segment = FullSegment(store, 0, 1)
        index = HnswIndex.open(segment)
        assert index.rebuilt and len(index) == segment.count()
        assert_recall(dense_ids(store, QUERIES, 10), exact(store, QUERIES, 10))


def test_below_the_threshold_search_is_exact_and_keeps_no_graph(tmp_path: Path, root: Path) -> None:
    db = indexed(tmp_path, root)
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        run = store.begin_run(root)
        store.remove(root, ["a.txt", "b.txt"])
        store.finish_run(run)
        assert store.count() == PER_DOC < THRESHOLD
        assert not any(p.exists() for p in HnswIndex.paths(db, FIRST_SEGMENT))
        assert_recall(dense_ids(store, QUERIES, 5), exact(store, QUERIES, 5))
    assert sql(db, "SELECT COUNT(*) FROM chunk_log") == [(0,)]


def test_a_store_without_vectors_has_no_graph_and_says_so(tmp_path: Path) -> None:
    """A graph needs the store's dimension: asked for one before the first vector (a store
    whose threshold is 0), the index names the file instead of failing inside usearch."""
    with SQLiteStore(tmp_path / "index.sqlite3", exact_below=0) as store:
        assert store.dim is None
        with pytest.raises(ValueError, match=r"index\.sqlite3: expected a store with vectors"):
            HnswIndex.open(FullSegment(store, 0, 1))


def test_a_store_made_before_keyword_search_is_migrated(tmp_path: Path, root: Path) -> None:
    """A version-1 file (no FTS table, no log): opening it indexes the stored text."""
    import sqlite3

    db = indexed(tmp_path, root)
    with sqlite3.connect(db) as conn:
        as_float32_blobs(conn)
        conn.executescript(
            "DROP TRIGGER chunks_indexed; DROP TRIGGER chunks_unindexed; "
            "DROP TABLE chunks_terms; DROP TABLE chunk_log; "
            "PRAGMA user_version = 1;"
        )
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        ((cid, _),) = store.keyword("b.txt 7", 1)
        assert store.chunks([cid])[cid].text == "b.txt 7"
        assert HnswIndex.open(
            FullSegment(store, 0, 1)
        ).rebuilt  # the log it was saved against is gone


def test_a_search_that_rebuilt_the_graph_saves_it_for_the_next(tmp_path: Path, root: Path) -> None:
    db = indexed(tmp_path, root)
    graph, header = HnswIndex.paths(db, FIRST_SEGMENT)
    graph.unlink()
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        assert_recall(dense_ids(store, QUERIES, 10), exact(store, QUERIES, 10))
    assert graph.is_file() and json.loads(header.read_text())["count"] == 3 * PER_DOC
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        index = HnswIndex.open(FullSegment(store, 0, 1))
        assert index.mapped and not index.rebuilt
        run = store.begin_run(root)  # a run holds the store: a search saves nothing
        graph.unlink()
        assert_recall(dense_ids(store, QUERIES, 10), exact(store, QUERIES, 10))
        assert not graph.exists()
        store.finish_run(run)  # the run's end saves it
    assert graph.is_file()


FRESH_SEARCH = """
import json, sys
import numpy as np
from attnswitch.indexing.ann import HnswIndex
from attnswitch.indexing.search import search
from attnswitch.indexing.sqlite_segments import FullSegment
from attnswitch.indexing.store import SQLiteStore
with SQLiteStore(sys.argv[1], exact_below=int(sys.argv[2])) as store:
    hits = search(store, np.ones(store.dim), 5, text="a.txt 3", mode="hybrid")
    mapped = HnswIndex.open(FullSegment(store, 0, 1)).mapped
print(json.dumps({"hits": len(hits), "mapped": mapped,
                  "heavy": sorted(m for m in sys.argv[3].split(",") if m in sys.modules)}))
"""


def test_a_search_over_the_graph_imports_no_model_framework(
    tmp_path: Path, root: Path, model_frameworks: tuple[str, ...]
) -> None:
    db = indexed(tmp_path, root)
    out = subprocess.run(
        [sys.executable, "-c", FRESH_SEARCH, str(db), str(THRESHOLD), ",".join(model_frameworks)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == {"hits": 5, "mapped": True, "heavy": []}


@pytest.mark.parametrize("check", ["checksum", "sample"])
@pytest.mark.parametrize("damage", ["zeroed tail", "flipped bytes"])
def test_a_graph_damaged_in_place_is_detected_logged_and_rebuilt(
    tmp_path: Path, root: Path, damage: str, check: str, caplog, monkeypatch
) -> None:
    """A graph file whose bytes changed but whose size did not (a torn write, a bad disk)
    is not trusted: its CRC-32 differs from the header's (or, for a large memory-mapped
    graph, a sample of its vectors differs from the store's), so it is rebuilt from the
    stored vectors, logged, and searches give the exact neighbours' recall, no crash."""
    import logging

    from attnswitch.indexing import ann

    if check == "sample":
        monkeypatch.setattr(FullSegment, "verify_whole_below", 0)
        monkeypatch.setattr(ann, "VERIFY_SAMPLE", 4 * PER_DOC)
    db = indexed(tmp_path, root)
    graph, _ = HnswIndex.paths(db, FIRST_SEGMENT)
    data = bytearray(graph.read_bytes())
    if damage == "zeroed tail":
        data[len(data) // 2 :] = bytes(len(data) - len(data) // 2)
    else:
        for i in np.random.default_rng(3).integers(len(data) // 2, len(data), 200):
            data[i] ^= 0xFF
    graph.write_bytes(bytes(data))
    with (
        caplog.at_level(logging.WARNING, logger="attnswitch.indexing.ann"),
        SQLiteStore(db, exact_below=THRESHOLD) as store,
    ):
        segment = FullSegment(store, 0, 1)
        index = HnswIndex.open(segment)
        assert index.rebuilt and len(index) == segment.count()
        assert_recall(dense_ids(store, QUERIES, 10), exact(store, QUERIES, 10))
    assert any(
        "HNSW graph beside it is unusable" in r.getMessage() and str(db) in r.getMessage()
        for r in caplog.records
    ), caplog.text


DAMAGED_SEARCH = """
import json, sys
import numpy as np
from attnswitch.indexing import ann
from attnswitch.indexing.sqlite_segments import FullSegment
from attnswitch.indexing.store import SQLiteStore
FullSegment.verify_whole_below = 0  # the large-graph path: memory-mapped, not checksummed
with SQLiteStore(sys.argv[1], exact_below=int(sys.argv[2])) as store:
    queries = np.random.default_rng(1).normal(size=(20, store.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    hits = store.dense(queries, 10)
    print(json.dumps({"rows": len(hits), "each": min(len(h) for h in hits),
                      "rebuilt": ann.HnswIndex.open(FullSegment(store, 0, 1)).rebuilt}))
"""


def _large_graph(tmp_path: Path) -> Path:
    """A store of 3,000 chunks (one document) with its graph saved."""
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "a.txt").write_text("document a " * 30)
    db = tmp_path / "big.sqlite3"
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        run = store.begin_run(folder)
        (doc,) = ingest(folder)
        vectors = np.random.default_rng(0).normal(size=(3000, DIM))
        store.write_document(
            doc, [ChunkRecord(f"c {i}", 1, i, i + 1) for i in range(3000)], vectors
        )
        store.finish_run(run)
    return db


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_large_graph_with_a_damaged_structure_is_rebuilt_not_walked(
    tmp_path: Path, damage: str
) -> None:
    """Issue 41: a memory-mapped graph over `verify_whole_below` used to be checked by a
    sample of its vectors only; damage to its graph section made usearch read wild
    addresses and the search died by SIGSEGV (exit 139). Its structure is now checked
    before usearch maps it (`hnsw_file.graph_damage`): the search, in a fresh process,
    ends normally with full results from a rebuilt graph."""
    db = _large_graph(tmp_path)
    damage_graph(HnswIndex.paths(db, FIRST_SEGMENT)[0], damage)
    out = subprocess.run(
        [sys.executable, "-c", DAMAGED_SEARCH, str(db), str(THRESHOLD)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    assert json.loads(out.stdout.splitlines()[-1]) == {"rows": 20, "each": 10, "rebuilt": False}
    assert "HNSW graph beside it is unusable" in out.stderr


def test_the_structure_check_is_paid_once_per_saved_graph(
    tmp_path: Path, root: Path, monkeypatch
) -> None:
    """A mapped large graph whose size and mtime are those it was saved with is trusted
    structurally (a cold search reads only what it touches); one touched since is checked."""
    from attnswitch.indexing import ann, hnsw_file

    checked: list[Path] = []

    def recording(path: Path, dim: int, item_bytes: int) -> str | None:
        checked.append(path)
        return hnsw_file.graph_damage(path, dim, item_bytes)

    monkeypatch.setattr(FullSegment, "verify_whole_below", 0)
    monkeypatch.setattr(ann, "graph_damage", recording)
    db = indexed(tmp_path, root)
    graph, _ = HnswIndex.paths(db, FIRST_SEGMENT)
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        assert HnswIndex.open(FullSegment(store, 0, 1)).mapped and checked == []
    stat = graph.stat()
    os.utime(graph, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        index = HnswIndex.open(FullSegment(store, 0, 1))
        assert index.mapped and not index.rebuilt and checked == [graph]
