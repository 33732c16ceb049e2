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
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, cast

from attnswitch.indexing.store_errors import StoreInputError

if TYPE_CHECKING:
    from types import TracebackType

    from attnswitch.indexing.config import IndexConfig
    from attnswitch.indexing.filters import SearchFilter
    from attnswitch.indexing.records import (
        ChunkRow,
        Coverage,
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
        `location.default_location`). Anything else is refused naming `db`."""
        from attnswitch.indexing.store import resolve_path

        if location is None:
            from attnswitch.indexing.location import default_location

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
        `location` and no index found, `location.IndexNotFoundError` names where it looked."""
        resolved = cls.resolve(location)
        if isinstance(resolved, Path) and not create and not resolved.is_file():
            from attnswitch.indexing.location import NEW_INDEX, find_index

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

    # -- writing ---------------------------------------------------------------------

    def writer(self, *, wait_s: float | None = None) -> IndexWriter:
        """An `IndexWriter` over this index: planning, duplicates, the run lock and the
        document writes (`indexing/writer.py`); `wait_s`: how long taking the run lock
        waits for another writer (None: the store's default)."""
        from attnswitch.indexing.writer import IndexWriter

        store = cast("Store", self._store)
        return IndexWriter(store) if wait_s is None else IndexWriter(store, wait_s=wait_s)

    # -- searching -------------------------------------------------------------------

    def searcher(self, model: str | None = None) -> Searcher:
        """A `Searcher` over this index; `model` may name the index's model folder (the
        query is encoded by the index's own model in any case)."""
        from attnswitch.indexing.searcher import Searcher

        return Searcher(self._store, self.check_searchable, model=model)


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


__all__ = ["Index", "IndexEmptyError", "IndexMissingError", "Location", "is_url"]
