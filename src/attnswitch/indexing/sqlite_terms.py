"""The SQLite store's keyword index written by Python, so that other programs can write the
file (docs/architecture.md, "Stores and search").

The FTS5 table `chunks_terms` is contentless: a chunk's row holds the analyzer's terms and
stems of its text (`analyzer.document_terms`, `document_stems`, joined by spaces), and
FTS5 removes a row only when told the terms it was given. No trigger computes them (a
trigger calling a function of attnswitch's made every write of another program fail with
"no such function"): the chunks' triggers, plain SQL, queue each change in `terms_pending`
(an added chunk's id, text NULL; a removed or reworded chunk's id with its old text and
language), and `apply_pending` makes the terms in Python and writes them to the index,
inside the transaction that changed the chunks when attnswitch wrote them, or at the next
opening, write or keyword search when another program did.

Rows: `pending`, `apply_pending` and `reanalyze` take a connection inside the caller's
transaction; `remove_orphans` deletes the chunks whose document is gone.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Sequence

from attnswitch.indexing import analyzer

log = logging.getLogger(__name__)

# Chunks analysed per statement (`apply_pending`, `reanalyze`): a bounded part of the
# queue and of the texts in memory at once.
BATCH = 1000


def terms_of(text: str, language: str | None) -> tuple[str, str]:
    """(terms, stems) of a chunk of `text` in `language` as the index holds them: the
    analyzer's words and stems joined by spaces (FTS5's tokenizer splits on spaces only)."""
    lang = language or ""
    return (
        " ".join(analyzer.document_terms(text, lang)),
        " ".join(analyzer.document_stems(text, lang)),
    )


def pending(conn: sqlite3.Connection) -> bool:
    """Whether chunk changes wait for the keyword index (one b-tree descent)."""
    return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM terms_pending)").fetchone()[0])


def apply_pending(conn: sqlite3.Connection) -> int:
    """Bring the keyword index up to the chunks, inside the caller's transaction, and empty
    the queue; returns how many chunk ids it touched (0: nothing was queued).

    The index held, before the queued changes, each chunk as it was then. So for each
    chunk id only its first queued change and its row now matter: a first change that
    removed or reworded it gives the terms to remove (of its old text and language), and
    the chunk stored now, if any, the terms to add. A chunk stored without a language
    (written by another program) gets `analyzer.detect_language`'s first."""
    top = conn.execute("SELECT MAX(seq) FROM terms_pending").fetchone()[0]
    if top is None:
        return 0
    firsts = conn.execute(
        "SELECT chunk_id, text, language FROM terms_pending WHERE seq IN (SELECT MIN(seq) "
        "FROM terms_pending WHERE seq <= ? GROUP BY chunk_id) ORDER BY chunk_id",
        (top,),
    )
    touched = 0
    while batch := firsts.fetchmany(BATCH):
        conn.executemany(
            "INSERT INTO chunks_terms (chunks_terms, rowid, terms, stems) "
            "VALUES ('delete', ?, ?, ?)",
            ((cid, *terms_of(text, language)) for cid, text, language in batch if text is not None),
        )
        rows = conn.execute(
            "SELECT id, text, language FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([cid for cid, _, _ in batch]),),
        ).fetchall()
        _index(conn, rows)
        touched += len(batch)
    conn.execute("DELETE FROM terms_pending WHERE seq <= ?", (top,))
    return touched


def _index(conn: sqlite3.Connection, rows: Sequence[tuple[int, str, str | None]]) -> None:
    """Add these chunks (id, text, language) to the keyword index; a chunk without a
    language gets its language stored first."""
    found = [
        (cid, text, analyzer.detect_language(text) if language is None else language, language)
        for cid, text, language in rows
    ]
    conn.executemany(
        "UPDATE chunks SET language = ? WHERE id = ?",
        ((language, cid) for cid, _, language, stored in found if stored is None),
    )
    conn.executemany(
        "INSERT INTO chunks_terms (rowid, terms, stems) VALUES (?, ?, ?)",
        ((cid, *terms_of(text, language)) for cid, text, language, _ in found),
    )


def reanalyze(conn: sqlite3.Connection, where: str) -> None:
    """Make the keyword index again with this analyzer (`analyzer.fingerprint`), inside
    the caller's transaction: the chunks stored without a language get theirs, every
    chunk's terms are indexed again, the queue of changes is emptied (the new index holds
    them); no vector changes."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
    if row is not None and row[0] == analyzer.fingerprint():
        return  # another process made it meanwhile
    started = time.monotonic()
    conn.execute("INSERT INTO chunks_terms (chunks_terms) VALUES ('delete-all')")
    last, n = 0, 0
    while rows := conn.execute(
        "SELECT id, text, language FROM chunks WHERE id > ? ORDER BY id LIMIT ?", (last, BATCH)
    ).fetchall():
        _index(conn, rows)
        last, n = rows[-1][0], n + len(rows)
    conn.execute("DELETE FROM terms_pending")
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('analyzer', ?)", (analyzer.fingerprint(),))
    if n:
        log.info(
            "%s: keyword index made again by analyzer %s (%d chunks, %.1f s)",
            where,
            analyzer.fingerprint(),
            n,
            time.monotonic() - started,
        )


def remove_orphans(conn: sqlite3.Connection) -> int:
    """Delete the chunks whose document row is gone, inside the caller's transaction (their
    triggers queue their terms' removal); returns how many. Only a program that replaced a
    document row (INSERT OR REPLACE) with both foreign keys and recursive triggers off
    leaves such chunks: a deleted document's chunks go with it (`documents_removed`). The
    chunks' documents are found by one index seek each (a loose index scan), not by a scan
    of every chunk."""
    orphans = [
        r[0]
        for r in conn.execute(
            "WITH RECURSIVE seen(doc_id) AS (SELECT min(doc_id) FROM chunks UNION ALL "
            "SELECT (SELECT min(doc_id) FROM chunks WHERE doc_id > seen.doc_id) FROM seen "
            "WHERE seen.doc_id IS NOT NULL) SELECT doc_id FROM seen WHERE doc_id IS NOT "
            "NULL AND doc_id NOT IN (SELECT id FROM documents)"
        )
    ]
    if not orphans:
        return 0
    return conn.execute(
        "DELETE FROM chunks WHERE doc_id IN (SELECT value FROM json_each(?))",
        (json.dumps(orphans),),
    ).rowcount
