"""Recognised text kept by content: a page image read once is not read again, whatever
file it comes back in (issue 39's "OCR results cached by content").

A run reads a document again when its file changed or when the index's config did (another
model or chunk size: every document is read again), and a copy or a new version of a scan
holds the same pages. OCR is most of such a read (2 to 9 s a page on one core,
docs/results/ocr_languages.md), and Tesseract gives the same text for the same image, packs
and program, so each page's text is kept under the key of what made it (`page_key`): the
image's bytes (PNG, as rendered: the resolution is in them), the packs chosen and installed,
script detection on or off, Tesseract's build (`tesseract.build`: its version and its
data files) and how a page is read (`READING`: the order of readings and OSD that
`ocr.read_best` follows). Any change of those is another key; nothing stale is found.

The texts live in one SQLite file in attnswitch's cache folder (`ocr.sqlite3`), shared by the
read workers of every run (WAL; a writer waits for another). At most `MAX_PAGES` are kept,
the least recently used dropped first. The cache only ever saves work: a file that cannot be
opened or written (a read-only cache folder, a broken file) is passed over and the page is
recognised as without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
import time
from collections.abc import Iterator

from attnswitch.documents.readers.ocr_languages import OcrLanguages
from attnswitch.kernels.cache import cache_file
from attnswitch.provenance import provenance_key

FILE_NAME = "ocr.sqlite3"
# About 3 KB of text a page: at most ~600 MB of cache.
MAX_PAGES = 200_000
# How `ocr.read_best` reads a page: 1, OSD first then the packs of the script; 2, the
# chosen packs first, OSD only where Tesseract is unsure of their reading.
READING = 2
# Every this many pages kept, the oldest past MAX_PAGES are dropped.
_PRUNE_EVERY = 1_000
log = logging.getLogger(__name__)


def page_key(png: bytes, languages: OcrLanguages) -> str:
    """The key of the text Tesseract makes of the page image `png` with `languages`."""
    return provenance_key(
        {
            "what": "ocr page",
            "reading": READING,
            "png_sha256": hashlib.sha256(png).hexdigest(),
            "chosen": list(languages.chosen),
            "installed": sorted(languages.installed),
            "detect": languages.detect,
            "tesseract": languages.build,
        }
    )


@contextlib.contextmanager
def _pages() -> Iterator[sqlite3.Connection]:
    path = cache_file(FILE_NAME)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS pages (key TEXT PRIMARY KEY, "
            "text TEXT NOT NULL, used_at REAL NOT NULL)"
        )
        yield conn
    finally:
        conn.close()


def cached_text(key: str) -> str | None:
    """The text kept under `key` (marked as used now), or None."""
    try:
        with _pages() as conn:
            row = conn.execute("SELECT text FROM pages WHERE key = ?", (key,)).fetchone()
            if row is not None:
                conn.execute("UPDATE pages SET used_at = ? WHERE key = ?", (time.time(), key))
            return None if row is None else str(row[0])
    except (OSError, sqlite3.Error) as exc:
        log.debug("OCR cache not read: %s", exc)
        return None


def keep_text(key: str, text: str) -> None:
    """Keep `text` under `key`, dropping the least recently used pages past `MAX_PAGES`."""
    try:
        with _pages() as conn:
            rowid = conn.execute(
                "INSERT OR REPLACE INTO pages VALUES (?, ?, ?)", (key, text, time.time())
            ).lastrowid
            if rowid and rowid % _PRUNE_EVERY == 0:
                conn.execute(
                    "DELETE FROM pages WHERE key IN (SELECT key FROM pages "
                    "ORDER BY used_at DESC LIMIT -1 OFFSET ?)",
                    (MAX_PAGES,),
                )
    except (OSError, sqlite3.Error) as exc:
        log.debug("OCR cache not written: %s", exc)
