"""Which index a command means when it names none: found the way git finds its repository.

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
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attnswitch.indexing.index import Index, IndexMissingError, Location, is_url
from attnswitch.indexing.sqlite_file import DB_NAME, DEFAULT_DATA_DIR
from attnswitch.indexing.store_errors import StoreInputError

if TYPE_CHECKING:
    from attnswitch.indexing.store import Store

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
