"""Both stores (SQLite on real files, PostgreSQL + pgvector on a real throwaway server),
through the one `Store` protocol: plans, per-document transactions, bad input, runs, and a
writer killed with SIGKILL."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnswitch.documents.ingest import Document, Skip, ingest, load, scan
from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import (
    SCHEMA_VERSION,
    ChunkRecord,
    SQLiteStore,
    StoreBusyError,
    StoreInputError,
    resolve_path,
)
from attnswitch.indexing.store_errors import StoreCorruptError
from attnswitch.indexing.writer import IndexWriter
from store_testing import as_float32_blobs, hold_run_lock

DIM = 8


def chunks_of(doc: Document, size: int = 24) -> list[ChunkRecord]:
    text = doc.text
    return [
        ChunkRecord(
            text[i : i + size], len(text[i : i + size].split()), i, min(i + size, len(text))
        )
        for i in range(0, len(text), size)
    ]


def vectors_for(chunks: list, dim: int = DIM, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(len(chunks), dim))


def classified(store: SQLiteStore, root: Path, config: str = "cfg") -> dict[str, list]:
    """What a run finds in `root`: the store's plan of the listing, then each file it must
    read classified. Groups of documents ("new", "changed", "unchanged", "skipped"; a fresh
    file counts as "unchanged" unread, as its entry) and "deleted" sources."""
    plan = IndexWriter(store).plan(root, scan(root), config)
    groups: dict[str, list] = {
        "new": [],
        "changed": [],
        "unchanged": list(plan.fresh),
        "skipped": [],
    }
    for entry in plan.to_read:
        doc = load(entry)
        groups[IndexWriter(store).classify(doc, config)].append(doc)
    return groups | {"deleted": list(plan.deleted)}


def index(store: SQLiteStore, root: Path, config: str = "cfg") -> dict[str, int]:
    """Bring the store up to date with `root` (what a pipeline run does, minus encoding)."""
    groups = classified(store, root, config)
    for doc in groups["new"] + groups["changed"]:
        chunks = chunks_of(doc)
        store.write_document(doc, chunks, vectors_for(chunks), config=config)
    for doc in groups["skipped"]:
        store.record_skip(doc, config=config)
    store.remove(root, groups["deleted"])
    return {name: len(group) for name, group in groups.items()}


def doc_named(root: Path, source: str) -> Document:
    (doc,) = [d for d in ingest(root) if d.source == source]
    return doc


def snapshot(store: SQLiteStore) -> tuple:
    """Everything a reader can see: documents, chunks and vectors."""
    rows = store._conn.execute(
        "SELECT root, source, sha256, status, reason, config, n_chunks"
        " FROM documents ORDER BY root, source"
    ).fetchall()
    chunks = store._conn.execute(
        "SELECT doc_id, ordinal, text, n_tokens, char_start, char_end FROM chunks ORDER BY id"
    ).fetchall()
    ids, matrix = store.vectors()
    return rows, chunks, ids.tolist(), matrix.tobytes(), store.dim


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("Alpha document. " * 10)
    (folder / "b.md").write_text("# Beta\n\nBeta body text that is long enough. " * 3)
    (folder / "sub" / "c.html").write_text(
        "<html><body><p>Gamma page.</p><p>More gamma.</p></body></html>"
    )
    return folder


@pytest.fixture
def store(location):
    with open_store(location) as s:
        yield s


@pytest.fixture
def sqlite_store(tmp_path: Path):
    with SQLiteStore(tmp_path / "db" / "index.sqlite3") as s:
        yield s


# -- plans ----------------------------------------------------------------------------------


def test_plan_new_unchanged_changed_deleted_skipped(store: SQLiteStore, root: Path) -> None:
    assert index(store, root) == {
        "new": 3,
        "changed": 0,
        "unchanged": 0,
        "skipped": 0,
        "deleted": 0,
    }
    first = store.status()
    assert index(store, root) == {
        "new": 0,
        "changed": 0,
        "unchanged": 3,
        "skipped": 0,
        "deleted": 0,
    }
    assert store.status().chunks == first.chunks

    (root / "b.md").write_text("# Beta v2\n\nRewritten.")
    (root / "sub" / "c.html").unlink()
    (root / "d.txt").write_text("Delta, a new file.")
    (root / "e.txt").write_bytes(b"\x00\x01binary")
    plan = classified(store, root)
    assert [d.source for d in plan["new"]] == ["d.txt"]
    assert [d.source for d in plan["changed"]] == ["b.md"]
    assert [d.source for d in plan["unchanged"]] == ["a.txt"]
    assert [d.source for d in plan["skipped"]] == ["e.txt"]
    assert plan["deleted"] == ["sub/c.html"]

    index(store, root)
    assert store.lookup(root, "sub/c.html") is None
    assert store.document_chunks(root, "sub/c.html") == []
    assert (
        "".join(c.text for c in store.document_chunks(root, "b.md")) == "Beta v2\n\nRewritten."
    )  # the blocks' text: Markdown markup dropped
    expected = sum(len(chunks_of(d)) for d in ingest(root) if d.ok)
    assert store.status().chunks == expected == len(store.vectors()[0])


def test_config_change_makes_documents_changed(store: SQLiteStore, root: Path) -> None:
    index(store, root, config="model-a/256/32")
    plan = classified(store, root, "model-a/128/16")
    assert len(plan["changed"]) == 3 and not plan["unchanged"]


def test_skipped_then_fixed_then_broken_again(store: SQLiteStore, root: Path) -> None:
    (root / "x.txt").write_bytes(b"")
    index(store, root)
    row = store.lookup(root, "x.txt")
    assert (row.status, row.reason, row.n_chunks) == ("skipped", "empty: 0 bytes", 0)
    assert [d.source for d in classified(store, root)["skipped"]] == ["x.txt"]

    (root / "x.txt").write_text("Now it has text.")
    assert [d.source for d in classified(store, root)["changed"]] == ["x.txt"]
    index(store, root)
    assert store.lookup(root, "x.txt").status == "indexed"
    assert store.document_chunks(root, "x.txt")

    (root / "x.txt").write_bytes(b"\x00" * 64)
    index(store, root)
    row = store.lookup(root, "x.txt")
    assert row.status == "skipped" and row.reason.startswith("binary")
    assert store.document_chunks(root, "x.txt") == []


def test_plan_refuses_foreign_or_repeated_entries(
    store: SQLiteStore, root: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "z.txt").write_text("z")
    with pytest.raises(StoreInputError, match="entries: expected files under root"):
        IndexWriter(store).plan(root, scan(other))
    entries = scan(root)
    with pytest.raises(StoreInputError, match="each source once"):
        IndexWriter(store).plan(root, entries + entries[:1])


def test_roots_are_independent(store: SQLiteStore, tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"readme of {name}")
    index(store, tmp_path / "one")
    index(store, tmp_path / "two")
    assert store.status().documents == 2 and len(store.status().roots) == 2
    (tmp_path / "two" / "README.md").unlink()
    assert index(store, tmp_path / "two")["deleted"] == 1
    assert store.lookup(tmp_path / "one", "README.md") is not None


def test_is_fresh_and_touch(store: SQLiteStore, root: Path) -> None:
    index(store, root)
    entry = next(e for e in scan(root) if e.source == "a.txt")
    assert IndexWriter(store).is_fresh(entry, "cfg") and not IndexWriter(store).is_fresh(
        entry, "other-cfg"
    )
    st = os.stat(entry.path)
    os.utime(entry.path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    entry = next(e for e in scan(root) if e.source == "a.txt")
    assert not IndexWriter(store).is_fresh(entry, "cfg")
    doc = doc_named(root, "a.txt")
    assert IndexWriter(store).classify(doc, "cfg") == "unchanged"
    store.touch(doc)
    assert IndexWriter(store).is_fresh(entry, "cfg")


def test_one_freshness_rule_reads_skipped_files_again(store: SQLiteStore, root: Path) -> None:
    """A file recorded as skipped is not fresh at the same size and mtime (its reason may be
    gone: a limit raised, a reader installed): `is_fresh` and the plan a run follows agree."""
    (root / "x.txt").write_bytes(b"")
    index(store, root)
    assert store.lookup(root, "x.txt").status == "skipped"
    entry = next(e for e in scan(root) if e.source == "x.txt")
    assert not IndexWriter(store).is_fresh(entry, "cfg")
    plan = IndexWriter(store).plan(root, scan(root), "cfg")
    assert [e.source for e in plan.to_read] == ["x.txt"]
    assert sorted(e.source for e in plan.fresh) == ["a.txt", "b.md", "sub/c.html"]
    assert plan.stored["x.txt"].status == "skipped" and plan.deleted == ()


def test_store_base_names_its_hooks() -> None:
    """A store that leaves out a hook the shared code calls cannot be built."""
    from attnswitch.indexing.store import StoreBase

    class Partial(StoreBase):
        def close(self):
            pass

    with pytest.raises(TypeError, match="_transaction"):
        Partial()
    assert {
        "_transaction",
        "_lock_run",
        "_unlock_run",
        "_upsert",
        "close",
    } == StoreBase.__abstractmethods__


# -- one transaction per document -----------------------------------------------------------


def test_changed_document_replaces_all_its_chunks(store: SQLiteStore, root: Path) -> None:
    doc = doc_named(root, "a.txt")
    long = chunks_of(doc, size=10)
    store.write_document(doc, long, vectors_for(long))
    short = chunks_of(doc, size=100)
    store.write_document(doc, short, vectors_for(short, seed=1))
    rows = store.document_chunks(root, "a.txt")
    assert [r.ordinal for r in rows] == list(range(len(short)))
    assert [(r.text, r.start, r.end) for r in rows] == [(c.text, c.start, c.end) for c in short]
    assert len(store.vectors()[0]) == len(short)


def test_write_failing_mid_document_leaves_the_old_version(
    sqlite_store: SQLiteStore, root: Path
) -> None:
    store = sqlite_store
    old = doc_named(root, "b.md")
    old_chunks = chunks_of(old)
    store.write_document(old, old_chunks, vectors_for(old_chunks), config="cfg")
    before = snapshot(store)

    (root / "b.md").write_text("A completely new beta, written in more than three chunks. " * 4)
    new = doc_named(root, "b.md")
    new_chunks = chunks_of(new)
    assert len(new_chunks) > 3
    # A real database failure in the middle of the document: the fourth chunk's insert.
    with sqlite3.connect(store.path) as other:
        other.execute(
            "CREATE TRIGGER fail_mid_document BEFORE INSERT ON chunks "
            "WHEN NEW.ordinal = 3 BEGIN SELECT RAISE(ABORT, 'injected'); END"
        )
    with pytest.raises(sqlite3.IntegrityError, match="injected"):
        store.write_document(new, new_chunks, vectors_for(new_chunks), config="cfg")

    assert snapshot(store) == before
    assert store.lookup(root, "b.md").sha256 == old.sha256
    assert IndexWriter(store).classify(new, "cfg") == "changed"  # the next run redoes it

    with sqlite3.connect(store.path) as other:
        other.execute("DROP TRIGGER fail_mid_document")
    store.write_document(new, new_chunks, vectors_for(new_chunks), config="cfg")
    assert len(store.document_chunks(root, "b.md")) == len(new_chunks)
    assert IndexWriter(store).classify(new, "cfg") == "unchanged"


_KILLED_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from attnswitch.documents.ingest import ingest
    from attnswitch.indexing.location import open_store
    from attnswitch.indexing.store import ChunkRecord

    root, db = sys.argv[1], sys.argv[2]
    docs = list(ingest(root))
    rng = np.random.default_rng(0)
    with open_store(db) as store:
        store.begin_run(root, "cycle")
        cycle = 0
        while True:  # rewrite every document forever, a different chunk count each cycle
            n = 150 + 37 * (cycle % 5)
            for doc in docs:
                chunks = [ChunkRecord(f"c{cycle} {k}", 2, 0, 0) for k in range(n)]
                store.write_document(doc, chunks, rng.normal(size=(n, 16)),
                                     config=f"c{cycle}")
                if cycle == 0 and doc is docs[0]:
                    print("writing", flush=True)  # one document committed
            cycle += 1
""")


