"""Indexes kept open between calls: what lets `attnswitch.search` answer a script's second
query in the time of a search, not of an open.

Opening an index costs more than searching a small one: the connection, the schema and
file checks, the config, and the dense side's vectors or HNSW graph, which a store loads
on its first search and keeps while nothing is written (docs/architecture.md, "Stores and
search"). `OpenIndexes` keeps the `Index` of each location a thread has searched, up to
`most` of them (the least recently used is closed), and hands it out again after
`Index.refresh()`, which forgets what the Index kept when another connection committed
since. So a kept Index answers as a fresh one would: it sees every committed write.

A kept Index is dropped, and the location opened again, when:
- the SQLite file at the location is another file now (deleted, replaced, moved away:
  its device and inode changed), or is gone (then the open says so);
- the process forked (a connection belongs to the process that opened it);
- a call on it raised (its connection may be broken).

Each thread has its own (a SQLite connection belongs to its thread); a thread's indexes
close when the thread ends and is collected, or on `close()`.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attnswitch.indexing.index import Index, Location

# A SQLite file's identity: (device, inode); a PostgreSQL location has none (None).
Identity = tuple[int, int] | None


def identity(location: Location) -> Identity:
    """The file at a SQLite location as (device, inode); None for a PostgreSQL URL or a
    file that is not there."""
    if not isinstance(location, Path):
        return None
    try:
        stat = location.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class _Kept:
    """One thread's open indexes, least recently used first, and the process they were
    opened in."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.indexes: OrderedDict[Location, tuple[Identity, Index]] = OrderedDict()


class OpenIndexes:
    """Open indexes per thread, by resolved location, at most `most` per thread (see the
    module doc)."""

    def __init__(self, most: int = 4):
        if isinstance(most, bool) or not isinstance(most, int) or most < 1:
            raise ValueError(f"most: expected a positive number of indexes, got {most!r}")
        self.most = most
        self._local = threading.local()

    def _kept(self) -> _Kept:
        kept: _Kept | None = getattr(self._local, "kept", None)
        if kept is None or kept.pid != os.getpid():
            # after a fork, the parent's connections are left to the parent: not closed
            kept = self._local.kept = _Kept()
        return kept

    @contextmanager
    def using(self, location: str | os.PathLike[str] | None) -> Iterator[Index]:
        """The open `Index` at `location` (`Index.resolve`; a SQLite index must exist,
        `index.IndexMissingError`), refreshed. Kept open after the block unless the block
        raised."""
        resolved = Index.resolve(location)
        kept = self._kept()
        now = identity(resolved)
        entry = kept.indexes.pop(resolved, None)
        index: Index | None = None
        if entry is not None:
            opened_as, index = entry
            if opened_as != now or now is None and isinstance(resolved, Path):
                index.close()
                index = None
        try:
            if index is None:
                index = Index.open(resolved)
                now = identity(resolved)
            else:
                index.refresh()
            yield index
        except BaseException:
            if index is not None:
                index.close()
            raise
        kept.indexes[resolved] = (now, index)
        while len(kept.indexes) > self.most:
            _, (_, oldest) = kept.indexes.popitem(last=False)
            oldest.close()

    def close(self) -> None:
        """Close this thread's kept indexes."""
        kept = self._kept()
        while kept.indexes:
            _, (_, index) = kept.indexes.popitem()
            index.close()

    def __len__(self) -> int:
        """How many indexes this thread keeps open."""
        return len(self._kept().indexes)


__all__ = ["OpenIndexes", "identity"]
