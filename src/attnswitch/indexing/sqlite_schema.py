"""The SQLite store's schema: its tables, the triggers that queue the chunks' changes for the
keyword index (plain SQL: another program's writes run them too; `sqlite_terms` makes the
terms), each version's upgrade (`UPGRADES`, `migrate`). The jobs table is part of the
file's schema (one version for the whole file); `jobs/jobs_table.py` reads and writes it.
A chunk's vector is a BLOB of `dim` little-endian float16 elements since version 8
(`records.VECTOR_DTYPE`; float32 before, converted in place by that version's upgrade,
`float16_of_float32`)."""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from attnswitch.indexing.quick_graph import QUICK_ONLY
from attnswitch.indexing.records import CHUNK_STRUCTURE_COLUMNS, SCHEMA_VERSION, vector_key
from attnswitch.indexing.sqlite_vectors import FULL_TAIL
from attnswitch.indexing.store_access import ACCESS_INDEX, ACCESS_TABLE
from attnswitch.indexing.store_base import (
    DEDUP_INDEXES,
    LANGUAGE_INDEX,
    STORED_ELEMENT,
    fill_vector_keys,
)

# The chunks: `vector` the full vector (the transformer's; NULL until the full pass or a
# search encodes the chunk), `quick` the quick vector (the static model's; NULL in a file
# written before version 10 or by a run without one), `prefix` what the encoder reads
# before `text` (`Chunk.embed_prefix`: "" unless headings are embedded), so that a chunk
# stored without its full vector can be encoded later. `full_gen`: the generation of the
# segment of the full vectors' graph that holds the vector (`sqlite_segments`), NULL while
# it is in the tail, which no graph holds.
CHUNKS_TABLE = """CREATE TABLE IF NOT EXISTS {name} (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    n_tokens INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    vector BLOB,
    heading_path TEXT NOT NULL DEFAULT '[]',
    location TEXT NOT NULL DEFAULT '{{}}',
    vector_key TEXT,
    language TEXT,
    quick BLOB,
    prefix TEXT NOT NULL DEFAULT '',
    full_gen INTEGER,
    UNIQUE (doc_id, ordinal)
)"""
# The columns of the chunks of a version-9 file (copied by version 10's rebuild).
CHUNK_COLUMNS_V9 = (
    "id, doc_id, ordinal, text, n_tokens, char_start, char_end, vector, heading_path, "
    "location, vector_key, language"
)
# The chunks still without a full vector, by document (the full pass's queue, and how
# many there are: `SQLiteStore.coverage`).
UNENCODED_INDEX = (
    "CREATE INDEX IF NOT EXISTS chunks_unencoded ON chunks (doc_id) WHERE vector IS NULL"
)
# The chunks with a quick vector and no full one, by id: the quick graph's vector set
# (`quick_graph.QuickVectors`), counted and its largest id found without reading a row.
QUICK_ONLY_INDEX = f"CREATE INDEX IF NOT EXISTS chunks_quick_only ON chunks (id) WHERE {QUICK_ONLY}"
# The full vectors by segment generation, and those of the tail (no generation yet), by id
# (`sqlite_segments`): a segment's or the tail's count, largest id and rows found without
# reading the others.
FULL_GEN_INDEXES = (
    "CREATE INDEX IF NOT EXISTS chunks_full_gen ON chunks (full_gen, id) "
    "WHERE vector IS NOT NULL AND full_gen IS NOT NULL",
    f"CREATE INDEX IF NOT EXISTS chunks_full_tail ON chunks (id) WHERE {FULL_TAIL}",
)

JOBS_TABLE = """CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed',
                                           'interrupted', 'cancelled')),
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    progress TEXT NOT NULL DEFAULT '{}',
    summary TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    resume INTEGER NOT NULL DEFAULT 0
)"""


