"""An index file that other programs open, read and write: Python's sqlite3 module with no
attnswitch function registered, Debian's `sqlite3` shell and sqlite-utils (each with its
own defaults: foreign keys off, sqlite-utils' recursive triggers on). The keyword index's
terms are made in Python by attnswitch (`indexing/sqlite_terms.py`), never by a trigger
calling a function only attnswitch registers, so their deletes, updates, inserts and
VACUUM succeed, and attnswitch then opens the file, searches it with the scores a file
never written by them gives, and re-indexes a deleted document on its next run. A file of
schema 8 (whose triggers called attnswitch's functions, so another program's delete
failed) is upgraded once and answers the same."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing import analyzer, sqlite_terms
from attnswitch.indexing.records import SCHEMA_VERSION
from attnswitch.indexing.search import search
from attnswitch.indexing.store import ChunkRecord
from attnswitch.indexing.store_sqlite import SQLiteStore
from attnswitch.jobs.run import RunOptions, run

SHELL = shutil.which("sqlite3") or "/usr/bin/sqlite3"
DIM = 8
# Two chunks per file (one sentence each), no content word shared between files.
FILES = {
    "en.txt": "The backup job copies the home folders every night. Old snapshots are "
    "pruned after thirty days.",
    "de.txt": "Die Druckerwarteschlange wird nach jedem Neustart geleert. Defekte "
    "Aufträge landen im Protokoll.",
    "fr.txt": "Les certificats du serveur de messagerie expirent chaque année. Le "
    "renouvellement se fait automatiquement.",
    "ko.txt": "엔지니어가 새 하드웨어를 서버실에 설치했습니다. 전원 공급 장치도 교체했습니다.",
    "notes.txt": "The backup server restarts after the snapshots. The folders are pruned.",
}
QUERIES = (
    "backup snapshots pruned",
    "Druckerwarteschlange Protokoll",
    "certificat messagerie",
    "하드웨어 설치",
    "the folders",
)
# Schema 8's triggers as that version made them: they call functions that only
# attnswitch's connections registered.
V8_TRIGGERS = (
    """CREATE TRIGGER chunks_indexed AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_terms (rowid, terms, stems) VALUES (new.id,
        attnswitch_terms(new.text, new.language), attnswitch_stems(new.text, new.language));
    INSERT INTO chunk_log (chunk_id) VALUES (new.id);
END""",
    """CREATE TRIGGER chunks_unindexed AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_terms (chunks_terms, rowid, terms, stems) VALUES ('delete', old.id,
        attnswitch_terms(old.text, old.language), attnswitch_stems(old.text, old.language));
    INSERT INTO chunk_log (chunk_id) VALUES (old.id);
END""",
)


def sentences(text: str) -> list[ChunkRecord]:
    """One chunk per sentence ('. ' or '。' ends one)."""
    out, start = [], 0
    for i, c in enumerate(text):
        if c == "." and text[i + 1 : i + 2] in (" ", "") or i == len(text) - 1:
            out.append(ChunkRecord(text[start : i + 1].strip(), 1, start, i + 1))
            start = i + 1
    return out


def fill(store: SQLiteStore, root: Path, skip: tuple[str, ...] = ()) -> None:
    """Write each file of `root` but `skip` as its sentences (random vectors: keyword
    search is what is asked)."""
    rng = np.random.default_rng(5)
    for doc in ingest(root):
        if doc.source in skip:
            continue
        chunks = sentences(doc.text)
        store.write_document(doc, chunks, rng.normal(size=(len(chunks), DIM)))


def answers(store: SQLiteStore) -> list[list[tuple[str, float]]]:
    """Each query's keyword hits as (chunk text, BM25 score): comparable between files
    whose chunk ids differ."""
    out = []
    for query in QUERIES:
        hits = store.keyword(query, 10)
        rows = store.chunks(cid for cid, _ in hits)
        out.append([(rows[cid].text, score) for cid, score in hits])
    return out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def db(tmp_path: Path, root: Path) -> Path:
    path = tmp_path / "db" / "index.sqlite3"
    with SQLiteStore(path) as store:
        fill(store, root)
    return path


def module_sql(db: Path, sql: str) -> list[tuple]:
    """Python's sqlite3 module, no function registered, its defaults (foreign keys off)."""
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        return conn.execute(sql).fetchall()


