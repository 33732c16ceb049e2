"""Forget: remove a file or a folder from an index, with its chunks and vectors.

`forget(path, store)` finds the indexed root(s) that `path` lies in (the path resolved as
`ingest.scan` records roots; the file itself need not exist any more) and removes the
document at `path`, or every document below it when it names a folder or a root
(`IndexWriter.forget`, one transaction per root, all under the store's run lock: a run of
this store, here or in another process, is waited for up to `RUN_LOCK_WAIT_S`, then
`StoreBusyError`; the keyword index and the SQLite store's HNSW graph follow through the
chunk triggers and log, the graph saved when the writer lets go). A path that holds no
indexed document is an error naming it: nothing is removed then.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from attnswitch.errors import AttnswitchError
from attnswitch.indexing.store import Store
from attnswitch.indexing.writer import IndexWriter


class NotIndexedError(AttnswitchError, LookupError):
    """The path given to `forget` holds no document of the index."""


@dataclass(frozen=True)
class Forgotten:
    """What `forget` removed: per root, the source (file or folder, "" for the whole
    root) and how many documents (indexed or skipped) went."""

    path: str
    removed: dict[str, int]

    @property
    def documents(self) -> int:
        return sum(self.removed.values())


def forget(path: str | os.PathLike[str], store: Store) -> Forgotten:
    """Remove the file or folder `path` (absolute, or relative to the working folder) from
    `store`; `NotIndexedError` naming it when no indexed root holds a document there."""
    target = Path(os.path.abspath(path))
    target = target.parent.resolve() / target.name if target.name else target.resolve()
    roots = store.roots()
    holding = {
        root: target.relative_to(root).as_posix()
        for root in roots
        if target == Path(root) or target.is_relative_to(root)
    }
    removed: dict[str, int] = {}
    if holding:
        with IndexWriter(store) as writer:
            for root, source in holding.items():
                n = writer.forget(root, "" if source == "." else source)
                if n:
                    removed[root] = n
    if not removed:
        shown = ", ".join(roots) or "none"
        raise NotIndexedError(
            f"{path}: expected a file or folder indexed in "
            f"{store.location}, got no document there (indexed folders: "
            f"{shown})"
        )
    return Forgotten(str(target), removed)
