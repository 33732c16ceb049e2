"""The index at a location, opened once for every front end: `Index.open(location)`.

A location is what `--db` and `db=` name: a data folder or SQLite file (`store.resolve_path`:
None is `./.attnswitch/index.sqlite3`), or a `postgresql://` (`postgres://`) URL. This is
the one place it is resolved, checked and opened (`Index.resolve`, `Index.open`); the
CLI, the Python call `attnswitch.search`, the service and the integrations all come here
(docs/architecture.md, "Stores and search").

An `Index` holds its store privately and gives the read-side views front ends need:
the stored config (`config`, read once and kept for the Index's life), the chunk count,
`status()`, the last runs, the languages, a chunk and its neighbours. Searching is its
`searcher()` (`searcher.Searcher`). A long-lived holder (the service's search threads)
calls `refresh()` before each use, which drops what the Index keeps when another
connection committed since. Writing will be its `writer()` (kept out of here).

Errors name `db`: `IndexMissingError` when a SQLite index that must exist does not,
`IndexEmptyError` when a search finds no documents to search (both `StoreInputError`s,
so `ValueError`s); the store's own errors (corrupt file, unreachable server) pass
through unchanged for the front end to word (`store_errors.describe`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.sqlite_file import DB_NAME, DEFAULT_DATA_DIR
from attnswitch.indexing.store_errors import StoreInputError

if TYPE_CHECKING:
    from types import TracebackType

    from attnswitch.indexing.access import Reader
    from attnswitch.indexing.config import IndexConfig
    from attnswitch.indexing.records import (
        ChunkRow,
        Coverage,
        DocumentTotals,
        RunRecord,
        StoredDocument,
        StoreStatus,
    )
    from attnswitch.indexing.searcher import Searcher
    from attnswitch.indexing.store import Store
    from attnswitch.indexing.store_postgres import PostgresStore
    from attnswitch.indexing.store_sqlite import SQLiteStore
    from attnswitch.indexing.writer import IndexWriter

    AnyStore = SQLiteStore | PostgresStore

Location = str | Path  # a resolved location: a PostgreSQL URL, or a SQLite file


class IndexMissingError(StoreInputError):
    """No index at a SQLite location that must hold one; `path` is the file looked for."""

    def __init__(self, path: Path):
        super().__init__(
            "db",
            "an index made by attnswitch.index(folder, db=...) or `attnswitch run`",
            f"{str(path)!r}, which does not exist",
        )
        self.path = path


class IndexEmptyError(StoreInputError):
    """An index with no documents (or no config) to search; `where` is how the store
    names itself (`Store.location`)."""

    def __init__(self, where: str):
        super().__init__("db", "an index with documents", f"the empty index at {where}")
        self.where = where


def is_url(location: object) -> bool:
    """Whether `location` names a PostgreSQL server rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


