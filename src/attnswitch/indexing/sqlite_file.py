"""Where a SQLite index is and whether a file there is one: `resolve_path` (the rule for
the library, the CLI's `--db` and the service), `check_index_file` (another program's
database, an empty file or a folder refused untouched)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from attnswitch.indexing.records import SCHEMA_VERSION
from attnswitch.indexing.sqlite_schema import ADDED_COLUMNS, SCHEMA
from attnswitch.indexing.store_errors import REBUILD, StoreCorruptError, check_schema

DEFAULT_DATA_DIR = ".attnswitch"
DB_NAME = "index.sqlite3"


def resolve_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The database file `path` names (the one rule for the library, the CLI's `--db` and the
    service): `./.attnswitch/index.sqlite3` when None; an existing file as is; `<dir>/
    index.sqlite3` for an existing folder, a path ending with a separator, or a new path
    without a file suffix (a data folder to create); a new path with a suffix (`x.db`) is
    the file itself."""
    if path is None:
        return Path(DEFAULT_DATA_DIR) / DB_NAME
    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir() or str(path).endswith(("/", os.sep)) or not p.suffix:
        return p / DB_NAME
    return p


def check_index_file(path: Path) -> None:
    """Raise `StoreCorruptError` unless the existing file at `path` is an attnswitch index
    (a SQLite database with the index's `meta` and `documents` tables), looking at it
    read-only: another program's database, an empty file or a file of another kind is
    refused untouched, never turned into an index. A table of the index's with other
    columns is refused by `check_schema`; a file of a newer schema version is left to the
    constructor's version check (which refuses it, untouched too)."""
    # Through SQLite only: closing a descriptor of our own on the file would drop the locks
    # that this process's other connections hold on it (POSIX advisory locks are per
    # process and per file).
    if path.is_dir():
        raise StoreCorruptError(
            f"{path}: expected an index file, got a folder; use another --db", path=path
        )
    if path.stat().st_size == 0:
        raise StoreCorruptError(
            f"{path}: not a readable attnswitch index (an empty file); it "
            f"is left as it is: use another --db, or {REBUILD}",
            path=path,
        )
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        raise StoreCorruptError(
            f"{path}: cannot be opened for reading ({exc}); check its "
            "permissions, or use another --db",
            path=path,
        ) from None
    try:
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                )
            }
        except sqlite3.DatabaseError as exc:
            if "not a database" not in str(exc):
                raise  # locked, malformed...: `store_errors.describe` says what to do
            raise StoreCorruptError(
                f"{path}: not a readable attnswitch index (not a SQLite "
                f"database); it is left as it is: use another --db, or "
                f"{REBUILD}",
                path=path,
            ) from None
        # a table of the index's with other columns
        check_schema(conn, SCHEMA, path, ADDED_COLUMNS)
    finally:
        conn.close()
    if version <= SCHEMA_VERSION and not {"meta", "documents"} <= tables:
        shown = ", ".join(sorted(tables)[:5]) or "none"
        raise StoreCorruptError(
            f"{path}: not an attnswitch index of a schema this version "
            f"knows (a SQLite database with tables: {shown}; made by "
            f"another program?); it is left as it is: use another --db, "
            f"or {REBUILD}",
            path=path,
        )


__all__ = ["DB_NAME", "DEFAULT_DATA_DIR", "check_index_file", "resolve_path"]
