"""The SQLite store's quick list over its own HNSW graphs, one per segment of chunk ids
(`segment_graph.SegmentGraph`, each an `ann.HnswIndex`): saved beside the database when a run
ends, one segment in memory at a time, searched with the recall of the full vectors'
graph, kept in step as the full pass takes chunks out (replayed, by the searching process,
from the chunk log), filtered, and gone once every chunk has its full vector; exact below
the threshold."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from graph_damage_testing import DAMAGES, damage_graph
from quick_testing import SOURCES, assert_recall, fill, found, make_folder, queries, write_quick

from attnswitch.indexing import quick_graph
from attnswitch.indexing.ann import HnswIndex, exact_top_k
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.quick_graph import segment_paths
from attnswitch.indexing.segment_graph import SegmentGraph
from attnswitch.indexing.store import SQLiteStore
from store_testing import FIRST_SEGMENT

pytest.importorskip("usearch", reason="usearch (the HNSW library) is not installed")
PER_DOC = 60
THRESHOLD = 100  # chunks: three documents of quick vectors go above it
QUERIES = queries(8)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


def quick_pass(db: Path, root: Path, sources=SOURCES) -> None:
    """Store `sources` as the quick pass does, in one run that completes."""
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        run = store.begin_run(root)
        write_quick(store, root, PER_DOC, sources)
        store.finish_run(run)


def exact(store: SQLiteStore, queries: np.ndarray, n: int, among=None) -> list[list[int]]:
    ids, matrix = store.quick_vectors.vectors()
    if among is not None:
        keep = np.isin(ids, list(among))
        ids, matrix = ids[keep], matrix[keep]
    return [[cid for cid, _ in hits] for hits in exact_top_k(ids, matrix, queries, n)]


def test_the_quick_pass_saves_a_graph_of_the_quick_vectors(tmp_path: Path, root: Path) -> None:
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    assert [p.name for p in segment_paths(db)] == ["0.hnsw", "0.hnsw.json"]
    assert not HnswIndex.paths(db, FIRST_SEGMENT)[0].exists()  # no full vector: no full graph
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        assert store.quick_vectors.count() == PER_DOC * len(SOURCES)
        got = found(store, QUERIES, 10)
        searcher = store._quick[1]
        assert isinstance(searcher, SegmentGraph) and not searcher.rebuilt and searcher.mapped
        assert_recall(got, exact(store, QUERIES, 10))


def test_below_the_threshold_the_quick_list_is_exact_and_has_no_graph(
    tmp_path: Path, root: Path
) -> None:
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root, SOURCES[:1])  # 60 chunks, under THRESHOLD
    assert not segment_paths(db)
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        assert found(store, QUERIES, 10) == exact(store, QUERIES, 10)


def test_chunks_the_full_pass_encodes_leave_the_quick_list_of_a_searching_process(
    tmp_path: Path, root: Path
) -> None:
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    with SQLiteStore(db, exact_below=THRESHOLD) as reader:
        first = found(reader, QUERIES, 10)
        encoded = sorted({cid for hits in first for cid in hits[:3]})
        with SQLiteStore(db, exact_below=THRESHOLD) as writer:  # another connection
            fill(writer, encoded)
        second = found(reader, QUERIES, 10)
        assert not set(encoded) & {cid for hits in second for cid in hits}
        assert reader.quick_vectors.count() == PER_DOC * len(SOURCES) - len(encoded)
        assert_recall(second, exact(reader, QUERIES, 10))
        # the searching process replays the log into the graph it loaded: no reload
        graph = reader._quick[1]
        with SQLiteStore(db, exact_below=THRESHOLD) as writer:
            fill(writer, [cid for cid in range(1, 6) if cid not in encoded])
        found(reader, QUERIES, 10)
        assert reader._quick[1] is graph


def test_a_filtered_quick_list_gives_n_allowed_chunks(tmp_path: Path, root: Path) -> None:
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    where = SearchFilter.of(path="a/1.txt")
    with SQLiteStore(db, exact_below=THRESHOLD // 2) as store:
        allowed = {
            r[0]
            for r in store._conn.execute(
                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "WHERE d.source = 'a/1.txt'"
            )
        }
        got = found(store, QUERIES, 10, where)
        assert all(len(hits) == 10 and set(hits) <= allowed for hits in got)
        assert_recall(got, exact(store, QUERIES, 10, among=allowed))


def test_the_graph_goes_when_every_chunk_has_its_full_vector(tmp_path: Path, root: Path) -> None:
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        run = store.begin_run(root)
        fill(store, [r[0] for r in store._conn.execute("SELECT id FROM chunks")])
        store.finish_run(run)
        assert found(store, QUERIES, 10) == [[] for _ in QUERIES]
    assert not segment_paths(db)
    assert HnswIndex.paths(db, FIRST_SEGMENT)[0].exists()  # the full vectors' graph took over


def test_a_quick_graph_of_another_state_is_rebuilt_not_trusted(tmp_path: Path, root: Path) -> None:
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    graph = segment_paths(db)[0]
    # another program changes a quick vector: the trigger logs it, the graph replays it
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE chunks SET quick = NULL WHERE id = 1")
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        assert 1 not in {cid for hits in found(store, QUERIES, 240) for cid in hits}
    graph.write_bytes(graph.read_bytes()[:-64])  # torn
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        got = found(store, QUERIES, 10)
        assert store._quick[1].rebuilt
        assert got == found(store, QUERIES, 10)
        assert_recall(got, exact(store, QUERIES, 10))


def test_a_writer_saves_the_quick_graph_mid_run_for_searches_during_the_full_pass(
    tmp_path: Path, root: Path
) -> None:
    from attnswitch.indexing.writer import IndexWriter

    db = tmp_path / "index.sqlite3"
    graph, _ = HnswIndex.paths(db, f"{quick_graph.GRAPH_DIR}/0.hnsw")
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        writer = IndexWriter(store)
        with writer:
            writer.sync()  # nothing written yet: nothing made
            assert not graph.exists()
            write_quick(writer, root, PER_DOC)
            writer.sync()
            assert graph.exists()  # while the run lock is still held
            with SQLiteStore(db, exact_below=THRESHOLD) as reader:
                found(reader, QUERIES, 10)
                assert reader._quick[1].mapped  # the saved graph, not one of its own


@pytest.fixture
def small_segments(monkeypatch: pytest.MonkeyPatch) -> int:
    """Segments of 64 ids: the four documents' 240 chunks span four (64, 64, 64, 48)."""
    monkeypatch.setattr(quick_graph, "SEGMENT_IDS", 64)
    return 64