class Index(AbstractContextManager["Index"]):
    """An open index (see the module doc). Make it with `Index.open`; use it as a context
    manager or call `close()`. Not shared across threads (a SQLite connection belongs to
    its thread): each thread opens its own."""

    def __init__(self, store: AnyStore, location: Location):
        self._store = store
        self.location = location
        self._config: IndexConfig | None = None
        self._config_read = False
        self._count: int | None = None
        self._has_chunks: bool | None = None
        self._version: int | None = None

    # -- opening ---------------------------------------------------------------------

    @staticmethod
    def resolve(location: str | os.PathLike[str] | None = None) -> Location:
        """What `location` names, as `--db` reads it: a PostgreSQL URL as given, else the
        SQLite file (`store.resolve_path`: a data folder's `index.sqlite3`; None is the
        index found from the current folder, else `./.attnswitch/`:
        `default_location`). Anything else is refused naming `db`."""
        from attnswitch.indexing.store import resolve_path

        if location is None:
            return default_location()
        if location is not None and not isinstance(location, (str, os.PathLike)):
            raise StoreInputError("db", "a path or a postgresql:// URL", repr(location))
        if is_url(location):
            return str(location)
        return resolve_path(None if location is None else Path(location))

    @classmethod
    def open(
        cls,
        location: str | os.PathLike[str] | None = None,
        *,
        create: bool = False,
        reconnect_for_s: float | None = None,
    ) -> Index:
        """The index at `location` (`resolve`), open. A SQLite index must exist unless
        `create` (`IndexMissingError`); a PostgreSQL database is made ready whatever
        `create` says (its server holds it). `reconnect_for_s`: how long a PostgreSQL
        store tries a lost connection again (None: the store's default; 0: it fails at
        once, for a server that answers 503 rather than hold a request). With no
        `location` and no index found, `IndexNotFoundError` names where it looked."""
        resolved = cls.resolve(location)
        if isinstance(resolved, Path) and not create and not resolved.is_file():
            if location is None or resolved == NEW_INDEX:
                find_index()  # raises IndexNotFoundError, naming where it looked
            raise IndexMissingError(resolved)
        return cls(_connect(resolved, reconnect_for_s), resolved)

    @staticmethod
    def shown(location: str | os.PathLike[str]) -> str:
        """`location` as messages show it: a PostgreSQL URL without its password, else
        the path as given."""
        if is_url(location):
            from attnswitch.indexing.postgres_schema import describe

            return describe(str(location))
        return os.fspath(location)

    @staticmethod
    def open_store(location: str | os.PathLike[str] | None = None) -> Store:
        """The bare store at `location` (`resolve`), a SQLite one created when it is not
        there: what the writers (`run`, jobs, `watch`) open until the `Index` has a
        writer."""
        # the stores' own types differ from `Store`'s in details mypy holds to (`url`'s
        # type, `__enter__`'s); tests/indexing/test_store_contract.py checks them
        # None keeps the rule for making an index: `./.attnswitch/` (`location.NEW_INDEX`)
        where = Path(".attnswitch") if location is None else location
        return cast("Store", _connect(Index.resolve(where)))

    def close(self) -> None:
        """Close the store's connection."""
        self._store.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- what it is ------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The SQLite file, or None for a PostgreSQL store."""
        return self.location if isinstance(self.location, Path) else None

    @property
    def where(self) -> str:
        """How the store names itself in messages: the SQLite file's absolute path, or the
        PostgreSQL URL without its password."""
        return str(self._store.location)

    @property
    def migrated(self) -> str | None:
        """The line saying the store was upgraded to this version's schema when opened
        (None: it was not)."""
        return self._store.migrated

    @property
    def config(self) -> IndexConfig | None:
        """The index's recorded config (model, precision, chunking), or None before the
        first run: read once, kept until `refresh()` finds the index changed."""
        if not self._config_read:
            from attnswitch.indexing.config import stored_config

            self._config, self._config_read = stored_config(self._store), True
        return self._config

    def count(self) -> int:
        """How many chunks are stored: counted once, kept until `refresh()` finds the
        index changed."""
        if self._count is None:
            self._count = self._store.count()
        return self._count

    def check_searchable(self) -> IndexConfig:
        """The index's config; `IndexEmptyError` unless it has one and chunks (whether it
        has any: one index seek, not a count)."""
        config = self.config
        if config is None:
            raise IndexEmptyError(self.where)
        if self._has_chunks is None:
            self._has_chunks = self._store.has_chunks()
        if not self._has_chunks:
            raise IndexEmptyError(self.where)
        return config

    def refresh(self) -> bool:
        """Forget the config and count when another connection committed to the index
        since the last look (SQLite's `PRAGMA data_version` on this Index's own
        connection, which only reads); a PostgreSQL store, written by other processes and
        nodes at any time, is always read again. Whether anything was forgotten."""
        version = self._store.data_version()
        if version is not None:
            if version == self._version:
                return False
            self._version = version
        self._config_read, self._config, self._count = False, None, None
        self._has_chunks = None
        return True

    def deadline(self, at: float | None) -> AbstractContextManager[None]:
        """The store's work inside the block stops by `at` (`Store.deadline`)."""
        return self._store.deadline(at)

    # -- read-side views -------------------------------------------------------------

    def status(self) -> StoreStatus:
        """Documents, chunks, tokens, roots, skipped files and the last run (`Store.status`)."""
        return self._store.status()

    def coverage(self) -> Coverage:
        """How many chunks have quick and full vectors (`Store.coverage`; docs/architecture.md,
        "Two passes")."""
        return self._store.coverage()

    def totals_of(self, documents: Sequence[int]) -> DocumentTotals:
        """Documents, tokens, bytes, folders and coverage of the indexed documents
        `documents` (ids): a reader's view of the index (`Store.totals_of`)."""
        return self._store.totals_of(documents)

    def runs(self, limit: int | None = None) -> list[RunRecord]:
        """The runs recorded, newest first (`Store.runs`)."""
        return self._store.runs(limit=limit)

    def roots(self) -> list[str]:
        """The folders indexed in this store (`Store.roots`)."""
        return self._store.roots()

    def languages(self) -> list[str]:
        """The languages of the stored chunks (`Store.languages`)."""
        return self._store.languages()

    def indexed_bytes(self) -> int:
        """The bytes of the indexed documents' files, as recorded when they were read."""
        return self._store.indexed_bytes()

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        """The chunks of `ids` that are stored, by id (`Store.chunks`)."""
        return self._store.chunks(ids)

    def document_chunks(self, root: str, source: str) -> list[ChunkRow]:
        """The chunks of one document, in order (`Store.document_chunks`)."""
        return self._store.document_chunks(root, source)

    def lookup(self, root: str, source: str) -> StoredDocument | None:
        """The record of one document, or None (`Store.lookup`)."""
        return self._store.lookup(root, source)

    def allowed_documents(self, where: SearchFilter) -> list[int]:
        """The ids of the indexed documents `where` keeps (`Store.allowed_documents`)."""
        return self._store.allowed_documents(where)

    def may_read(self, reader: Reader | None, document_id: int) -> bool:
        """Whether `reader` (None: an admin) may read the indexed document `document_id`
        (its recorded permissions or a grant, indexing/access.py; `Store.may_read`)."""
        return self._store.may_read(reader, document_id)

    def readable_documents(self, reader: Reader | None) -> list[int] | None:
        """The ids of the indexed documents `reader` may read, None for an admin (every
        one): what counts and lists shown to a reader are limited to."""
        where = SearchFilter.for_reader(None, reader)
        return None if where is None else self._store.allowed_documents(where)

    # -- writing ---------------------------------------------------------------------

    def writer(self, *, wait_s: float | None = None) -> IndexWriter:
        """An `IndexWriter` over this index: planning, duplicates, the run lock and the
        document writes (`indexing/writer.py`); `wait_s`: how long taking the run lock
        waits for another writer (None: the store's default)."""
        from attnswitch.indexing.writer import IndexWriter

        store = cast("Store", self._store)
        return IndexWriter(store) if wait_s is None else IndexWriter(store, wait_s=wait_s)

    # -- searching -------------------------------------------------------------------

    def searcher(self, model: str | None = None, *, fill: int | None = None) -> Searcher:
        """A `Searcher` over this index; `model` may name the index's model folder (the
        query is encoded by the index's own model in any case); `fill`: the chunks without
        a full vector one search may encode (None: `query_fill.QUERY_FILL`)."""
        from attnswitch.indexing.query_fill import QUERY_FILL
        from attnswitch.indexing.searcher import Searcher

        return Searcher(
            self._store,
            self.check_searchable,
            model=model,
            fill=QUERY_FILL if fill is None else fill,
        )


