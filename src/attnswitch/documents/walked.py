"""The folders a walk of a root enters (`walked_folders`), for a watcher that must watch
each of them alone: `ingest.scan` itself, its walker recording each folder, so a watcher
covers exactly the folders a run lists files from (docs/architecture.md, "Staying in sync:
watch and forget")."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnswitch.documents.ingest import MAX_DEPTH, scan, shown_name
from attnswitch.documents.rules import FileRules, Walker


@dataclass(frozen=True)
class WalkedFolder:
    """A folder the walk of a root enters (`walked_folders`): its real absolute `path`, its
    path below the root as the walk shows it (`rel`, "/"-separated, "" for the root, names
    that are not UTF-8 escaped), and `walker`, the root's rules with the ignore files in
    force inside it."""

    path: Path
    rel: str
    walker: Walker

    def lists(self, name: str) -> bool:
        """Whether the walk would list a file called `name` (a real name) in this folder
        under the root's rules (include and exclude patterns, ignore files); hidden names
        are the caller's to judge."""
        shown = shown_name(name)
        return self.walker.listed(f"{self.rel}/{shown}" if self.rel else shown)


def walked_folders(
    root: str | os.PathLike,
    *,
    include_hidden: bool = False,
    max_depth: int = MAX_DEPTH,
    root_id: tuple[int, int] | None = None,
    rules: FileRules | None = None,
) -> list[WalkedFolder]:
    """The folders `scan(root, ...)` with the same arguments enters, the root first, in the
    walk's order: what a watcher of the root must watch, each one alone (not recursively).

    It is `scan` itself, its walker recording each folder it is told the walk enters, so
    the folders are exactly those a run lists files from: no link to a folder followed
    (the walk opens each folder below its parent without following links), no folder on
    a pseudo filesystem, none past `max_depth`, no system folder, no hidden one unless
    `include_hidden`, none that `rules` exclude or an ignore file ignores. Raises as
    `scan` does for an unusable root (`NotADirectoryError`)."""
    recorder = _FolderRecorder(rules or FileRules())
    base = Path(os.path.realpath(root))
    scan(base, include_hidden=include_hidden, max_depth=max_depth, root_id=root_id, rules=recorder)  # type: ignore[arg-type]  # a FileRules whose walker() records
    template = Walker(recorder.rules)
    real = {"": [base]}
    out = []
    for rel, ignores in recorder.entered:
        if rel not in real:
            parent, _, name = rel.rpartition("/")
            real[rel] = [p / n for p in real.get(parent, []) for n in _real_names(p, name)]
        walker = copy.copy(template)
        walker.ignores = ignores
        out += [WalkedFolder(path, rel, walker) for path in real[rel]]
    return list({folder.path: folder for folder in out}.values())


class _FolderRecorder(Walker):
    """A `Walker` that records each folder the walk enters with the ignore files in force
    there. It stands for the `FileRules` that `scan` takes (`walker()` gives itself), so
    `walked_folders` walks through `scan` unchanged."""

    def __init__(self, rules: FileRules):
        super().__init__(rules)
        self.entered: list[tuple[str, list[tuple[str, object]]]] = []

    def walker(self) -> Walker:
        return self

    def enter(self, rel: str, read: Callable[[str], str | None]) -> None:
        super().enter(rel, read)
        self.entered.append((rel, list(self.ignores)))


def _real_names(folder: Path, shown: str) -> list[str]:
    """The real names in `folder` that the walk shows as `shown` (a name with an escaped
    byte is found again by listing its folder; usually `shown` itself)."""
    if "\\" not in shown:
        return [shown]
    try:
        return [n for n in os.listdir(folder) if shown_name(n) == shown]
    except OSError:
        return []
