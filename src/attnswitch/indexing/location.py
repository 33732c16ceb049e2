"""What a store location names, and opening it: a `postgresql://` URL is a PostgreSQL
server (`store_postgres.PostgresStore`), anything else a SQLite file or data folder
(`store.SQLiteStore`, `store.resolve_path`). Above both store modules, so neither imports
the other."""

from __future__ import annotations

import os

from attnswitch.indexing.store import SQLiteStore, Store


def open_store(location: str | os.PathLike | None = None) -> Store:
    """The store at `location`: a `postgresql://` (or `postgres://`) URL opens a
    `PostgresStore`; anything else is a SQLite file or data folder (`resolve_path`)."""
    if is_url(location):
        from attnswitch.indexing.store_postgres import PostgresStore

        return PostgresStore(str(location))
    return SQLiteStore(location)


def is_url(location: str | os.PathLike | None) -> bool:
    """Whether `location` names a PostgreSQL server rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))
