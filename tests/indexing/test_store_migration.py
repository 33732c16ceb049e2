"""A store built by the version before heading paths and locations (schema 2: chunks without
`heading_path`, `location`, `vector_key`, vectors in float32), made here with that version's
DDL and filled with that version's chunks (fixed windows) and real vectors, is upgraded when
opened (its vectors rounded to float16 in place) and re-chunked by the next run: nothing
lost, and no text encoded again whose vector is stored. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import numpy as np

from attnswitch.documents.chunk import chunk_text
from attnswitch.documents.ingest import ingest
from attnswitch.indexing.config import IndexConfig, chunk_tokenizer
from attnswitch.indexing.location import open_store
from attnswitch.indexing.search import search
from attnswitch.indexing.store import SCHEMA_VERSION
from attnswitch.jobs.run import RunOptions, run
from store_testing import Recording

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"

# Schema 2 as the previous version created it (the tables the upgrade touches).
OLD_SQLITE = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE documents (id INTEGER PRIMARY KEY, root TEXT NOT NULL, source TEXT NOT NULL,
    sha256 TEXT, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, kind TEXT, encoding TEXT,
    status TEXT NOT NULL CHECK (status IN ('indexed', 'skipped')), skip TEXT, reason TEXT,
    config TEXT NOT NULL, n_chunks INTEGER NOT NULL DEFAULT 0,
    n_tokens INTEGER NOT NULL DEFAULT 0, run_id INTEGER, updated_at REAL NOT NULL,
    UNIQUE (root, source))""",
    """CREATE TABLE chunks (id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL, text TEXT NOT NULL, n_tokens INTEGER NOT NULL,
    char_start INTEGER NOT NULL, char_end INTEGER NOT NULL, vector BLOB NOT NULL,
    UNIQUE (doc_id, ordinal))""",
    """CREATE TABLE runs (id INTEGER PRIMARY KEY, root TEXT, config TEXT, pid INTEGER NOT NULL,
    started_at REAL NOT NULL, ended_at REAL, status TEXT NOT NULL CHECK (status IN
    ('running', 'completed', 'failed', 'interrupted')), counts TEXT NOT NULL DEFAULT '{}',
    summary TEXT NOT NULL DEFAULT '{}')""",
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id')",
    "CREATE TABLE chunk_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id INTEGER NOT NULL)",
    """CREATE TRIGGER chunks_inserted AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text);
    INSERT INTO chunk_log (chunk_id) VALUES (new.id); END""",
    """CREATE TRIGGER chunks_deleted AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO chunk_log (chunk_id) VALUES (old.id); END""",
    "PRAGMA user_version=2",
)
OLD_POSTGRES = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE documents (id BIGSERIAL PRIMARY KEY, root TEXT NOT NULL,
    source TEXT NOT NULL, sha256 TEXT, size BIGINT NOT NULL, mtime_ns BIGINT NOT NULL,
    kind TEXT, encoding TEXT, status TEXT NOT NULL, skip TEXT, reason TEXT,
    config TEXT NOT NULL, n_chunks INTEGER NOT NULL DEFAULT 0,
    n_tokens INTEGER NOT NULL DEFAULT 0, run_id BIGINT,
    updated_at DOUBLE PRECISION NOT NULL, UNIQUE (root, source))""",
    """CREATE TABLE chunks (id BIGSERIAL PRIMARY KEY,
    doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL, text TEXT NOT NULL, n_tokens INTEGER NOT NULL,
    char_start INTEGER NOT NULL, char_end INTEGER NOT NULL, embedding vector(384) NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    UNIQUE (doc_id, ordinal))""",
    "CREATE INDEX chunks_tsv ON chunks USING gin (tsv)",
    """CREATE TABLE runs (id BIGSERIAL PRIMARY KEY, root TEXT, config TEXT,
    pid INTEGER NOT NULL, started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION, status TEXT NOT NULL, counts TEXT NOT NULL DEFAULT '{}',
    summary TEXT NOT NULL DEFAULT '{}')""",
)
MAX_TOKENS, OVERLAP = 48, 4
OPTIONS = RunOptions.of(max_tokens=MAX_TOKENS, overlap=OVERLAP, chunks_per_call=16)
# One sentence each: as fixed windows or as blocks, each is one chunk of the same text.
SHORT = {
    "note.txt": "A short note about the vacuum process in a database.",
    "todo.txt": "Remember to analyse the tables after a bulk load of rows.",
}


def old_store(location, root: Path, encoder) -> dict[str, list[tuple[str, bytes]]]:
    """Fill a store at `location` as the previous version did (schema 2, fixed windows,
    float32 vectors, its config in meta); returns source -> [(chunk text, vector bytes)],
    the bytes of each float32 vector rounded to float16 (as the upgrade keeps it) and
    widened back to float32 (as a store reads it)."""
    tok = chunk_tokenizer(encoder.spec)
    config = IndexConfig.build(
        encoder.spec,
        None,
        encoder.engine,
        "fp32",
        MAX_TOKENS,
        OVERLAP,
        tok,
        chunking="windows",
        embed_headings=False,
    )
    old_json = {
        k: v
        for k, v in json.loads(config.to_json()).items()
        if k not in ("chunking", "embed_headings")
    }
    rows, kept = [], {}
    for doc in ingest(root):
        chunks = chunk_text(doc.text, tok, max_tokens=MAX_TOKENS, overlap=OVERLAP)
        vectors = encoder.encode([c.text for c in chunks]).astype("<f4")
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows.append((doc, chunks, vectors))
        kept[doc.source] = [
            (c.text, v.astype("<f2").astype("<f4").tobytes()) for c, v in zip(chunks, vectors)
        ]
    postgres = isinstance(location, str)
    if postgres:
        import psycopg
        from pgvector.psycopg import register_vector

        conn = psycopg.connect(location, autocommit=True)
        for statement in OLD_POSTGRES:
            conn.execute(statement)
        register_vector(conn)
        mark = "%s"
    else:
        location.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(location, isolation_level=None)
        for statement in OLD_SQLITE:
            conn.execute(statement)
        mark = "?"
    m = lambda n: ", ".join([mark] * n)  # noqa: E731
    conn.execute(
        f"INSERT INTO meta VALUES ({m(2)}), ({m(2)})",
        ("index", json.dumps(old_json, sort_keys=True), "dim", "384"),
    )
    for doc, chunks, vectors in rows:
        doc_id = conn.execute(
            f"INSERT INTO documents (root, source, sha256, size, mtime_ns, kind, status, "
            f"config, n_chunks, n_tokens, updated_at) VALUES ({m(11)}) RETURNING id",
            (
                doc.root,
                doc.source,
                doc.sha256,
                doc.size,
                doc.mtime_ns,
                doc.kind,
                "indexed",
                config.fingerprint,
                len(chunks),
                sum(c.n_tokens for c in chunks),
                time.time(),
            ),
        ).fetchone()[0]
        for i, (c, v) in enumerate(zip(chunks, vectors)):
            conn.execute(
                f"INSERT INTO chunks (doc_id, ordinal, text, n_tokens, char_start, "
                f"char_end, {'embedding' if postgres else 'vector'}) VALUES ({m(7)})",
                (doc_id, i, c.text, c.n_tokens, c.start, c.end, v if postgres else v.tobytes()),
            )
    conn.close()
    return kept


def stored(store, root: Path) -> dict[str, list[tuple[str, bytes]]]:
    ids, matrix = store.vectors()
    row_of = {int(i): r for r, i in enumerate(ids)}
    return {
        s: [
            (c.text, matrix[row_of[c.id]].astype("<f4").tobytes())
            for c in store.document_chunks(root, s)
        ]
        for s in sorted(store.sources(root))
    }


def test_an_old_store_is_upgraded_and_rechunked_reusing_its_vectors(
    location, tmp_path: Path, encoder
) -> None:
    root = tmp_path / "docs"
    (root / "postgresql").mkdir(parents=True)
    for name in ("tutorial-update.html", "tutorial-views.html"):
        shutil.copy2(CORPUS / "postgresql" / name, root / "postgresql" / name)
    for name, text in SHORT.items():
        (root / name).write_text(text)
    before = old_store(location, root, encoder)

    with open_store(location) as store:
        assert store.migrated and f"schema version {SCHEMA_VERSION}" in store.migrated
        assert "\n" not in store.migrated
        # opened, not run yet: the old chunks are all there, now with empty structure
        assert stored(store, root) == before
        assert store.document_chunks(root, "note.txt")[0].heading_path == ()
        # the old chunks are in the analyzer's keyword index, stems and all, none encoded
        note = store.document_chunks(root, "note.txt")[0].id
        assert store.keyword("vacuuming processes", 3)[0][0] == note
        recording = Recording(encoder)
        summary = run(root, store, OPTIONS, get_encoder=lambda: recording)
        after = stored(store, root)
        hits = search(store, encoder.encode(["create a view"])[0], 3, text="create a view")
    assert summary.status == "completed" and summary.changed == 4 and summary.indexed == 4
    # the short notes kept their vectors, byte for byte, and were not encoded again
    for name, text in SHORT.items():
        assert after[name] == before[name]
        assert text not in recording.texts
    assert summary.chunks_reused >= len(SHORT)
    assert summary.chunks_encoded == len(recording.texts)
    # the pages were re-chunked from their blocks: sections, heading paths
    assert after["postgresql/tutorial-views.html"] != before["postgresql/tutorial-views.html"]
    assert hits[0].path == "postgresql/tutorial-views.html"
    assert hits[0].heading_path == ["3.2. Views"]

    with open_store(location) as store:
        assert store.migrated is None  # upgraded once
        again = Recording(encoder)
        summary = run(root, store, OPTIONS, get_encoder=lambda: again)
        assert stored(store, root) == after
    assert (summary.unchanged, summary.chunks_encoded, again.texts) == (4, 0, [])


def test_the_cli_says_the_store_was_upgraded(tmp_path: Path, encoder) -> None:
    from typer.testing import CliRunner

    from attnswitch.cli import app

    root = tmp_path / "docs"
    root.mkdir()
    (root / "note.txt").write_text(SHORT["note.txt"])
    db = tmp_path / "db" / "index.sqlite3"
    old_store(db, root, encoder)
    result = CliRunner().invoke(app, ["status", "--db", str(db)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "upgraded" in line]
    assert len(lines) == 1 and f"schema version {SCHEMA_VERSION}" in lines[0]
