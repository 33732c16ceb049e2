"""Who asks a search: a `Reader` (a principal that is not an admin). An admin is no Reader
(None) and sees everything."""

from __future__ import annotations

from dataclasses import dataclass


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