@pytest.mark.parametrize("delay", [0.15, 0.4])
def test_sigkill_mid_write_leaves_whole_documents(root: Path, location, delay: float) -> None:
    db = location
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(root), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline()
        assert line.strip() == "writing", child.stderr.read()
        time.sleep(delay)
        assert child.poll() is None, child.stderr.read()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    with open_store(db) as store:
        rows = store._conn.execute("SELECT id, config, n_chunks FROM documents").fetchall()
        assert rows, "the writer committed nothing before the kill"
        for doc_id, config, n_chunks in rows:
            chunks = [
                (c.ordinal, c.text)
                for c in store.document_chunks(
                    root,
                    store._conn.execute(
                        f"SELECT source FROM documents WHERE id = {doc_id}"
                    ).fetchone()[0],
                )
            ]
            assert [o for o, _ in chunks] == list(range(n_chunks))
            assert {t.split()[0] for _, t in chunks} == {config}
        ids, matrix = store.vectors()
        assert matrix.shape == (sum(r[2] for r in rows), 16)
        # unit vectors rounded to float16 (records.VECTOR_DTYPE): norms within 2^-10 of 1
        np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=2.0**-10)

        run = store.begin_run(root, "resume")  # the killed run's lock died with it
        runs = store.runs()
        assert [r.status for r in runs] == ["running", "interrupted"] and runs[0].id == run
        latest = max(r[1] for r in rows)
        redo = {d.source for d in classified(store, root, latest)["changed"]}
        assert redo == {
            store._conn.execute(f"SELECT source FROM documents WHERE id = {r[0]}").fetchone()[0]
            for r in rows
            if r[1] != latest
        }
        store.finish_run(run)