SCHEMA = (
    """CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    root TEXT NOT NULL,
    source TEXT NOT NULL,
    sha256 TEXT,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    kind TEXT,
    encoding TEXT,
    status TEXT NOT NULL CHECK (status IN ('indexed', 'skipped')),
    skip TEXT,
    reason TEXT,
    config TEXT NOT NULL,
    n_chunks INTEGER NOT NULL DEFAULT 0,
    n_tokens INTEGER NOT NULL DEFAULT 0,
    run_id INTEGER,
    updated_at REAL NOT NULL,
    access TEXT,
    UNIQUE (root, source)
)""",
    # Each distinct permission chain of the documents, once (`store_access`).
    ACCESS_TABLE,
    CHUNKS_TABLE.format(name="chunks"),
    """CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    root TEXT,
    config TEXT,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
    counts TEXT NOT NULL DEFAULT '{}',
    summary TEXT NOT NULL DEFAULT '{}'
)""",
    # The service's indexing jobs (`service.jobs`): one row a job, kept across restarts;
    # `resume` marks an interrupted job that the next `serve` on this store finishes.
    JOBS_TABLE,
    # Keyword search: a contentless FTS5 index of the chunks' terms (`analyzer`: the
    # text is stored once, in chunks; FTS5 takes no tokenizer from Python, so each chunk's
    # terms and stems are made in Python, joined by spaces, and split on spaces only),
    # written by `sqlite_terms.apply_pending` from the queue `terms_pending` that the
    # chunks' triggers fill; and a log of chunk inserts and deletes that the HNSW graph
    # replays (ann.HnswIndex). The triggers are plain SQL, so a program other than
    # attnswitch (the sqlite3 shell, sqlite-utils) can write the file: its
    # changes wait in the queue for attnswitch's next opening, write or keyword search.
    # A delete gives FTS5 the terms the insert gave: the same analyzer of the same text
    # and language, while the analyzer's fingerprint (meta "analyzer") is unchanged;
    # `sqlite_terms.reanalyze` makes them all again when it changes.
    """CREATE VIRTUAL TABLE IF NOT EXISTS chunks_terms USING fts5(
    terms, stems, content='',
    tokenize="unicode61 remove_diacritics 0 categories 'L* M* N* Co Pc'")""",
    # `had_vector`: the chunk had a full vector before this change (it was deleted, or its
    # vector replaced), so a graph of full vectors may hold it (`sqlite_segments`).
    """CREATE TABLE IF NOT EXISTS chunk_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id INTEGER NOT NULL,
    had_vector INTEGER NOT NULL DEFAULT 0
)""",
    # The chunk changes the keyword index has yet to take, in order: an added chunk's id
    # (text NULL), a removed one's id with the text and language it had.
    """CREATE TABLE IF NOT EXISTS terms_pending (
    seq INTEGER PRIMARY KEY,
    chunk_id INTEGER NOT NULL,
    text TEXT,
    language TEXT
)""",
)
# The triggers: made after the upgrades, once the chunks have a language (SQLite's ALTER
# TABLE refuses to add a column while a trigger names a column the table lacks). A chunk
# reworded (its text, id or language changed) is queued as removed and added; a language
# set where there was none is not (the chunk was not indexed under one: `apply_pending`
# sets it before indexing). A deleted document's chunks go with it whether or not the
# writer has foreign keys on (SQLite's default is off).
CHUNK_TRIGGERS = (
    """CREATE TRIGGER IF NOT EXISTS chunks_indexed AFTER INSERT ON chunks BEGIN
    INSERT INTO terms_pending (chunk_id) VALUES (new.id);
    INSERT INTO chunk_log (chunk_id) VALUES (new.id);
END""",
    """CREATE TRIGGER IF NOT EXISTS chunks_unindexed AFTER DELETE ON chunks BEGIN
    INSERT INTO terms_pending (chunk_id, text, language) VALUES (old.id, old.text, old.language);
    INSERT INTO chunk_log (chunk_id, had_vector) VALUES (old.id, old.vector IS NOT NULL);
END""",
    """CREATE TRIGGER IF NOT EXISTS chunks_reworded AFTER UPDATE OF id, text, language ON chunks
WHEN new.id IS NOT old.id OR new.text IS NOT old.text
    OR (old.language IS NOT NULL AND new.language IS NOT old.language) BEGIN
    INSERT INTO terms_pending (chunk_id, text, language) VALUES (old.id, old.text, old.language);
    INSERT INTO terms_pending (chunk_id) VALUES (new.id);
END""",
    # A full vector written where there was none (the full pass, a search) or changed, or a
    # quick vector changed (another static model): logged, so the HNSW graphs (the full
    # vectors' and the quick-only chunks') take the change when they next replay the log.
    """CREATE TRIGGER IF NOT EXISTS chunks_encoded AFTER UPDATE OF vector, quick ON chunks
WHEN new.vector IS NOT old.vector OR new.quick IS NOT old.quick BEGIN
    INSERT INTO chunk_log (chunk_id, had_vector)
    VALUES (new.id, old.vector IS NOT NULL AND new.vector IS NOT old.vector);
END""",
    """CREATE TRIGGER IF NOT EXISTS documents_removed AFTER DELETE ON documents BEGIN
    DELETE FROM chunks WHERE doc_id = old.id;
END""",
)


