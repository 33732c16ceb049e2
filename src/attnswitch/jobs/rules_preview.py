"""What a run's rules would do to the index of a root, before anything is read or written:
the rules in effect, the files a change of rules brings into the index (or leaves out),
and, for `run --dry-run`, the whole plan.

`preview(root, store, change)` lists the root twice, under the rules stored for it and
under those the run applies (`rules.rules_for`: the change applied to the stored ones), and
compares the two listings by path: `brought_in` are the files only the run's rules list
(the run reads and encodes them), `left_out` those only the stored rules list (the run
deletes them from the index). A root with no stored rules (never run) has nothing to
compare: both lists are empty. A listing costs one walk of the root, no file is opened.

`dry_run(root, store, options)` is what `run` would do under the run's rules: the files it
would add (not in the index), change (in the index, but changed, skipped before, or
indexed under another config) and remove (in the index, no longer listed), and how many it
leaves alone. Nothing is written; with no store (`None`: no index there yet) every file
listed is new.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnswitch.documents.ingest import SourceFile, check_root_name, scan
from attnswitch.documents.rules import FileRules, RulesChange, meta_key, rules_for
from attnswitch.indexing.config import stored_config
from attnswitch.indexing.records import root_key
from attnswitch.indexing.store import Store, is_own
from attnswitch.indexing.writer import IndexWriter
from attnswitch.jobs.options import RunOptions


def top_folders(sources: list[str], n: int = 5) -> list[tuple[str, int]]:
    """The `n` top folders (first name below the root, "/"-ended; "." for files at the
    root) holding most of `sources`, with how many each, most first, then by name."""
    counts = Counter(s.split("/", 1)[0] + "/" if "/" in s else "." for s in sources)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def where_text(sources: list[str], n: int = 5) -> str:
    """`top_folders` in one line: "Archive/ 12, Wiki export/ 3, . 1 (and 2 more folders)"."""
    tops = top_folders(sources, n)
    text = ", ".join(f"{name} {count:,}" for name, count in tops)
    more = len({s.split("/", 1)[0] if "/" in s else "." for s in sources}) - len(tops)
    return text + (f" (and {more} more folder(s))" if more > 0 else "")


@dataclass(frozen=True)
class RulesPreview:
    """The rules a run applies to `root` (`rules`), those stored before it (`stored`;
    None: none stored), and the paths (below the root) the change brings in and leaves
    out."""

    root: str
    rules: FileRules
    stored: FileRules | None
    brought_in: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.stored is not None and self.stored != self.rules

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "rules": self.rules.to_dict(),
            "rules_changed": self.changed,
            "brought_in": len(self.brought_in),
            "brought_in_folders": dict(top_folders(self.brought_in, 20)),
            "left_out": len(self.left_out),
        }


def _listing(
    root: str, store: Store | None, rules: FileRules, options: RunOptions
) -> list[SourceFile]:
    """The files a run of `root` lists under `rules`, less the store's own files and the
    folders holding them (as `read_phase.list_root`)."""
    listed = scan(root, include_hidden=options.read.include_hidden, rules=rules)
    if store is None:
        return listed
    own = store.own_files()
    holders = {parent for path in own for parent in path.parents}
    return [e for e in listed if not is_own(e.path, own) and e.path not in holders]


def preview(
    root: str | os.PathLike[str],
    store: Store | None,
    change: FileRules | RulesChange | None,
    options: RunOptions = RunOptions(),
) -> RulesPreview:
    """The rules a run of `root` with the change `change` applies, and what that change
    brings in or leaves out (see the module doc). A root whose path is not UTF-8 is a
    `RootNameError` (the store records roots as text), as the run itself says."""
    key = root_key(root)
    check_root_name(key)
    text = None if store is None else store.meta(meta_key(key))
    stored = None if store is None or text is None else rules_for(store, key, None)
    rules = (
        rules_for(store, key, change)
        if store is not None
        else (
            change
            if isinstance(change, FileRules)
            else (change or RulesChange()).apply(FileRules())
        )
    )
    if stored is None or stored == rules:
        return RulesPreview(key, rules, stored)
    before = {e.source for e in _listing(key, store, stored, options)}
    after = {e.source for e in _listing(key, store, rules, options)}
    return RulesPreview(key, rules, stored, sorted(after - before), sorted(before - after))


@dataclass(frozen=True)
class DryRun:
    """What a run would do (see the module doc): paths below the root."""

    preview: RulesPreview
    new: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.preview.to_dict(),
            "dry_run": True,
            "new": self.new,
            "changed": self.changed,
            "removed": self.removed,
            "unchanged": self.unchanged,
        }


def dry_run(root: str | os.PathLike[str], store: Store | None, options: RunOptions) -> DryRun:
    """What a run of `root` with `options` would add, change and remove, writing
    nothing (see the module doc)."""
    seen = preview(root, store, options.read.rules, options)
    listed = _listing(seen.root, store, seen.rules, options)
    if store is None:
        return DryRun(seen, sorted(e.source for e in listed), [], [], 0)
    config = stored_config(store)
    plan = IndexWriter(store).plan(
        Path(seen.root), listed, "" if config is None else config.fingerprint
    )
    new = sorted(e.source for e in plan.to_read if plan.stored.get(e.source) is None)
    changed = sorted(e.source for e in plan.to_read if plan.stored.get(e.source) is not None)
    return DryRun(seen, new, changed, list(plan.deleted), len(plan.fresh))