# -- bad input: a clear error, nothing lost -----------------------------------------------

BAD_VECTORS = {
    "other dim": lambda n: np.ones((n, DIM + 1)),
    "too few rows": lambda n: np.ones((n - 1, DIM)),
    "one-dimensional": lambda n: np.ones(n * DIM),
    "nan": lambda n: np.full((n, DIM), np.nan),
    "zero row": lambda n: np.vstack([np.ones((n - 1, DIM)), np.zeros((1, DIM))]),
    "not numbers": lambda n: [["a"] * DIM] * n,
}


@pytest.mark.parametrize("bad", BAD_VECTORS, ids=list(BAD_VECTORS))
def test_bad_vectors_are_refused_and_nothing_is_lost(
    store: SQLiteStore, root: Path, bad: str
) -> None:
    index(store, root)
    (root / "a.txt").write_text("changed text for alpha, long enough for chunks")
    doc = doc_named(root, "a.txt")
    chunks = chunks_of(doc)
    before = snapshot(store)
    with pytest.raises(StoreInputError, match=r"^vectors: expected "):
        store.write_document(doc, chunks, BAD_VECTORS[bad](len(chunks)))
    assert snapshot(store) == before


BAD_CHUNKS = {
    "missing field": (object(), "attributes text, n_tokens, start, end"),
    "text not str": (ChunkRecord(b"bytes", 1, 0, 5), "str"),
    "negative tokens": (ChunkRecord("x", -1, 0, 1), "an int >= 0"),
    "float span": (ChunkRecord("x", 1, 0.5, 1), "an int >= 0"),
    "end before start": (ChunkRecord("x", 1, 5, 2), ">= start 5"),
}