def _connect(resolved: Location, reconnect_for_s: float | None = None) -> AnyStore:
    """The store at a resolved location: a SQLite file (created when it is not there), or
    a PostgreSQL server (`reconnect_for_s`: see `Index.open`)."""
    if isinstance(resolved, Path):
        from attnswitch.indexing.store_sqlite import SQLiteStore

        return SQLiteStore(resolved)
    from attnswitch.indexing.store_postgres import PostgresStore

    store = PostgresStore(resolved)
    if reconnect_for_s is not None:
        store.reconnect_for_s = reconnect_for_s
    return store


# ---- finding the index a command means ------------------------------------------------
# How an index is found with no `--db`, the way git finds its repository:
# With no `--db` (`db=None`), an index is looked for in this order (`find_index`):
#
# 1. the nearest `.attnswitch/index.sqlite3` in the current folder or one of its parents,
#    up to the filesystem's root (`nearest_index`);
# 2. the per-user default (`user_default`), when one is configured: the `ATTNSWITCH_DB`
#    environment variable, else `db = "..."` in the config file
#    `$XDG_CONFIG_HOME/attnswitch/config.toml` (`~/.config/attnswitch/config.toml` when
#    XDG_CONFIG_HOME is unset; `config_file`). Either names what `--db` names: a data folder,
#    an index file or a `postgresql://` URL; `~` is expanded, and a relative path in the
#    config file is taken from the config file's folder (in the variable, from the current
#    folder, as `--db` is). A SQLite default counts only when its index file exists; a URL
#    always counts (its server is asked when it is opened).
#
# Nothing found is `IndexNotFoundError` (an `IndexMissingError`), whose message names every
# place looked and suggests `--db`. `Index.resolve(None)` is `default_location()` (the found
# index, else `NEW_INDEX`, where a new one is made), and `Index.open(None)` raises
# `IndexNotFoundError` when nothing is found; the CLI's reading commands call `locate`.
#
# A run (`attnswitch run FOLDER`, `watch FOLDER`) with no `--db` writes where `run_location`
# says: the index found above that already holds FOLDER (FOLDER is one of its roots or lies
# inside one), else the one in the current folder, else a new `./.attnswitch/` (`NEW_INDEX`,
# the rule before discovery): a run never adds a new root to an index it merely found in a
# parent folder or in the per-user default.
#
# `open_store` is the bare store at a location (`Index.open_store`), for callers that take a
# bare store.

