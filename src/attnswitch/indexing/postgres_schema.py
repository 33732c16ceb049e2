"""The PostgreSQL store's schema: its tables and indexes (`_SCHEMA`, the HNSW and keyword
indexes), the connection that makes them ready (`connect`: pgvector's types registered, the
schema created under an advisory lock), the upgrades of a database made by an older
version (`upgrade`), and a URL shown without its password (`describe`). The store itself
is `store_postgres.PostgresStore`; the upgrades that rewrite rows are `postgres_upgrades`."""

from __future__ import annotations

from typing import Any

from attnswitch.indexing import analyzer
from attnswitch.indexing.postgres_segments import HNSW_EF_CONSTRUCTION, HNSW_M, prepare
from attnswitch.indexing.postgres_upgrades import reanalyze, to_halfvec, type_quick
from attnswitch.indexing.records import CHUNK_STRUCTURE_COLUMNS
from attnswitch.indexing.store_access import ACCESS_INDEX, ACCESS_TABLE
from attnswitch.indexing.store_base import DEDUP_INDEXES, LANGUAGE_INDEX, fill_vector_keys
from attnswitch.indexing.store_errors import StoreConnectError

CONNECT_TIMEOUT_S = 5
# Keys of the advisory locks (any fixed bigints; "attnswitch" in ASCII, and + 1, + 2).
RUN_LOCK = 0x6174746E737769
SCHEMA_LOCK = RUN_LOCK + 1
DIM_LOCK = RUN_LOCK + 2

# The pgvector release that added `halfvec` (the stored vectors' type).
PGVECTOR_HALFVEC = (0, 7)