@pytest.mark.parametrize("bad", BAD_CHUNKS, ids=list(BAD_CHUNKS))
def test_bad_chunks_are_refused_and_nothing_is_written(
    store: SQLiteStore, root: Path, bad: str
) -> None:
    index(store, root)
    doc = doc_named(root, "a.txt")
    chunk, expected = BAD_CHUNKS[bad]
    good = chunks_of(doc)
    before = snapshot(store)
    with pytest.raises(StoreInputError, match=rf"^chunks\[1\]\.?\w*: expected {expected}"):
        store.write_document(doc, [good[0], chunk], vectors_for(good[:2]))
    assert snapshot(store) == before


def test_wrong_kind_of_document(store: SQLiteStore, root: Path) -> None:
    (root / "bad.txt").write_bytes(b"\x00\x00")
    bad, good = doc_named(root, "bad.txt"), doc_named(root, "a.txt")
    assert bad.skip is Skip.BINARY
    with pytest.raises(StoreInputError, match="use record_skip"):
        store.write_document(bad, [], np.zeros((0, DIM)))
    with pytest.raises(StoreInputError, match="expected a skipped document"):
        store.record_skip(good)
    assert store.status().documents == 0 and store.status().skipped == 0


def test_dimension_is_fixed_while_vectors_exist(store: SQLiteStore, root: Path) -> None:
    doc = doc_named(root, "a.txt")
    chunks = chunks_of(doc)
    store.write_document(doc, chunks, vectors_for(chunks, dim=4))
    assert store.dim == 4
    with pytest.raises(StoreInputError, match="dimension 4 .this store's., got 6"):
        store.write_document(doc, chunks, vectors_for(chunks, dim=6))
    assert store.remove(root, ["a.txt", "never-stored.txt"]) == 1
    store.write_document(doc, chunks, vectors_for(chunks, dim=6))
    assert store.dim == 6 and store.vectors()[1].shape == (len(chunks), 6)


def test_document_without_chunks(store: SQLiteStore, root: Path) -> None:
    doc = doc_named(root, "a.txt")
    store.write_document(doc, [], np.zeros((0, DIM)))
    assert store.lookup(root, "a.txt").n_chunks == 0 and store.dim is None
    assert store.vectors()[1].shape == (0, 0)