ENV_VAR = "ATTNSWITCH_DB"
"""The environment variable naming the per-user default index."""

NEW_INDEX = Path(DEFAULT_DATA_DIR) / DB_NAME
"""Where an index is made when none is named or found: `./.attnswitch/index.sqlite3`."""


class IndexNotFoundError(IndexMissingError):
    """No `--db` and no index found; `looked` lists each place looked, in order (as
    messages show them), `path` is `NEW_INDEX`. The message: "db: expected an index, got
    none: looked in ...; run ... or pass --db"."""

    def __init__(self, looked: tuple[str, ...]):
        StoreInputError.__init__(
            self,
            "db",
            "an index",
            f"none: looked in {'; '.join(looked)}; run `attnswitch run FOLDER` to make one "
            f"here, or pass --db DIR (or set {ENV_VAR}) to name one",
        )
        self.path = NEW_INDEX
        self.looked = looked


@dataclass(frozen=True)
class Found:
    """An index found with no `--db`: its resolved `location` (`Index.resolve`) and
    `source`, how it was found ("nearest .attnswitch/", "ATTNSWITCH_DB", "config file
    PATH")."""

    location: Location
    source: str


@dataclass(frozen=True)
class Search:
    """What `search_index` saw: the index `found` (None: none) and each place `looked`."""

    found: Found | None
    looked: tuple[str, ...]


def config_file(environ: Mapping[str, str] | None = None) -> Path:
    """The per-user config file: `$XDG_CONFIG_HOME/attnswitch/config.toml`, or
    `~/.config/attnswitch/config.toml` when XDG_CONFIG_HOME is unset or empty (`~` from
    HOME in `environ`, default `os.environ`)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or ""
    if not base:
        home = env.get("HOME") or os.path.expanduser("~")
        base = os.path.join(home, ".config")
    return Path(base) / "attnswitch" / "config.toml"


def _expand(value: str, environ: Mapping[str, str]) -> str:
    """`value` with a leading `~` made the home folder (HOME in `environ`)."""
    if value == "~" or value.startswith("~/"):
        home = environ.get("HOME") or os.path.expanduser("~")
        return home + value[1:]
    return value


def user_default(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """The per-user default location and where it was read, `(location, source)`: the
    `ATTNSWITCH_DB` variable when set and not empty, else the config file's `db` (None: no
    file, or no `db` in it). A config file that is not TOML, or whose `db` is not a
    non-empty string, is refused naming the file."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_VAR, "").strip()
    if value:
        return (value if is_url(value) else _expand(value, env)), ENV_VAR
    path = config_file(env)
    if not path.is_file():
        return None
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise StoreInputError(str(path), 'a TOML file with db = "..."', repr(exc)) from None
    if "db" not in data:
        return None
    db = data["db"]
    if not isinstance(db, str) or not db.strip():
        raise StoreInputError(f"{path}: db", "a folder, index file or URL", repr(db))
    if is_url(db):
        return db, f"config file {path}"
    expanded = Path(_expand(db.strip(), env))
    return os.path.normpath(expanded if expanded.is_absolute() else path.parent / expanded), (
        f"config file {path}"
    )