_EXTENSION = "CREATE EXTENSION IF NOT EXISTS vector"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS documents (
    id BIGSERIAL PRIMARY KEY,
    root TEXT NOT NULL,
    source TEXT NOT NULL,
    sha256 TEXT,
    size BIGINT NOT NULL,
    mtime_ns BIGINT NOT NULL,
    kind TEXT,
    encoding TEXT,
    status TEXT NOT NULL CHECK (status IN ('indexed', 'skipped')),
    skip TEXT,
    reason TEXT,
    config TEXT NOT NULL,
    n_chunks INTEGER NOT NULL DEFAULT 0,
    n_tokens INTEGER NOT NULL DEFAULT 0,
    run_id BIGINT,
    updated_at DOUBLE PRECISION NOT NULL,
    access TEXT,
    UNIQUE (root, source)
)""",
    ACCESS_TABLE,
    """CREATE TABLE IF NOT EXISTS chunks (
    id BIGSERIAL PRIMARY KEY,
    doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    n_tokens INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    embedding halfvec,
    terms tsvector,
    language TEXT,
    heading_path TEXT NOT NULL DEFAULT '[]',
    location TEXT NOT NULL DEFAULT '{}',
    vector_key TEXT,
    quick halfvec,
    prefix TEXT NOT NULL DEFAULT '',
    full_gen BIGINT NOT NULL DEFAULT 0,
    UNIQUE (doc_id, ordinal)
)""",
    """CREATE TABLE IF NOT EXISTS runs (
    id BIGSERIAL PRIMARY KEY,
    root TEXT,
    config TEXT,
    pid INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
    counts TEXT NOT NULL DEFAULT '{}',
    summary TEXT NOT NULL DEFAULT '{}'
)""",
    """CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed',
                                           'interrupted', 'cancelled')),
    created_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION,
    finished_at DOUBLE PRECISION,
    progress TEXT NOT NULL DEFAULT '{}',
    summary TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    resume INTEGER NOT NULL DEFAULT 0
)""",
)

# A database made before chunks had a heading path, location and vector key gets them
# (`upgrade`); its stored chunks' vector keys are computed in SQL, as `store.vector_key`
# does in Python.
_UPGRADE = tuple(
    f"ALTER TABLE chunks ADD COLUMN IF NOT EXISTS {column}"
    for column in (
        "heading_path TEXT NOT NULL DEFAULT '[]'",
        "location TEXT NOT NULL DEFAULT '{}'",
        "vector_key TEXT",
    )
)
# A database made before the analyzer (its keyword index PostgreSQL's English words of
# the text, a generated column) gets the analyzer's columns; `postgres_upgrades.reanalyze` fills them.
_ANALYZER_UPGRADE = (
    "ALTER TABLE chunks DROP COLUMN IF EXISTS tsv",
    "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS terms tsvector",
    "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS language TEXT",
)
# Two kinds of vector (schema version 10; docs/architecture.md, "Two passes"): a chunk's
# full vector may be missing (NULL until the full pass or a search encodes it), and it
# gets a quick vector (the static model's) and the encoder's prefix.
_PASSES_UPGRADE = (
    "ALTER TABLE chunks ALTER COLUMN embedding DROP NOT NULL",
    "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS quick halfvec",
    "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS prefix TEXT NOT NULL DEFAULT ''",
)
# Each document's permissions as read (schema version 11, `store_access`): the documents'
# `access` column (the `access` table is made by `_SCHEMA`); NULL for those stored before.
_ACCESS_UPGRADE = ("ALTER TABLE documents ADD COLUMN IF NOT EXISTS access TEXT",)
# The generation each full vector was written in (the HNSW index in segments,
# `postgres_segments`); 0 for those stored before, which `prepare` makes a segment.
_SEGMENTS_UPGRADE = (
    "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS full_gen BIGINT NOT NULL DEFAULT 0",
)
# The chunks still without a full vector, by document (the full pass's queue).
UNENCODED_INDEX = (
    "CREATE INDEX IF NOT EXISTS chunks_unencoded ON chunks (doc_id) WHERE embedding IS NULL"
)
# A jobs table made before a job could be "cancelled" (its CHECK named by PostgreSQL's
# rule, <table>_<column>_check) gets the CHECK of `_SCHEMA`.
_JOBS_STATUS_CHECK = (
    "ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_status_check",
    "ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN ('queued', "
    "'running', 'completed', 'failed', 'interrupted', 'cancelled'))",
)
# Indexes made by `upgrade` once their columns exist, each only when the catalog lacks it:
# CREATE INDEX takes a SHARE lock on its table even when the index exists, so running
# them on every open deadlocks against a run that holds its chunks' rows and wants the
# documents' (or waits for that run's transaction to end).
# The keyword index: GIN over the analyzer's terms.
TERMS_INDEX = "CREATE INDEX IF NOT EXISTS chunks_terms ON chunks USING gin (terms)"
_INDEXES = (TERMS_INDEX, *DEDUP_INDEXES, LANGUAGE_INDEX, UNENCODED_INDEX, ACCESS_INDEX)
_VECTOR_KEY_SQL = "encode(sha256(convert_to(%s || E'\\n' || text, 'UTF8')), 'hex')"
# The quick list's chunks: a quick vector and no full vector yet (docs/architecture.md,
# "The quick list at scale").
QUICK_ONLY = "embedding IS NULL AND quick IS NOT NULL"
# How many chunks are in the quick list, counted up to a limit (the one parameter).
QUICK_ONLY_COUNT = f"SELECT COUNT(*) FROM (SELECT 1 FROM chunks WHERE {QUICK_ONLY} LIMIT %s) t"
# The partial HNSW index of their quick vectors (the quick column typed `halfvec(dim)` by
# `PostgresStore.set_quick_model`), made by `PostgresStore.sync_index` when a run ends with
# at least `QUICK_EXACT_BELOW` such chunks, not kept during the quick pass: maintaining it
# made the quick pass's inserts 8.3x slower at 20,000 chunks of dimension 384 and 19.5x at
# 100,000, where building it once the rows are in took 1.6x and 3.5x what the inserts did
# (benchmarks/pg_quick_index.py).
QUICK_HNSW = "chunks_quick_hnsw"
QUICK_HNSW_INDEX = (
    f"CREATE INDEX {QUICK_HNSW} ON chunks USING hnsw (quick halfvec_ip_ops) WITH "
    f"(m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE embedding IS NULL"
)
# Below this many quick-only chunks the quick list is an exact scan and has no index.
QUICK_EXACT_BELOW = 20_000


def connect(url: str) -> Any:
    """A psycopg connection to `url` with pgvector's types registered, or
    `StoreConnectError` naming what is wrong in one line."""
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        raise StoreConnectError(
            f"--db: expected psycopg and pgvector for a PostgreSQL store (pip install "
            f"'attnswitch[postgres]'), got {type(exc).__name__}: {exc}"
        ) from None
    from psycopg.conninfo import conninfo_to_dict

    where = describe(url)
    try:
        port = conninfo_to_dict(url).get("port")
        if port is not None and not str(port).replace(",", "").isdigit():
            raise psycopg.ProgrammingError(f"invalid port {port!r}")
        conn = psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
    except psycopg.ProgrammingError as exc:
        raise StoreConnectError(
            f"--db: expected a URL like postgresql://USER@HOST:PORT/DBNAME, got {where!r} "
            f"({first_line(exc)})"
        ) from None
    except psycopg.OperationalError as exc:
        raise StoreConnectError(
            f"--db: expected a PostgreSQL server answering at {where}, got: {first_line(exc)}"
        ) from None
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            conn.execute(_EXTENSION)
            version = pgvector_version(conn)
            if version < PGVECTOR_HALFVEC:
                want, got = (".".join(map(str, v)) for v in (PGVECTOR_HALFVEC, version))
                raise StoreConnectError(
                    f"--db: expected pgvector {want} or later in the database at {where} "
                    f"(its halfvec type holds the vectors), got {got}; install a newer "
                    "pgvector on the server and run ALTER EXTENSION vector UPDATE in this "
                    "database"
                )
            for statement in _SCHEMA:
                conn.execute(statement)
    except (
        psycopg.errors.FeatureNotSupported,
        psycopg.errors.UndefinedFile,
        psycopg.errors.InsufficientPrivilege,
    ) as exc:
        conn.close()
        raise StoreConnectError(
            f"--db: expected the pgvector extension on the PostgreSQL server at {where}, "
            f"got: {first_line(exc)}; install it there (Debian: postgresql-NN-pgvector) "
            "and let this user CREATE EXTENSION vector"
        ) from None
    except BaseException:
        conn.close()
        raise
    register_vector(conn)
    return conn


def column_dim(conn: Any, column: str) -> int | None:
    """The dimension the chunks' vector column `column` is typed with (`halfvec(384)`:
    384), or None while it is untyped (`halfvec`) or absent. Reads the catalog only."""
    found = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        "'chunks'::regclass AND attname = %s AND NOT attisdropped",
        (column,),
    ).fetchone()
    typed = "" if found is None else str(found[0]).partition("(")[2].rstrip(")")
    return int(typed) if typed.isdigit() else None


def pgvector_version(conn: Any) -> tuple[int, ...]:
    """The version of the pgvector extension in `conn`'s database, as numbers ((0, 8, 5))."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return tuple(int(p) for p in str(row[0] if row else "0").split(".") if p.isdigit())


