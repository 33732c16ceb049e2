"""The errors of a store, and what can go wrong with a store's file said in one line: which file, what is wrong with
it, and what to do.

`STORE_ERRORS` is every exception a store raises for its file rather than for its caller's
arguments: SQLite's own errors (not a database, malformed, locked, read-only, another
schema), `StoreCorruptError` (rows SQLite reads fine but attnswitch cannot use, such as a
vector of the wrong length), `StoreBusyError` (another run holds the run lock) and a
schema newer than this attnswitch (`StoreInputError` from `SQLiteStore(path)`).
`describe(exc, where)` turns any of them into the message the CLI prints and the service answers with.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence

from attnswitch.errors import AttnswitchError

REBUILD = "move the file aside and run `attnswitch run FOLDER` again to rebuild the index"


class StoreInputError(AttnswitchError, ValueError):
    """An argument given to the store is unusable; nothing was written."""

    def __init__(self, name: str, expected: str, got: object):
        self.argument = name
        super().__init__(f"{name}: expected {expected}, got {got}")


class StoreBusyError(AttnswitchError, RuntimeError):
    """Another process holds this store's run lock."""


class StoreConnectError(AttnswitchError, ConnectionError):
    """The store's server cannot be reached or used (one line: what, where, why)."""


class StoreDeadlineError(AttnswitchError, TimeoutError):
    """Work of the store's stopped at the deadline its caller set (`StoreBase.deadline`):
    the statement running then was interrupted, nothing was written, the connection is
    usable. Not an error about the store itself (`is_store_error` is False)."""

    def __init__(
        self,
        message: str = "deadline: expected the store's work done before "
        "the caller's deadline, got work left when it passed (stopped)",
    ):
        super().__init__(message)


class StoreCorruptError(AttnswitchError, RuntimeError):
    """The store's file holds rows attnswitch cannot use (e.g. a vector whose length is
    not the store's dimension), or is not an index at all; the message names the file
    (`path`, when given, is how: `describe` shows it as the caller names the file) and
    what to do."""

    def __init__(self, message: str, path: object = None):
        super().__init__(message)
        self.path = path


def check_schema(
    conn: sqlite3.Connection,
    schema: Sequence[str],
    path: object,
    added: Collection[tuple[str, str]] = (),
) -> None:
    """Raise `StoreCorruptError` when a table of `schema` (its statements) exists in `conn`
    without all of its columns (a database another program made, under the index's name),
    less the (table, column) pairs in `added` (an upgrade of an older schema adds them).
    Call it before creating the tables, so such a database is left untouched."""
    expected = sqlite3.connect(":memory:")
    try:
        for statement in schema:
            expected.execute(statement)
        tables = [
            r[0]
            for r in expected.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        for table in tables:
            want = {r[1] for r in expected.execute(f"PRAGMA table_info({table})")}
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            want -= {column for t, column in added if t == table}
            if have and (missing := sorted(want - have)):
                raise StoreCorruptError(
                    f"{path}: not an attnswitch index of a schema this version knows (table "
                    f"{table} lacks {', '.join(missing)}; made by another program?); use "
                    f"another --db, or {REBUILD}",
                    path=path,
                )
    finally:
        expected.close()


def _errors() -> tuple[type[BaseException], ...]:
    return (sqlite3.Error, StoreCorruptError, StoreBusyError, StoreInputError)


def is_store_error(exc: BaseException) -> bool:
    """Whether `exc` is about the store's file (see the module doc), not a bug elsewhere.
    A `StoreInputError` counts only when it is about the store itself (its schema)."""
    if isinstance(exc, StoreInputError):
        return exc.argument == "store"
    return isinstance(exc, _errors())


def describe(exc: BaseException, where: str) -> str:
    """One line for a store error about the file `where` (a path, or a name such as "the
    server's index"): what is wrong and what to do."""
    text = str(exc).strip() or type(exc).__name__
    path = getattr(exc, "path", None)
    if path is not None:  # named as the caller names it
        text = text.replace(str(path), where)
    if isinstance(exc, (StoreCorruptError, StoreBusyError)) or not isinstance(exc, sqlite3.Error):
        return text if where in text else f"{where}: {text}"
    lowered = text.lower()
    if _disk_error(exc, lowered):
        return (
            f"{where}: could not be written ({text}): {_disk(where)} is full or "
            "failing; free space there, then run again to finish (every document is "
            "committed whole or not at all)"
        )
    if "locked" in lowered or "busy" in lowered:
        return (
            f"{where}: locked by another process ({text}); wait for it to finish, or "
            "use another --db"
        )
    if "readonly" in lowered or "read-only" in lowered or "unable to open" in lowered:
        return (
            f"{where}: cannot be opened for reading and writing ({text}); check the "
            "file's and its folder's permissions, or use another --db"
        )
    if "no such table" in lowered or "no such column" in lowered or "has no column" in lowered:
        return (
            f"{where}: not an attnswitch index of a schema this version knows ({text}); "
            f"use another --db, or {REBUILD}"
        )
    if isinstance(exc, sqlite3.DatabaseError):
        return f"{where}: not a readable attnswitch index ({text}); {REBUILD}"
    return f"{where}: the index could not be used ({type(exc).__name__}: {text})"


def _disk_error(exc: BaseException, lowered: str) -> bool:
    """Whether a SQLite error says a write failed on the disk: full (SQLITE_FULL), or an
    I/O error (SQLITE_IOERR_*, what a file-size limit or a failing disk gives)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return (
        name.startswith(("SQLITE_FULL", "SQLITE_IOERR"))
        or "disk is full" in lowered
        or "disk i/o error" in lowered
    )


def _disk(where: str) -> str:
    """The disk holding the file `where` names, said with its mount point and free space
    ("the disk holding it" when `where` is not a path of this machine)."""
    import os
    import shutil

    path = os.path.abspath(where)
    if not os.path.exists(os.path.dirname(path)):
        return "the disk holding it"
    mount = os.path.dirname(path)
    while not os.path.ismount(mount):
        mount = os.path.dirname(mount)
    free = shutil.disk_usage(mount).free
    return f"the disk mounted at {mount} ({free / 2**20:,.0f} MiB free)"
