"""What the index's commands share: `--db` resolved and the index opened there
(`store_location`, `open_index` for the commands that read, `_open_store` for those that
write), and failing in one line (`_fail`, `_store_errors`, `_interruptible`). Used by
`cli/pipeline.py` (`run`), `cli/search_command.py` (`search`, `status`) and `cli/sync.py`
(`watch`, `forget`).

Every failure prints `attnswitch COMMAND: MESSAGE` on stderr and, with `--json`,
`{"error": MESSAGE}` on stdout; the exit status is the caller's (1 refused or failed, 2 a
bad argument, 130 interrupted).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from attnswitch.cli.output import print_json

if TYPE_CHECKING:
    from attnswitch.indexing.index import Index


def _fail(command: str, message: str, as_json: bool, code: int = 1) -> typer.Exit:
    """Report an error (stderr, and stdout as JSON with --json); the caller raises it."""
    typer.echo(f"attnswitch {command}: {message}", err=True)
    if as_json:
        print_json({"error": message})
    return typer.Exit(code)


@contextlib.contextmanager
def _store_errors(command: str, path: Path | str, as_json: bool) -> Iterator[None]:
    """Report an error about the store's file (corrupt, locked, another schema, a vector of
    the wrong length: `store_errors`) in one line naming the file and what to do."""
    from attnswitch.indexing.store_errors import describe, is_store_error

    try:
        yield
    except Exception as exc:
        if not is_store_error(exc):
            raise
        raise _fail(command, describe(exc, str(path)), as_json) from None


@contextlib.contextmanager
def _interruptible(command: str, as_json: bool) -> Iterator[None]:
    """Ctrl-C (SIGINT) inside: the command's one line, "interrupted", and exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        raise _fail(command, "interrupted", as_json, 130) from None


def store_location(db: str | None) -> str | Path:
    """What `--db` names (`Index.resolve`): a PostgreSQL URL as given, else the SQLite file;
    with no `--db`, the index found from the current folder (`index.default_location`),
    else `./.attnswitch/` (a reading command then fails naming where it looked)."""
    from attnswitch.indexing.index import Index

    return Index.resolve(db)


def run_store_location(folder: Path, db: str | None) -> str | Path:
    """Where `run FOLDER` and `watch FOLDER` write (`index.run_location`): `--db`, else
    the index found that already holds FOLDER or is the current folder's, else a new
    `./.attnswitch/`."""
    from attnswitch.indexing.index import run_location

    return run_location(folder, db)


def _no_index(command: str, location: Path, as_json: bool) -> typer.Exit:
    """The one-line failure for a SQLite index that is not there; the caller raises it.
    With no `--db` and none found, the line names every place looked
    (`location.IndexNotFoundError`)."""
    from attnswitch.indexing.index import NEW_INDEX, IndexNotFoundError, find_index

    if location == NEW_INDEX:
        try:
            find_index()
        except IndexNotFoundError as exc:
            return _fail(command, _not_found(exc), as_json)
    return _fail(
        command,
        f"no index at {location}: run `attnswitch run FOLDER"
        f"{'' if location == NEW_INDEX else ' --db ' + str(location.parent)}`"
        " first",
        as_json,
    )


def _not_found(exc: Exception) -> str:
    """`IndexNotFoundError`'s message as the CLI words it: "no index found: looked in ..."."""
    return "no index found: " + str(exc).split("got none: ", 1)[-1]


@contextlib.contextmanager
def _opening(command: str, location: str | Path, as_json: bool) -> Iterator[None]:
    """A store that cannot be opened (a server that refuses, a file that is not an index)
    ends the command with one line (`store_errors.describe`)."""
    from attnswitch.indexing.store_errors import (
        StoreConnectError,
        StoreInputError,
        describe,
        is_store_error,
    )

    try:
        yield
    except Exception as exc:  # the store's own errors and its driver's (sqlite3.Error)
        if not (isinstance(exc, StoreConnectError | StoreInputError) or is_store_error(exc)):
            raise
        message = describe(exc, str(location)) if is_store_error(exc) else str(exc)
        raise _fail(command, message, as_json) from None


def _migrated(line: str | None) -> None:
    """Say once that the store was upgraded (on stderr: stdout may be JSON)."""
    if line:
        typer.echo(line, err=True)


def open_index(location: str | Path, command: str, as_json: bool) -> Index:
    """The existing index at `location` (`Index.open`), or the command's one-line failure
    (no index there, or one that cannot be opened)."""
    from attnswitch.indexing.index import Index, IndexMissingError, IndexNotFoundError

    with _opening(command, location, as_json):
        try:
            index = Index.open(location)
        except IndexNotFoundError as exc:
            raise _fail(command, _not_found(exc), as_json) from None
        except IndexMissingError as exc:
            raise _no_index(command, exc.path, as_json) from None
    _migrated(index.migrated)
    return index


def _open_store(
    location: str | Path, command: str, as_json: bool, *, existing: bool = False
) -> Any:
    """The bare store at `location` (`Index.open_store`, for the commands that write), or
    the command's one-line failure; with `existing`, a SQLite store that does not exist is
    refused, not created."""
    from attnswitch.indexing.index import Index

    if existing and isinstance(location, Path) and not location.is_file():
        raise _no_index(command, location, as_json)
    with _opening(command, location, as_json):
        store = Index.open_store(location)
    _migrated(store.migrated)
    return store
