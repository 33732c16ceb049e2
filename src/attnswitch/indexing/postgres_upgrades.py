"""The PostgreSQL store's upgrades that rewrite stored rows, each inside the caller's
transaction (`postgres_schema.upgrade` holds the schema lock): vectors from float32 to
float16 (`to_halfvec`), the quick vectors' column typed with their dimension
(`type_quick`) and the keyword index made again by a new analyzer (`reanalyze`)."""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from attnswitch.indexing import analyzer

if TYPE_CHECKING:
    from psycopg import Connection

    # psycopg's default rows (`tuple_row`), as `postgres_schema.connect` makes them
    Conn = Connection[tuple[Any, ...]]

log = logging.getLogger("attnswitch.indexing.store_postgres")  # the store's own log
# Chunks analysed again per statement by `reanalyze`.
REANALYZE_BATCH = 500


def to_halfvec(conn: Conn) -> bool:
    """Convert the chunks' vectors from `vector` (float32, before schema version 8) to
    `halfvec` (float16) in place, inside the caller's transaction: their HNSW index
    dropped and the column's type changed (pgvector's cast rounds each element to nearest;
    PostgreSQL rewrites the table, every chunk and its id kept, nothing encoded again).
    Whether it did (the caller indexes the vectors again: `postgres_segments.adopt_legacy`);
    nothing to do when the column is `halfvec` already (or absent)."""
    found = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        "'chunks'::regclass AND attname = 'embedding'"
    ).fetchone()
    if found is None or not found[0].startswith("vector"):
        return False
    column: str = found[0]
    typed = column[len("vector") :]  # "(384)", or "" before the first vectors
    started = time.monotonic()
    conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
    conn.execute(
        f"ALTER TABLE chunks ALTER COLUMN embedding TYPE halfvec{typed} "
        f"USING embedding::halfvec{typed}"
    )
    count = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()
    log.info(
        "vectors converted from float32 (vector%s) to float16 (halfvec%s): %d chunks, %.1f s",
        typed,
        typed,
        count[0] if count else 0,
        time.monotonic() - started,
    )
    return True


def type_quick(conn: Conn) -> None:
    """Give an untyped quick column (`halfvec`, as schema versions 10 to 12 made it) the
    dimension of the static model recorded in meta "quick" (`type_quick_column`), inside
    the caller's transaction. Nothing to do when the column is typed already, absent, or
    no static model is recorded (`set_quick_model` types it)."""
    found = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        "'chunks'::regclass AND attname = 'quick' AND NOT attisdropped"
    ).fetchone()
    if found is None or found[0] != "halfvec":
        return
    row = conn.execute("SELECT value FROM meta WHERE key = 'quick'").fetchone()
    try:
        dim = int(json.loads(row[0])["dim"]) if row else 0
    except (ValueError, TypeError, KeyError):
        dim = 0
    if dim > 0:
        type_quick_column(conn, dim)


def type_quick_column(conn: Conn, dim: int) -> None:
    """Type the chunks' quick column `halfvec(dim)` (pgvector indexes only a typed column),
    inside the caller's transaction. With no quick vector stored the column is made again
    (dropped and added: no row is rewritten); else its type is changed in place, every row
    rewritten, a stored quick vector of another dimension (which no query of the model can
    be compared with) dropped (NULL; the next quick pass of its document writes it)."""
    stored = conn.execute("SELECT EXISTS (SELECT 1 FROM chunks WHERE quick IS NOT NULL)").fetchone()
    started = time.monotonic()
    if not (stored and stored[0]):
        conn.execute(f"ALTER TABLE chunks DROP COLUMN quick, ADD COLUMN quick halfvec({dim})")
        return
    conn.execute(
        f"ALTER TABLE chunks ALTER COLUMN quick TYPE halfvec({dim}) USING CASE WHEN "
        f"vector_dims(quick) = {dim} THEN quick::halfvec({dim}) END"
    )
    log.info(
        "quick vectors' column typed halfvec(%d) (for its HNSW index): %.1f s",
        dim,
        time.monotonic() - started,
    )


def reanalyze(conn: Conn) -> None:
    """Make the keyword index again with this analyzer (`analyzer.fingerprint`), inside
    the caller's transaction: the chunks stored without a language get theirs, every
    chunk's terms are written again; no vector changes."""
    started, last, n = time.monotonic(), 0, 0
    while rows := conn.execute(
        "SELECT id, text, language FROM chunks WHERE id > %s ORDER BY id LIMIT %s",
        (last, REANALYZE_BATCH),
    ).fetchall():
        values = []
        for chunk_id, text, language in rows:
            language = analyzer.detect_language(text) if language is None else language
            values.append(
                (
                    language,
                    analyzer.tsvector_literal(
                        analyzer.document_terms(text, language),
                        analyzer.document_stems(text, language),
                    ),
                    chunk_id,
                )
            )
        conn.cursor().executemany(
            "UPDATE chunks SET language = %s, terms = %s::tsvector WHERE id = %s", values
        )
        last, n = rows[-1][0], n + len(rows)
    conn.execute(
        "INSERT INTO meta VALUES ('analyzer', %s) ON CONFLICT (key) DO UPDATE SET "
        "value = excluded.value",
        (analyzer.fingerprint(),),
    )
    if n:
        log.info(
            "keyword index made again by analyzer %s (%d chunks, %.1f s)",
            analyzer.fingerprint(),
            n,
            time.monotonic() - started,
        )
