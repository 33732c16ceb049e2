"""Who asks (`Reader`), and which recorded permission chains it may read (`readable`).

Every document's access is recorded at read time (`documents.permissions.Access`: the
owner, group, mode and POSIX ACL of each folder from `/` down to the file, and of the
file); the stores keep each distinct chain once, in their `access` table (its
`signature` and JSON `chain`), and each document names its chain's signature (its
`access` column; NULL for a document indexed before permissions were recorded).

A search with a reader (`filters.SearchFilter.reader`, `SearchFilter.for_reader`) keeps,
inside the store's query, only the documents that reader may read:

- its file system says so: the kernel's judgement (`Access.may_read`) of the reader's
  `name` and `groups` against the document's chain, each distinct chain judged once per
  query (`readable`) and the documents then kept by signature in SQL;
- or an access-file grant names one of its groups (`Reader.granted`: path values matched
  as `SearchFilter.path` matches them, absolute or relative).

A document without a recorded chain is readable by admins only (no reader), unless a
grant covers it. No reader (None) is an admin: everything, as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from attnswitch.documents.permissions import Access


@dataclass(frozen=True)
class Reader:
    """Who asks: a principal that is not an admin. `name` is a user name (a Unix user
    name when the drive's own permissions should apply), `groups` its group names,
    `granted` the path values (folder prefixes or globs, as `filters.SearchFilter.path`
    reads them, absolute or relative) of every access-file grant naming one of its groups:
    documents matching any of them are readable besides what their files allow."""

    name: str
    groups: frozenset[str] = frozenset()
    granted: tuple[str, ...] = ()


def readable(reader: Reader, chains: Iterable[tuple[str, str]]) -> set[str]:
    """The signatures of those of `chains` ((signature, chain JSON) rows of a store's
    `access` table) that `reader` may read by its file system's permissions; a chain the
    store holds but cannot parse is readable by no reader."""
    groups = frozenset(reader.groups)
    allowed = set()
    for signature, chain in chains:
        access = _parsed(signature, chain)
        if access is not None and access.may_read(reader.name, groups):
            allowed.add(signature)
    return allowed


@lru_cache(maxsize=65536)
def _parsed(signature: str, chain: str) -> Access | None:
    """The chain of a stored row (a signature names one chain for good: the cache of its
    JSON form's parse never goes stale)."""
    try:
        return Access.from_json(chain)
    except ValueError:
        return None


__all__ = ["Reader", "readable"]