# -- reading back -----------------------------------------------------------------------


def test_vectors_are_normalised_float32_with_chunk_ids(store: SQLiteStore, root: Path) -> None:
    """Vectors come back float32, L2-normalised, each element the float16 nearest to the
    normalised input's (records.VECTOR_DTYPE): within half a float16 step of it."""
    written = {}
    for seed, doc in enumerate(d for d in ingest(root)):
        chunks = chunks_of(doc)
        vecs = vectors_for(chunks, seed=seed) * (seed + 3)
        store.write_document(doc, chunks, vecs)
        for row, v in zip(store.document_chunks(root, doc.source), vecs, strict=True):
            written[row.id] = v / np.linalg.norm(v)
    ids, matrix = store.vectors()
    assert matrix.dtype == np.float32 and ids.dtype == np.int64
    assert sorted(written) == ids.tolist()
    want = np.stack([written[i] for i in ids.tolist()])
    np.testing.assert_array_equal(matrix.astype(np.float16).astype(np.float32), matrix)
    assert (np.abs(matrix - want) <= np.abs(want) * 2.0**-11 + 2.0**-25).all()
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=2.0**-10)
    rows = store.chunks(ids[:3])
    assert set(rows) == set(ids[:3].tolist()) and all(r.root == str(root) for r in rows.values())


def test_status_and_runs(store: SQLiteStore, root: Path) -> None:
    (root / "pic.gif").write_bytes(b"GIF8")
    (root / "nul.txt").write_bytes(b"\x00")
    run = store.begin_run(root, "cfg")
    counts = index(store, root)
    store.finish_run(run, counts=counts, summary={"tokens_per_s": 12.5})
    status = store.status()
    assert (status.documents, status.skipped, status.dim) == (3, 2, DIM)
    assert status.skipped_by_reason == {"binary": 2}
    assert [f[1] for f in status.skipped_files] == ["nul.txt", "pic.gif"]
    assert status.tokens == sum(c.n_tokens for d in ingest(root) if d.ok for c in chunks_of(d))
    last = status.last_run
    assert (last.id, last.status, last.counts, last.summary) == (
        run,
        "completed",
        counts,
        {"tokens_per_s": 12.5},
    )
    assert last.ended_at >= last.started_at
    with pytest.raises(StoreInputError, match="status: expected one of"):
        store.finish_run(run, "running")


def test_one_run_at_a_time(store: SQLiteStore, location) -> None:
    run = store.begin_run()
    with open_store(location) as other:
        with pytest.raises(StoreBusyError, match="another attnswitch run"):
            other.begin_run()
        store.finish_run(run, "failed")
        second = other.begin_run()
        other.finish_run(second)
    assert [r.status for r in store.runs()] == ["completed", "failed"]


# -- the file -------------------------------------------------------------------------------