def upgrade(conn: Any) -> bool:
    """Add the chunk columns of `store.CHUNK_STRUCTURE_COLUMNS` to a database made before
    them, filling in the stored chunks' vector keys (`store_base.fill_vector_keys`); True
    when it did (False: the columns were there). A jobs table made before jobs could be
    "cancelled" gets the wider CHECK (`_JOBS_STATUS_CHECK`). Vectors stored as `vector`
    (float32) are converted to `halfvec` (`postgres_upgrades.to_halfvec`), and an untyped
    quick column gets the recorded static model's dimension (`postgres_upgrades.type_quick`,
    which the quick list's HNSW index needs). The dedup indexes
    (`store_base.DEDUP_INDEXES`) and the keyword index are made here, once the columns they
    index exist, and only when missing (`_create_missing_indexes`)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        check = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = "
            "'jobs'::regclass AND conname = 'jobs_status_check'"
        ).fetchone()
        if check is None or "cancelled" not in check[0]:
            for statement in _JOBS_STATUS_CHECK:
                conn.execute(statement)
        have = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = 'chunks'"
            )
        }
        upgraded = not set(CHUNK_STRUCTURE_COLUMNS) <= have
        if upgraded:
            for statement in _UPGRADE:
                conn.execute(statement)
            fill_vector_keys(conn, "%s", _VECTOR_KEY_SQL)
        if not {"terms", "language"} <= have or "tsv" in have:
            for statement in _ANALYZER_UPGRADE:
                conn.execute(statement)
        if not {"quick", "prefix"} <= have:
            for statement in _PASSES_UPGRADE:
                conn.execute(statement)
        documents = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = 'documents'"
            )
        }
        if "access" not in documents:
            for statement in _ACCESS_UPGRADE:
                conn.execute(statement)
        if "full_gen" not in have:
            for statement in _SEGMENTS_UPGRADE:
                conn.execute(statement)
        prepare(conn, converted=to_halfvec(conn))
        type_quick(conn)
        _create_missing_indexes(conn, _INDEXES)
        row = conn.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
        if row is None or row[0] != analyzer.fingerprint():
            reanalyze(conn)
    return upgraded


def _create_missing_indexes(conn: Any, statements: tuple[str, ...]) -> None:
    """Run those of `statements` (each `CREATE INDEX IF NOT EXISTS <name> ON ...`) whose
    index is not in the current schema. Reading `pg_indexes` takes no lock on a table."""
    names = {statement.split()[5]: statement for statement in statements}
    have = {
        r[0]
        for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname = ANY(%s)",
            (list(names),),
        )
    }
    for name, statement in names.items():
        if name not in have:
            conn.execute(statement)


def describe(url: str) -> str:
    """`url` without its password: postgresql://USER@HOST:PORT/DBNAME."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(url)
    except Exception:  # not parseable: shown as given, less anything after a colon+@
        head, at, tail = url.rpartition("@")
        return (
            head.split(":", 2)[0] + ":" + head.split(":", 2)[1] + "@" + tail
            if at and head.count(":") >= 2
            else url
        )
    user = None if parts.get("user") is None else str(parts.get("user"))
    host = parts.get("host") or "localhost"
    port = str(parts.get("port") or "5432")
    return f"postgresql://{user + '@' if user else ''}{host}:{port}/{parts.get('dbname', '')}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
