"""Which index a command means when it names none: found the way git finds its repository.
The rule is defined in `indexing/index.py` (beside `Index.resolve`, which applies it) and
re-exported here with `open_store`, the bare store at a location.

With no `--db` (`db=None`), an index is looked for in this order (`find_index`):

1. the nearest `.attnswitch/index.sqlite3` in the current folder or one of its parents,
   up to the filesystem's root (`nearest_index`);
2. the per-user default (`user_default`), when one is configured: the `ATTNSWITCH_DB`
   environment variable, else `db = "..."` in the config file
   `$XDG_CONFIG_HOME/attnswitch/config.toml` (`~/.config/attnswitch/config.toml` when
   XDG_CONFIG_HOME is unset; `config_file`). Either names what `--db` names: a data folder,
   an index file or a `postgresql://` URL; `~` is expanded, and a relative path in the
   config file is taken from the config file's folder (in the variable, from the current
   folder, as `--db` is). A SQLite default counts only when its index file exists; a URL
   always counts (its server is asked when it is opened).

Nothing found is `IndexNotFoundError` (an `IndexMissingError`), whose message names every
place looked and suggests `--db`. `Index.resolve(None)` is `default_location()` (the found
index, else `NEW_INDEX`, where a new one is made), and `Index.open(None)` raises
`IndexNotFoundError` when nothing is found; the CLI's reading commands call `locate`.

A run (`attnswitch run FOLDER`, `watch FOLDER`) with no `--db` writes where `run_location`
says: the index found above that already holds FOLDER (FOLDER is one of its roots or lies
inside one), else the one in the current folder, else a new `./.attnswitch/` (`NEW_INDEX`,
the rule before discovery): a run never adds a new root to an index it merely found in a
parent folder or in the per-user default.

`open_store` is the bare store at a location (`Index.open_store`), for callers that take a
bare store.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from attnswitch.indexing.index import (
    ENV_VAR,
    NEW_INDEX,
    Found,
    Index,
    IndexNotFoundError,
    Search,
    config_file,
    default_location,
    find_index,
    is_url,
    locate,
    nearest_index,
    run_location,
    search_index,
    user_default,
)

if TYPE_CHECKING:
    from attnswitch.indexing.store import Store


def open_store(location: str | os.PathLike[str] | None = None) -> Store:
    """The store at `location`: a `postgresql://` (or `postgres://`) URL opens a
    `PostgresStore`; anything else is a SQLite file or data folder (`resolve_path`),
    created when it is not there (`Index.open_store`)."""
    return Index.open_store(location)


__all__ = [
    "ENV_VAR",
    "NEW_INDEX",
    "Found",
    "IndexNotFoundError",
    "Search",
    "config_file",
    "default_location",
    "find_index",
    "is_url",
    "locate",
    "nearest_index",
    "open_store",
    "run_location",
    "search_index",
    "user_default",
]