def shell_sql(db: Path, sql: str) -> list[tuple]:
    """Debian's sqlite3 shell, its defaults (foreign keys off); rows split on '|'."""
    if not Path(SHELL).exists():
        pytest.skip("no sqlite3 shell here (Debian's sqlite3 package)")
    done = subprocess.run(
        [SHELL, "-bail", str(db), sql], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise sqlite3.OperationalError(done.stderr.strip())
    return [tuple(line.split("|")) for line in done.stdout.splitlines()]


def utils_sql(db: Path, sql: str) -> list[tuple]:
    """sqlite-utils' Database, its defaults (recursive triggers on)."""
    sqlite_utils = pytest.importorskip("sqlite_utils")
    database = sqlite_utils.Database(db)
    try:
        return list(database.execute(sql).fetchall())
    finally:
        database.close()


TOOLS: dict[str, Callable[[Path, str], list[tuple]]] = {
    "sqlite3 module": module_sql,
    "sqlite3 shell": shell_sql,
    "sqlite-utils": utils_sql,
}


@pytest.fixture(params=list(TOOLS))
def tool(request) -> Callable[[Path, str], list[tuple]]:
    return TOOLS[request.param]


def test_another_tool_reads_the_documents_chunks_and_keyword_index(tool, db: Path) -> None:
    docs = tool(db, "SELECT source, n_chunks FROM documents ORDER BY source")
    assert [(s, int(n)) for s, n in docs] == [
        (s, len(sentences(t))) for s, t in sorted(FILES.items())
    ]
    texts = {r[0] for r in tool(db, "SELECT text FROM chunks")}
    assert "Die Druckerwarteschlange wird nach jedem Neustart geleert." in texts
    (hit,) = tool(
        db,
        "SELECT c.text FROM chunks_terms JOIN chunks c ON c.id = chunks_terms.rowid "
        "WHERE chunks_terms MATCH 'terms : druckerwarteschlange'",
    )
    assert hit[0].startswith("Die Druckerwarteschlange")


def test_a_document_deleted_by_another_tool_leaves_no_terms_behind(
    tool, db: Path, root: Path, tmp_path: Path, caplog
) -> None:
    """Its chunks go with it (foreign keys off or on) and the keyword index forgets their
    terms: the same hits and BM25 scores as a file that never held the document."""
    tool(db, "DELETE FROM documents WHERE source = 'notes.txt'")
    with caplog.at_level(logging.INFO), SQLiteStore(db) as store:
        got = answers(store)
        assert store.count() == sum(len(sentences(t)) for s, t in FILES.items() if s != "notes.txt")
    assert any("written by another program" in r.getMessage() for r in caplog.records)
    with SQLiteStore(tmp_path / "never" / "index.sqlite3") as store:
        fill(store, root, skip=("notes.txt",))
        want = answers(store)
    assert got == want
    assert not any("restarts" in text for hits in got for text, _ in hits)


def test_an_open_store_sees_another_tools_delete_at_its_next_keyword_search(tool, db: Path) -> None:
    with SQLiteStore(db) as store:
        assert store.keyword("Druckerwarteschlange", 5)
        tool(db, "DELETE FROM documents WHERE source = 'de.txt'")
        assert store.keyword("Druckerwarteschlange", 5) == []
        assert store.keyword("Protokoll", 5) == []


def test_updates_and_vacuum_by_another_tool_keep_the_index(tool, db: Path) -> None:
    """A document row updated, a chunk reworded, the file vacuumed: the reworded chunk is
    found by its new words only, every other answer is unchanged."""
    with SQLiteStore(db) as store:
        before = answers(store)
    tool(db, "UPDATE documents SET reason = 'checked by hand' WHERE source = 'en.txt'")
    tool(db, "UPDATE chunks SET text = 'Les archives sont chiffrées.' WHERE text LIKE 'Le renouv%'")
    tool(db, "VACUUM")
    with SQLiteStore(db) as store:
        after = answers(store)
        assert store.keyword("renouvellement", 5) == []
        ((cid, _),) = store.keyword("archives chiffrées", 5)
        assert store.chunks([cid])[cid].text == "Les archives sont chiffrées."
    # the reworded chunk's words were in no query: the scores move only where it counted
    # in the averages (BM25's average length), the hits do not
    assert [[t for t, _ in hits] for hits in after] == [[t for t, _ in hits] for hits in before]


def test_a_chunk_inserted_by_another_tool_is_indexed_when_attnswitch_opens_the_file(
    tool, db: Path, caplog
) -> None:
    """Written without terms and without a language (those are attnswitch's to make): the
    next opening detects its language, indexes it and says so."""
    vector = np.ones(DIM, dtype="<f2") / np.sqrt(DIM)
    tool(
        db,
        "INSERT INTO chunks (doc_id, ordinal, text, n_tokens, char_start, char_end, vector) "
        "SELECT id, 9, 'Les sauvegardes quotidiennes sont vérifiées.', 1, 0, 1, "
        f"X'{vector.astype('<f2').tobytes().hex()}' FROM documents WHERE source = 'fr.txt'",
    )
    with caplog.at_level(logging.INFO), SQLiteStore(db) as store:
        ((cid, _),) = store.keyword("sauvegardes", 5)
        assert store.chunks([cid])[cid].ordinal == 9
        assert [cid for cid, _ in store.keyword("vérifier", 5)] == [cid]  # its French stem
    assert any("written by another program" in r.getMessage() for r in caplog.records)
    assert tool(db, f"SELECT language FROM chunks WHERE id = {cid}") == [("fr",)]


def test_a_run_after_another_tool_deleted_and_updated_documents(
    tool, docs: Path, encoder, tmp_path: Path
) -> None:
    """Plan and run: the deleted document is read and indexed again, the updated one (its
    mtime changed) hashed and kept; search then answers as before the tool's writes."""
    options = RunOptions.of(max_tokens=64, overlap=8, chunks_per_call=16)
    db = tmp_path / "db" / "index.sqlite3"
    with SQLiteStore(db) as store:
        run(docs, store, options, get_encoder=lambda: encoder)
        sources = sorted(store.sources(docs))
        query = "installing the package"
        vector = encoder.encode([query])[0]
        before = [(h.source, h.ordinal, h.score) for h in search(store, vector, 5, text=query)]
        gone, changed = sources[0], sources[1]
    tool(db, f"DELETE FROM documents WHERE source = '{gone}'")
    tool(db, f"UPDATE documents SET mtime_ns = 1 WHERE source = '{changed}'")
    tool(db, "VACUUM")
    with SQLiteStore(db) as store:
        assert gone not in store.sources(docs)
        summary = run(docs, store, options, get_encoder=lambda: encoder)
        assert (summary.new, summary.changed, summary.unchanged) == (1, 0, 3), summary
        assert sorted(store.sources(docs)) == sources
        after = [(h.source, h.ordinal, h.score) for h in search(store, vector, 5, text=query)]
        hits = store.keyword(query, 50)
        assert set(store.chunks(cid for cid, _ in hits)) == {cid for cid, _ in hits}
    assert [(s, o) for s, o, _ in after] == [(s, o) for s, o, _ in before]
    assert np.allclose([x for *_, x in after], [x for *_, x in before], atol=1e-6)


def test_a_document_row_replaced_with_foreign_keys_and_recursive_triggers_off(
    db: Path,
) -> None:
    """INSERT OR REPLACE deletes the old row without firing a delete trigger: its chunks
    stay, orphaned (search leaves them out), until the next completed run removes them."""
    module_sql(
        db,
        "INSERT OR REPLACE INTO documents (root, source, sha256, size, mtime_ns, kind, "
        "status, config, n_chunks, updated_at) SELECT root, source, sha256, size, mtime_ns, "
        "kind, status, config, 0, updated_at FROM documents WHERE source = 'de.txt'",
    )
    with SQLiteStore(db) as store:
        assert store.keyword("Druckerwarteschlange", 5)  # orphaned chunks, still indexed
        store.finish_run(store.begin_run())
        assert store.keyword("Druckerwarteschlange", 5) == []
        assert module_sql(
            db, "SELECT COUNT(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)"
        ) == [(0,)]


@pytest.mark.parametrize("batch", [sqlite_terms.BATCH, 2])
def test_the_terms_written_in_python_are_the_ones_the_old_triggers_wrote(
    db: Path, root: Path, tmp_path: Path, batch: int, monkeypatch
) -> None:
    """Documents written, rewritten, copied and removed: the keyword index answers with
    the hits and BM25 scores of one filled at once by SQL functions of the analyzer, as
    schema 8 filled it (the changes applied in one batch, and in batches of 2 chunks)."""
    monkeypatch.setattr(sqlite_terms, "BATCH", batch)
    with SQLiteStore(db) as store:
        docs = {d.source: d for d in ingest(root)}
        rng = np.random.default_rng(8)
        store.write_document(
            docs["en.txt"], sentences(FILES["notes.txt"]), rng.normal(size=(2, DIM))
        )
        store.remove(root, ["ko.txt"])
        (original,) = store.copies_of(docs["fr.txt"].sha256, "")
        store.copy_document(original, dataclasses.replace(docs["fr.txt"], source="copy.txt"))
        got = answers(store)
    reference = tmp_path / "reference.sqlite3"
    shutil.copy(db, reference)
    with contextlib.closing(sqlite3.connect(reference, isolation_level=None)) as conn:
        register_v8_functions(conn)
        conn.execute("INSERT INTO chunks_terms (chunks_terms) VALUES ('delete-all')")
        conn.execute(
            "INSERT INTO chunks_terms (rowid, terms, stems) SELECT id, "
            "attnswitch_terms(text, language), attnswitch_stems(text, language) FROM chunks"
        )
    with SQLiteStore(reference) as store:
        assert answers(store) == got


def register_v8_functions(conn: sqlite3.Connection) -> None:
    """The functions schema 8's triggers called, as its connections registered them."""
    conn.create_function(
        "attnswitch_terms",
        2,
        lambda text, language: " ".join(analyzer.document_terms(text, language or "")),
        deterministic=True,
    )
    conn.create_function(
        "attnswitch_stems",
        2,
        lambda text, language: " ".join(analyzer.document_stems(text, language or "")),
        deterministic=True,
    )


def as_schema_8(db: Path) -> None:
    """Take a file of this version back to schema 8: its triggers, no queue."""
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.executescript(
            "DROP TRIGGER chunks_indexed; DROP TRIGGER chunks_unindexed; "
            "DROP TRIGGER chunks_reworded; DROP TRIGGER documents_removed; "
            "DROP TABLE terms_pending; PRAGMA user_version = 8;"
        )
        for statement in V8_TRIGGERS:
            conn.execute(statement)


def test_a_schema_8_file_is_upgraded_once_and_answers_the_same(
    db: Path, root: Path, caplog
) -> None:
    with SQLiteStore(db) as store:
        want = answers(store)
    as_schema_8(db)
    with pytest.raises(sqlite3.OperationalError, match="no such function: attnswitch_terms"):
        module_sql(db, "DELETE FROM chunks WHERE text LIKE 'Die %'")  # why schema 9
    with SQLiteStore(db) as store:
        assert answers(store) == want
        assert store.migrated is None  # no chunk changed: nothing to tell the user
    assert module_sql(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)] == [(13,)]
    triggers = module_sql(db, "SELECT sql FROM sqlite_master WHERE type = 'trigger'")
    assert triggers and not any("attnswitch_" in sql for (sql,) in triggers)
    module_sql(db, "DELETE FROM documents WHERE source = 'de.txt'")
    with SQLiteStore(db) as store:
        assert store.keyword("Druckerwarteschlange", 5) == []
        assert [t for t, _ in answers(store)[0]] == [t for t, _ in want[0]]