# The columns a table may lack in a file of an older schema version (its upgrade adds them).
ADDED_COLUMNS = frozenset(
    ("chunks", c) for c in (*CHUNK_STRUCTURE_COLUMNS, "language", "quick", "prefix", "full_gen")
) | {("documents", "access"), ("chunk_log", "had_vector")}

# The jobs table's columns at version 5 (the copy of its rows into the wider table).
JOB_COLUMNS_V5 = (
    "id",
    "path",
    "status",
    "created_at",
    "started_at",
    "finished_at",
    "progress",
    "summary",
    "error",
    "attempts",
    "resume",
)


# What each schema version adds to a file of the version before, beyond the tables and
# triggers `SCHEMA` creates (IF NOT EXISTS) for every version.
# 2: keyword search (FTS5) and the chunk log: a version-1 file's stored text is indexed.
# 3: the jobs table (created by `SCHEMA`; nothing to convert).
# 4: the chunks' heading path, location and vector key (`CHUNK_STRUCTURE_COLUMNS`); the
#    stored chunks' vector keys are filled in (`fill_vector_keys`), so the next run
#    re-chunks every document (its config changed) and reuses each vector whose text
#    it finds again.
# 5: a job may be "cancelled": the jobs table is made again with the wider CHECK (SQLite
#    cannot change a constraint in place), its rows copied over.
# 6: indexes on the documents' hash and the chunks' vector key (`DEDUP_INDEXES`, made
#    after every upgrade: the vector key column is version 4's).
# 7: keyword search by the analyzer's terms (`analyzer`): each chunk's language, and the
#    index of terms in place of FTS5's own words of the text (filled by `reanalyze`, as
#    the index of a version-1 file, which had none, is).
# 8: vectors in float16 (`records.VECTOR_DTYPE`): every stored float32 vector is rounded to
#    float16 in place (`float16_of_float32`; no text is encoded again, every chunk and its id
#    kept), halving its bytes; the store then drops its HNSW graph (made again, in float16,
#    when next needed) and compacts the file (`SQLiteStore`: VACUUM).
# 9: the keyword index written by Python (`sqlite_terms`), not by triggers calling a
#    function only attnswitch's connections had: the old triggers are dropped and the new
#    ones (`CHUNK_TRIGGERS`) made; the index itself is kept as it is (the same terms).
# 10: two kinds of vector (docs/architecture.md, "Two passes"): a chunk's full vector may be
#    NULL (not yet encoded), and it gets a quick vector and the encoder's prefix. SQLite
#    cannot drop a NOT NULL in place: the chunks table is made again and every row copied
#    with its id (the keyword index and the HNSW graph are keyed by it, and stay as they
#    are); the triggers are made again after.
# 11: each document's permissions as read (docs/architecture.md, "Who may read what"): the
#    `access` table of distinct chains (made by `SCHEMA`) and the documents' `access`
#    column, NULL for the documents stored before (read by admins only until the next run
#    records theirs).
# 12: the quick vectors get an HNSW graph of their own (`quick_graph`): the partial index of
#    the chunks it holds (`QUICK_ONLY_INDEX`, made after every upgrade), and the trigger
#    that logs a changed full vector logs a changed quick vector too (dropped here, made
#    again after).
# 13: the full vectors' graph in segments (`sqlite_segments`): the chunks' `full_gen` and the
#    log's `had_vector` (its two triggers dropped here, made again after); the stored
#    vectors become the segment of generation 0 (`SEGMENTS_SINCE`: the one graph's files
#    are moved to it by `sqlite_segments.convert_single_graph`).
FLOAT16_SINCE = 8
SEGMENTS_SINCE = 13
UPGRADES: Mapping[int, tuple[str, ...]] = MappingProxyType(
    {
        4: (
            "ALTER TABLE chunks ADD COLUMN heading_path TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE chunks ADD COLUMN location TEXT NOT NULL DEFAULT '{}'",
            "ALTER TABLE chunks ADD COLUMN vector_key TEXT",
        ),
        5: (
            "ALTER TABLE jobs RENAME TO jobs_before_cancel",
            JOBS_TABLE,
            f"INSERT INTO jobs ({', '.join(JOB_COLUMNS_V5)}) SELECT {', '.join(JOB_COLUMNS_V5)} "
            "FROM jobs_before_cancel",
            "DROP TABLE jobs_before_cancel",
        ),
        7: (
            "DROP TRIGGER IF EXISTS chunks_inserted",
            "DROP TRIGGER IF EXISTS chunks_deleted",
            "DROP TABLE IF EXISTS chunks_fts",
            "ALTER TABLE chunks ADD COLUMN language TEXT",
            "DELETE FROM meta WHERE key = 'analyzer'",
        ),
        9: (
            "DROP TRIGGER IF EXISTS chunks_indexed",
            "DROP TRIGGER IF EXISTS chunks_unindexed",
        ),
        10: (
            *(
                f"DROP TRIGGER IF EXISTS {name}"
                for name in ("chunks_indexed", "chunks_unindexed", "chunks_reworded")
            ),
            "DROP TRIGGER IF EXISTS documents_removed",
            CHUNKS_TABLE.format(name="chunks_v10"),
            f"INSERT INTO chunks_v10 ({CHUNK_COLUMNS_V9}) SELECT {CHUNK_COLUMNS_V9} FROM chunks",
            "DROP TABLE chunks",
            "ALTER TABLE chunks_v10 RENAME TO chunks",
        ),
        11: ("ALTER TABLE documents ADD COLUMN access TEXT",),
        12: ("DROP TRIGGER IF EXISTS chunks_encoded",),
        13: (
            "ALTER TABLE chunks ADD COLUMN full_gen INTEGER",
            "ALTER TABLE chunk_log ADD COLUMN had_vector INTEGER NOT NULL DEFAULT 0",
            "DROP TRIGGER IF EXISTS chunks_unindexed",
            "DROP TRIGGER IF EXISTS chunks_encoded",
            "UPDATE chunks SET full_gen = 0 WHERE vector IS NOT NULL",
            "INSERT OR REPLACE INTO meta SELECT 'full_segments', json_array(json_array(0, 1, "
            "COUNT(*))) FROM chunks WHERE full_gen = 0 HAVING COUNT(*) > 0",
        ),
    }
)


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring a file of schema `version` (0: a new file) to SCHEMA_VERSION, inside the
    caller's transaction: create what is missing, then each upgrade after `version` in
    order; the stored documents, chunks, vectors and runs are kept."""
    for statement in SCHEMA:
        conn.execute(statement)
    if version > 0:
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in UPGRADES.get(step, ()):
                added = re.match(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", statement)
                if added and added.group(2) in {
                    row[1] for row in conn.execute(f"PRAGMA table_info({added.group(1)})")
                }:
                    continue  # a file that already has it (made by a later version's DDL)
                conn.execute(statement)
            if step == 4:
                conn.create_function("attnswitch_vector_key", 2, vector_key, deterministic=True)
                fill_vector_keys(conn, "?", "attnswitch_vector_key(?, text)")
            if step == FLOAT16_SINCE:
                conn.create_function(
                    "attnswitch_float16", 1, float16_of_float32, deterministic=True
                )
                conn.execute("UPDATE chunks SET vector = attnswitch_float16(vector)")
    for statement in (
        *DEDUP_INDEXES,
        LANGUAGE_INDEX,
        UNENCODED_INDEX,
        QUICK_ONLY_INDEX,
        *FULL_GEN_INDEXES,
        ACCESS_INDEX,
        *CHUNK_TRIGGERS,
    ):
        conn.execute(statement)
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('store_id', ?)", (uuid.uuid4().hex,))
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def float16_of_float32(blob: Any) -> Any:
    """A vector as a file before version 8 stored it (little-endian float32 elements) as
    version 8 stores it: each element rounded to nearest float16 (`STORED_ELEMENT`). A blob
    that is not whole float32 elements is returned as it is: a vector of the wrong length
    stays one, and a read still names it (`store_base.unpack_vectors`)."""
    if not isinstance(blob, bytes) or len(blob) % 4:
        return blob
    return np.frombuffer(blob, "<f4").astype(STORED_ELEMENT).tobytes()
