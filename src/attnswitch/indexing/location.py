"""What a store location names, and opening it: thin names over `index.Index`, the one
place a location is resolved (`Index.resolve`) and opened (`Index.open`, and
`Index.open_store` for writers), kept for the callers that take a bare store."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from attnswitch.indexing.index import Index, is_url

if TYPE_CHECKING:
    from attnswitch.indexing.store import Store


def open_store(location: str | os.PathLike[str] | None = None) -> Store:
    """The store at `location`: a `postgresql://` (or `postgres://`) URL opens a
    `PostgresStore`; anything else is a SQLite file or data folder (`resolve_path`),
    created when it is not there (`Index.open_store`)."""
    return Index.open_store(location)


__all__ = ["is_url", "open_store"]