def test_paths_and_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_path() == Path(".attnswitch") / "index.sqlite3"
    (tmp_path / "data").mkdir()
    assert resolve_path(tmp_path / "data") == tmp_path / "data" / "index.sqlite3"
    assert resolve_path("new-dir/") == Path("new-dir") / "index.sqlite3"
    assert resolve_path("x.db") == Path("x.db")
    with SQLiteStore() as store:
        assert store.path.resolve() == (tmp_path / ".attnswitch" / "index.sqlite3")
    with sqlite3.connect(tmp_path / ".attnswitch" / "index.sqlite3") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "future.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreInputError, match="made by a newer attnswitch"):
        SQLiteStore(db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 99
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0


def test_a_stored_vector_of_the_wrong_length_is_reported_not_reshaped(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("one two three four five six seven eight nine ten " * 4)
    with SQLiteStore(tmp_path / "db") as store:
        index(store, root)
        store._conn.execute(
            "UPDATE chunks SET vector = substr(vector, 1, 7) "
            "WHERE id = (SELECT MAX(id) FROM chunks)"
        )
        with pytest.raises(
            StoreCorruptError,
            match=r"expected vectors of 16 bytes \(dimension "
            r"8, float16\), got 1 chunk\(s\) of another length \(ids \[\d+\]: 7 "
            r"bytes\).*rebuild the index",
        ):
            store.vectors()


def test_another_programs_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, who TEXT)")
    with pytest.raises(StoreCorruptError, match="table runs lacks"):
        SQLiteStore(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["runs"]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"


def test_a_version_1_store_migrates_to_the_current_version(
    docs: Path, tmp_path: Path, encoder
) -> None:
    """The schema's migration path, 1 -> 2 -> 3, on a copy of a real store: the real model's
    vectors of real documents, taken back to what version 1 had (no keyword index, no chunk
    log, no store id, no chunk heading path, location or vector key). Opening the copy migrates it: nothing stored is lost, keyword search
    finds the stored text, dense search gives what the original gives, and a run on the
    same folder finds every file unchanged."""
    import shutil

    from attnswitch.jobs.run import RunOptions, run

    options = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8)
    original = tmp_path / "v2" / "index.sqlite3"
    with SQLiteStore(original) as store:
        run(docs, store, options, get_encoder=lambda: encoder)
        want_ids, want_vectors = store.vectors()
        want_runs = store.runs()
        query = want_vectors[:3]
        want_dense = store.dense(query, 5)
    copy = tmp_path / "v1" / "index.sqlite3"
    copy.parent.mkdir()
    shutil.copy2(original, copy)
    with sqlite3.connect(copy) as conn:
        as_float32_blobs(conn)
        conn.executescript(
            "DROP TRIGGER chunks_indexed; DROP TRIGGER chunks_unindexed; "
            "DROP TRIGGER chunks_reworded; DROP TRIGGER documents_removed; "
            "DROP TRIGGER chunks_encoded; "
            "DROP TABLE chunks_terms; DROP TABLE chunk_log; DROP TABLE terms_pending; "
            "DELETE FROM meta WHERE key IN ('store_id', 'analyzer'); "
            "PRAGMA user_version = 1; "
            "DROP INDEX chunks_vector_key; DROP INDEX documents_sha256; "
            "DROP INDEX chunks_language; DROP INDEX chunks_unencoded; DROP INDEX chunks_quick_only; "
            "ALTER TABLE chunks DROP COLUMN quick; "
            "ALTER TABLE chunks DROP COLUMN prefix; "
            "ALTER TABLE chunks DROP COLUMN heading_path; "
            "ALTER TABLE chunks DROP COLUMN location; "
            "ALTER TABLE chunks DROP COLUMN vector_key; "
            "ALTER TABLE chunks DROP COLUMN language;"
        )
        assert (
            conn.execute(
                "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('chunks_terms', 'chunk_log')"
            ).fetchone()[0]
            == 0
        )

    with SQLiteStore(copy) as store:
        ids, vectors = store.vectors()
        assert np.array_equal(ids, want_ids) and np.array_equal(vectors, want_vectors)
        assert [(r.id, r.status) for r in store.runs()] == [(r.id, r.status) for r in want_runs]
        assert store.dense(query, 5) == want_dense
        assert store.meta("store_id")
        text = store.chunks([int(ids[0])])[int(ids[0])].text
        word = max(re.findall(r"\w+", text), key=len)
        hits = store.keyword(word, 20)
        assert int(ids[0]) in {cid for cid, _ in hits}, (word, hits)
        again = run(docs, store, options, get_encoder=lambda: encoder)
        assert again.unchanged == again.files and again.chunks_encoded == 0
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 13


@pytest.mark.parametrize("held_s", [1.5, 60.0])
def test_a_run_waits_a_bounded_time_for_another_process_s_run(
    location, docs: Path, held_s: float
) -> None:
    """A store locked by another process's run (issue 29): `attnswitch run` waits for it up
    to `RUN_LOCK_WAIT_S`, so a run that ends meanwhile lets it go on; past that it stops
    with one line saying so, having written nothing."""
    from attnswitch.cli.pipeline import app
    from attnswitch.indexing.store import RUN_LOCK_WAIT_S

    with open_store(location):  # the store exists before the other process locks it
        pass
    holder = hold_run_lock(location, held_s)
    try:
        started = time.monotonic()
        result = CliRunner().invoke(
            app(),
            [
                "run",
                str(docs),
                "--db",
                str(location),
                "--no-progress",
                "--max-tokens",
                "32",
                "--overlap",
                "4",
            ],
        )
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait(30)
    with open_store(location) as store:
        indexed = store.root_counts(docs)[0]
    if held_s < RUN_LOCK_WAIT_S:
        assert result.exit_code == 0, result.output
        assert indexed == len(list(docs.rglob("*.html")))
    else:
        assert result.exit_code == 1 and waited >= RUN_LOCK_WAIT_S, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "another attnswitch run is writing this store" in lines[0]
        assert indexed == 0