def test_the_graph_is_cut_into_segments_and_built_one_at_a_time(
    tmp_path: Path, root: Path, small_segments: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weakref

    graphs: weakref.WeakSet[HnswIndex] = weakref.WeakSet()
    loaded_at_save: list[int] = []
    init, save = HnswIndex.__init__, HnswIndex.save

    def tracked_init(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        graphs.add(self)

    def counted_save(self, store) -> None:
        loaded_at_save.append(sum(not g.mapped for g in graphs))
        save(self, store)

    monkeypatch.setattr(HnswIndex, "__init__", tracked_init)
    monkeypatch.setattr(HnswIndex, "save", counted_save)
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    assert loaded_at_save == [1, 1, 1, 1]  # each segment saved with no other in memory
    names = [p.name for p in segment_paths(db)]
    assert names == [f"{k}.hnsw{end}" for k in range(4) for end in ("", ".json")]
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        hits = store.quick(QUERIES, 10)
        graph = store._quick[1]
        assert isinstance(graph, SegmentGraph) and graph.mapped
        assert [len(g) for _, g in graph.parts] == [64, 64, 64, 48]
        # merged across segments: score descending, then id
        assert all(row == sorted(row, key=lambda h: (-h[1], h[0])) for row in hits)
        assert_recall(found(store, QUERIES, 10), exact(store, QUERIES, 10))


def test_the_segments_keep_step_with_the_full_pass_and_an_emptied_one_goes(
    tmp_path: Path, root: Path, small_segments: int
) -> None:
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    with SQLiteStore(db, exact_below=THRESHOLD) as reader:
        found(reader, QUERIES, 10)
        with SQLiteStore(db, exact_below=THRESHOLD) as writer:
            fill(writer, [3, 70, 200])  # one chunk out of three segments
        assert 70 not in {cid for hits in found(reader, QUERIES, 240) for cid in hits}
        graph = reader._quick[1]  # the mapped segments loaded, to replay
        assert not graph.mapped
        with SQLiteStore(db, exact_below=THRESHOLD) as writer:
            fill(writer, [4, 71, 201])
        assert 71 not in {cid for hits in found(reader, QUERIES, 240) for cid in hits}
        assert reader._quick[1] is graph  # each segment replayed in place
        with SQLiteStore(db, exact_below=THRESHOLD) as writer:
            run = writer.begin_run(root)
            fill(writer, [i for i in range(65, 129) if i not in (70, 71)])  # segment 1 emptied
            writer.finish_run(run)
        assert not {p.name for p in segment_paths(db)} & {"1.hnsw", "1.hnsw.json"}
        got = found(reader, QUERIES, 10)
        assert reader._quick[1] is not graph  # another set of segments: opened again
        assert [p.segment for p, _ in reader._quick[1].parts] == [0, 2, 3]
        assert not {cid for hits in got for cid in hits} & set(range(65, 129))
        assert_recall(got, exact(reader, QUERIES, 10))


def test_a_damaged_segment_is_rebuilt_alone(
    tmp_path: Path, root: Path, small_segments: int
) -> None:
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    graph = db.with_name(db.name + quick_graph.GRAPH_DIR) / "2.hnsw"
    graph.write_bytes(graph.read_bytes()[:-64])  # torn
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        got = found(store, QUERIES, 10)
        assert [g.rebuilt for _, g in store._quick[1].parts] == [False, False, True, False]
        assert_recall(got, exact(store, QUERIES, 10))


def test_the_segments_folder_is_the_stores_own(tmp_path: Path, root: Path) -> None:
    from attnswitch.indexing.store import is_own

    db = root / "index.sqlite3"  # a store inside the folder it indexes
    quick_pass(db, root)
    with SQLiteStore(db, exact_below=THRESHOLD) as store:
        own = store.own_files()
    assert segment_paths(db) and all(is_own(p.resolve(), own) for p in segment_paths(db))
    assert not is_own((root / "a" / "1.txt").resolve(), own)


QUICK_SEARCH = """
import json, sys
from attnswitch.indexing.store import SQLiteStore
from quick_testing import queries
with SQLiteStore(sys.argv[1], exact_below=int(sys.argv[2])) as store:
    hits = store.quick(queries(8), 10)
    print(json.dumps({"each": min(len(h) for h in hits),
                      "rebuilt": [g.rebuilt for _, g in store._quick[1].parts]}))
"""


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_segment_with_a_damaged_structure_is_rebuilt_not_walked(
    tmp_path: Path, root: Path, damage: str
) -> None:
    """A segment is never checked by its CRC-32 (a search opens every one), so damage to
    its graph section is caught by the structure check, as for a large graph (issue 41):
    the search, in a fresh process, ends normally over a rebuilt segment."""
    db = tmp_path / "index.sqlite3"
    quick_pass(db, root)
    damage_graph(segment_paths(db)[0], damage)
    out = subprocess.run(
        [sys.executable, "-c", QUICK_SEARCH, str(db), str(THRESHOLD)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path])),
    )
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    assert json.loads(out.stdout.splitlines()[-1]) == {"each": 10, "rebuilt": [True]}
    assert "HNSW graph beside it is unusable" in out.stderr
