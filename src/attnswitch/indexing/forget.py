"""Forget: remove a file or a folder from an index, with its chunks and vectors.

`forget(path, store)` finds the indexed root(s) that `path` lies in (the path resolved as
`ingest.scan` records roots; the file itself need not exist any more) and removes the
document at `path`, or every document below it when it names a folder or a root
(`IndexWriter.forget`, one transaction per root, all under the store's run lock: a run of
this store, here or in another process, is waited for up to `RUN_LOCK_WAIT_S`, then
`StoreBusyError`; the keyword index and the SQLite store's HNSW graph follow through the
chunk triggers and log, the graph saved when the writer lets go). A path that holds no
indexed document is an error naming it: nothing is removed then.

Unless `once`, the path is also recorded as forgotten in the stored rules of each root that
held it (`rules.FileRules.forgotten`, in the same hold of the run lock), so that no later
run or `watch` of the root brings it back; forgetting a whole root records nothing (its
rules would then list no file). `unforget(path, store)` takes a recorded path back (and
those below it): the next run of its root indexes it again; a path with nothing recorded
is no error (nothing changes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from attnswitch.documents.rules import set_forgotten, stored_rules
from attnswitch.errors import AttnswitchError
from attnswitch.indexing.store import Store
from attnswitch.indexing.writer import IndexWriter


class NotIndexedError(AttnswitchError, LookupError):
    """The path given to `forget` holds no document of the index."""


@dataclass(frozen=True)
class Forgotten:
    """What `forget` removed: per root, the source (file or folder, "" for the whole
    root) and how many documents (indexed or skipped) went; `recorded`: the roots whose
    stored rules now hold the path as forgotten."""

    path: str
    removed: dict[str, int]
    recorded: tuple[str, ...] = ()

    @property
    def documents(self) -> int:
        return sum(self.removed.values())


def _target(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute, its folders resolved (the last name kept: it may be gone)."""
    target = Path(os.path.abspath(path))
    return target.parent.resolve() / target.name if target.name else target.resolve()


def forget(path: str | os.PathLike[str], store: Store, *, once: bool = False) -> Forgotten:
    """Remove the file or folder `path` (absolute, or relative to the working folder) from
    `store` and, unless `once`, record it as forgotten in its roots' rules;
    `NotIndexedError` naming it when no indexed root holds a document there."""
    target = _target(path)
    roots = store.roots()
    holding = {
        root: target.relative_to(root).as_posix()
        for root in roots
        if target == Path(root) or target.is_relative_to(root)
    }
    removed: dict[str, int] = {}
    recorded: list[str] = []
    if holding:
        with IndexWriter(store) as writer:
            for root, source in holding.items():
                n = writer.forget(root, "" if source == "." else source)
                if n:
                    removed[root] = n
                    if not once and source != "." and set_forgotten(store, root, source, True):
                        recorded.append(root)
    if not removed:
        shown = ", ".join(roots) or "none"
        raise NotIndexedError(
            f"{path}: expected a file or folder indexed in "
            f"{store.location}, got no document there (indexed folders: "
            f"{shown})"
        )
    return Forgotten(str(target), removed, tuple(recorded))


@dataclass(frozen=True)
class Unforgotten:
    """What `unforget` took back: the path, per root the forgotten paths it took out of
    the stored rules (empty: none was recorded there), and the forgotten paths of the roots
    above it, as "root/path", left as they were."""

    path: str
    taken_back: dict[str, tuple[str, ...]]
    still_forgotten: tuple[str, ...] = ()


def unforget(path: str | os.PathLike[str], store: Store) -> Unforgotten:
    """Take the file or folder `path` (and any forgotten path below it) out of the
    forgotten paths of the stored rules of the roots above it (looked up by path: a root
    with no document left is found too). Nothing recorded there is no error: `taken_back`
    is then empty and `still_forgotten` says what is recorded."""
    target = _target(path)
    taken: dict[str, tuple[str, ...]] = {}
    seen: list[str] = []
    with IndexWriter(store):
        for root in (target, *target.parents):
            key = str(root)
            rules = stored_rules(store, key)
            if not rules.forgotten:
                continue
            rel = target.relative_to(root).as_posix()
            gone = tuple(
                f for f in rules.forgotten if rel == "." or f == rel or f.startswith(rel + "/")
            )
            seen += [f"{key}/{f}" for f in rules.forgotten if f not in gone]
            for f in gone:
                set_forgotten(store, key, f, False)
            if gone:
                taken[key] = gone
    return Unforgotten(str(target), taken, tuple(seen))