def nearest_index(start: str | os.PathLike[str] | None = None) -> tuple[Path | None, list[Path]]:
    """The index file in the nearest `.attnswitch/` of `start` (default the current
    folder) or its parents, and every `.attnswitch/` folder looked at, nearest first. Found
    in `start` itself, the path is as `start` names it (`./.attnswitch/index.sqlite3` for
    the current folder); above, it is absolute."""
    here = Path.cwd() if start is None else Path(start)
    looked: list[Path] = []
    for folder in (here.absolute(), *here.absolute().parents):
        data_dir = folder / DEFAULT_DATA_DIR
        looked.append(data_dir)
        if (data_dir / DB_NAME).is_file():
            if folder == here.absolute():
                return (NEW_INDEX if start is None else Path(start) / NEW_INDEX), looked
            return data_dir / DB_NAME, looked
    return None, looked


def search_index(
    start: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Search:
    """Look for an index as the module doc says, from `start` (default the current folder)
    with the per-user default read from `environ` (default `os.environ`)."""
    found, folders = nearest_index(start)
    looked = [f"{folder}{os.sep}" for folder in folders]
    if found is not None:
        return Search(Found(found, "nearest .attnswitch/"), tuple(looked))
    default = user_default(environ)
    if default is None:
        looked.append(f"no per-user default ({ENV_VAR} unset, no db in {config_file(environ)})")
        return Search(None, tuple(looked))
    value, source = default
    resolved = Index.resolve(value)
    if isinstance(resolved, Path) and not resolved.is_file():
        looked.append(f"{Index.shown(resolved)} ({source}, no index there)")
        return Search(None, tuple(looked))
    return Search(Found(resolved, source), tuple(looked))


def find_index(
    start: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Found:
    """The index found (`search_index`), or `IndexNotFoundError` naming where it looked."""
    seen = search_index(start, environ)
    if seen.found is None:
        raise IndexNotFoundError(seen.looked)
    return seen.found


def default_location() -> Location:
    """What `Index.resolve(None)` names: the index found (`search_index`), else `NEW_INDEX`
    (where a new index is made)."""
    seen = search_index()
    return NEW_INDEX if seen.found is None else seen.found.location


def locate(db: str | os.PathLike[str] | None) -> Location:
    """The index a reading command means: `db` as `--db` reads it (`Index.resolve`), or
    with no `db` the one found (`find_index`; `IndexNotFoundError` when none is)."""
    if db is not None:
        return Index.resolve(db)
    return find_index().location


def _holds(index_roots: list[str], folder: Path) -> bool:
    """Whether `folder` is one of `index_roots` or lies inside one."""
    target = folder.resolve()
    return any(target == Path(root) or target.is_relative_to(root) for root in index_roots)


def _roots(location: Location) -> list[str]:
    """The roots of the index at `location`; none when it cannot be read."""
    try:
        with Index.open(location) as index:
            return index.roots()
    except Exception:  # an index that cannot be read is not reused; the run says why later
        return []


def run_location(
    folder: str | os.PathLike[str],
    db: str | os.PathLike[str] | None,
    environ: Mapping[str, str] | None = None,
) -> Location:
    """Where a run over `folder` writes: `db` as `--db` reads it when given; else the
    index found (`search_index`) when it is the current folder's own or already holds
    `folder` (one of its roots, or inside one); else `NEW_INDEX`, a new `./.attnswitch/`."""
    if db is not None:
        return Index.resolve(db)
    seen = search_index(environ=environ)
    if seen.found is None:
        return NEW_INDEX
    location = seen.found.location
    if location == NEW_INDEX or _holds(_roots(location), Path(folder)):
        return location
    return NEW_INDEX


__all__ = [
    "ENV_VAR",
    "NEW_INDEX",
    "Found",
    "Index",
    "IndexEmptyError",
    "IndexMissingError",
    "IndexNotFoundError",
    "Location",
    "Search",
    "config_file",
    "default_location",
    "find_index",
    "is_url",
    "locate",
    "nearest_index",
    "run_location",
    "search_index",
    "user_default",
]
