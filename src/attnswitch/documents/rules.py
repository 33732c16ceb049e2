"""Rules: which files of a root are indexed, kept with the index so that every later run
and `watch` of that root apply the same ones.

`FileRules` holds `include` and `exclude` patterns (gitignore syntax, "gitwildmatch",
matched against the path below the root with "/" separators: `*.pdf`, `docs/**`,
`/build/`), whether the `.gitignore` and `.ignore` files found while walking are honoured
(`gitignore`), and whether system folders are walked (`system_folders`; off by default).
The walk (`ingest.scan`) asks a `Walker` about each folder and file:

- a system folder (`SYSTEM_FOLDERS`: recycle bins, `lost+found`, dependency and cache
  folders such as `node_modules` and `__pycache__`, by name) is not walked and is listed
  once as skipped, `Skip.SYSTEM_FOLDER`, with its reason; hidden names (a leading ".")
  are left out by the walk itself (`ingest`);
- a folder an exclude pattern or an ignore file matches is not walked, and a file they
  match, or that no include pattern matches (when there are any), is not listed: like
  git, an ignored path is simply not part of the root, so a file a rule now excludes is
  deleted from the index by the next run.

Ignore files apply to their own folder and those below it, the deeper file deciding last
(git's order; a negation `!pattern` re-includes). Every glob is compiled by `globs`
(pathspec's gitignore semantics, matched by RE2 in time linear in the name): an include or
exclude pattern it refuses (longer than `globs.MAX_CHARS`, `[z-a]`, an unclosed `[`) is a
`ConfigError` naming `include` or `exclude`; such a line of an ignore file is left out with
a logged warning naming the file and the line, and the file's other lines apply. The rules
of a root are stored in the store's meta (`meta_key`) as JSON.

`forgotten` holds the paths `attnswitch forget` removed (below the root, "/"-separated, not
globs): a file there, or anything below a folder there, is not listed, so no later run or
`watch` brings it back until `attnswitch unforget` takes the path out again.

Stored rules change only by what a run is told (`RulesChange`, applied to the stored rules
by `rules_for`): `include` and `exclude` patterns are added to the stored ones; `gitignore`
True or False sets the ignore files on or off (None: as stored); `include_only` replaces
the include patterns; `clear` drops every stored rule (forgotten paths too) before the
rest applies. A run told nothing applies the stored rules as they are. `describe(rules)`
says the rules in one line, as `run`, `watch` and `status` print them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from attnswitch.documents import globs
from attnswitch.errors import ConfigError

# Folders that hold no one's documents: recycle bins and file-system bookkeeping (Windows,
# Linux, macOS) and the dependency, build-cache and virtual-environment folders of tools.
# Matched by name (fnmatch), at any depth.
SYSTEM_FOLDERS = (
    "$RECYCLE.BIN",
    "RECYCLER",
    "System Volume Information",
    "lost+found",
    ".Trash-*",
    ".Trashes",
    ".Spotlight-V100",
    ".fseventsd",
    "node_modules",
    "__pycache__",
    ".git",
    ".hg",
    ".svn",
    ".venv",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
)
IGNORE_FILES = (".gitignore", ".ignore")
# Why `Walker.folder` passes over a folder.
SYSTEM_FOLDER = "system folder"
EXCLUDED = "excluded"
META_PREFIX = "rules:"
log = logging.getLogger(__name__)


def meta_key(root: str) -> str:
    """The store meta key holding the rules of `root` (its `store.root_key`)."""
    return META_PREFIX + root


@dataclass(frozen=True)
class FileRules:
    """Which files of a root are indexed (see the module doc). The defaults index every
    file but those in system folders."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    gitignore: bool = False
    system_folders: bool = False
    forgotten: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("include", "exclude", "forgotten"):
            patterns = getattr(self, name)
            if isinstance(patterns, str) or not all(isinstance(p, str) for p in patterns):
                what = "paths below the root" if name == "forgotten" else "glob patterns"
                raise ConfigError(f"{name}: expected a list of {what}, got {patterns!r}")
            object.__setattr__(self, name, tuple(patterns))
            if name != "forgotten":
                _spec(patterns, name)
        for path in self.forgotten:
            if not path or path.startswith("/") or path.endswith("/") or ".." in path.split("/"):
                raise ConfigError(
                    f"forgotten: expected paths below the root (no leading or trailing "
                    f"'/', no '..'), got {path!r}"
                )

    def to_dict(self) -> dict[str, Any]:
        """The rules as JSON values (lists for the patterns), as stored and as
        `status --json` shows them."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    def forgets(self, rel: str) -> bool:
        """Whether `rel` (a file or folder below the root) is, or lies below, a forgotten
        path."""
        return any(rel == f or rel.startswith(f + "/") for f in self.forgotten)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FileRules:
        data = json.loads(text)
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})

    def walker(self) -> Walker:
        return Walker(self)


def _spec(patterns: Sequence[str], name: str) -> Any:
    """The spec of the `include` or `exclude` patterns (`name`); a blank line, a comment,
    a lone "/" or a glob `globs` refuses is a `ConfigError` naming the field."""
    compiled = []
    for p in patterns:
        try:
            pattern = None if p.strip().startswith("#") else globs.compile_glob(p)
        except globs.GlobError as exc:
            raise ConfigError(f"{name}: {exc}") from None
        if pattern is None:
            raise ConfigError(f"{name}: expected a glob pattern, got {globs.shown(p)}")
        compiled.append(pattern)
    return globs.spec(compiled)


def _ignore_patterns(where: str, text: str) -> list[Any]:
    """The compiled patterns of the ignore file `where` (its path below the root, for the
    warning), in order; a line `globs` refuses is left out with a warning."""
    patterns = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            patterns.append(globs.compile_glob(line))
        except globs.GlobError as exc:
            log.warning(
                "%s line %d: %s; the line is ignored, the file's other lines apply",
                where,
                number,
                exc,
            )
    return [p for p in patterns if p is not None]


class Walker:
    """The rules applied during one walk: `folder(rel)` says why a folder is not walked
    (None: walk it), `listed(rel)` whether a file is listed; `enter(rel, read)` adds the
    ignore files of a folder about to be walked (`read(name)` gives a file's text in it,
    or None). Paths are relative to the root, "/"-separated."""

    def __init__(self, rules: FileRules):
        self.rules = rules
        self.include = _spec(rules.include, "include") if rules.include else None
        self.exclude = _spec(rules.exclude, "exclude") if rules.exclude else None
        self.ignores: list[tuple[str, Any]] = []  # (folder, its spec), outermost first

    def enter(self, rel: str, read: Callable[[str], str | None]) -> None:
        """Take in the ignore files of the folder `rel` ("" for the root)."""
        if not self.rules.gitignore:
            return
        patterns = [
            p
            for name in IGNORE_FILES
            if (text := read(name)) is not None
            for p in _ignore_patterns(f"{rel}/{name}" if rel else name, text)
        ]
        if patterns:
            self.ignores.append((rel, globs.spec(patterns)))

    def leave(self, rel: str) -> None:
        """Drop the ignore files of the folder `rel` once its walk is done."""
        while self.ignores and self.ignores[-1][0] == rel:
            self.ignores.pop()

    def folder(self, rel: str) -> str | None:
        """Why the folder `rel` is not walked: `SYSTEM_FOLDER`, `EXCLUDED`, or None."""
        name = rel.rsplit("/", 1)[-1]
        if not self.rules.system_folders and any(
            fnmatch.fnmatchcase(name, p) for p in SYSTEM_FOLDERS
        ):
            return SYSTEM_FOLDER
        if self.rules.forgets(rel):
            return EXCLUDED
        if self.exclude is not None and self.exclude.match_file(rel + "/"):
            return EXCLUDED
        return EXCLUDED if self._ignored(rel + "/") else None

    def listed(self, rel: str) -> bool:
        """Whether the file `rel` is part of the root under these rules."""
        if self.rules.forgets(rel):
            return False
        if self.exclude is not None and self.exclude.match_file(rel):
            return False
        if self.include is not None and not self.include.match_file(rel):
            return False
        return not self._ignored(rel)

    def _ignored(self, rel: str) -> bool:
        ignored = False
        for base, spec in self.ignores:
            if base and not rel.startswith(base + "/"):
                continue
            decision = spec.check_file(rel[len(base) + 1 :] if base else rel).include
            if decision is not None:
                ignored = decision
        return ignored


@dataclass(frozen=True)
class RulesChange:
    """What a run is told to change in the stored rules of its root (see the module doc):
    `include` and `exclude` patterns added; `gitignore` set (None: as stored);
    `include_only` replacing the include patterns (None: kept); `clear` dropping every
    stored rule first. The empty change (`RulesChange()`) keeps the stored rules."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    gitignore: bool | None = None
    include_only: tuple[str, ...] | None = None
    clear: bool = False

    def __post_init__(self) -> None:
        for name in ("include", "exclude", "include_only"):
            patterns = getattr(self, name)
            if patterns is None:
                continue
            if isinstance(patterns, str) or not all(isinstance(p, str) for p in patterns):
                raise ConfigError(f"{name}: expected a list of glob patterns, got {patterns!r}")
            object.__setattr__(self, name, tuple(patterns))
            _spec(patterns, "include" if name == "include_only" else name)

    def apply(self, stored: FileRules) -> FileRules:
        """The rules after this change to `stored` (a pattern already there is not added
        twice)."""
        base = FileRules() if self.clear else stored
        include = base.include if self.include_only is None else self.include_only
        return dataclasses.replace(
            base,
            include=_added(include, self.include),
            exclude=_added(base.exclude, self.exclude),
            gitignore=base.gitignore if self.gitignore is None else self.gitignore,
        )


def _added(patterns: tuple[str, ...], more: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*patterns, *more)))


def describe(rules: FileRules) -> str:
    """The rules in one line, as `run`, `watch` and `status` print them: "every file"
    for the defaults, else what includes, excludes, ignore files and forgotten paths say,
    "; "-separated."""
    parts = []
    if rules.include:
        parts.append("only " + ", ".join(rules.include))
    if rules.exclude:
        parts.append("exclude " + ", ".join(rules.exclude))
    if rules.gitignore:
        parts.append(".gitignore/.ignore honoured")
    if rules.forgotten:
        parts.append("forgotten " + ", ".join(rules.forgotten))
    if rules.system_folders:
        parts.append("system folders walked")
    return "; ".join(parts) or "every file (no include, exclude or ignore rules)"


def stored_rules(store: Any, root: str) -> FileRules:
    """The rules stored for `root` (its `store.root_key`), else the defaults
    (`ConfigError` when what is stored cannot be read)."""
    return rules_for(store, root, None)


def set_forgotten(store: Any, root: str, rel: str, forgotten: bool) -> bool:
    """Record (`forgotten`) or take back the forgotten path `rel` in the stored rules of
    `root`; taking back also drops the forgotten paths below `rel`. Whether the stored
    rules changed."""
    rules = stored_rules(store, root)
    if forgotten:
        kept = rules.forgotten if rules.forgets(rel) else (*rules.forgotten, rel)
    else:
        kept = tuple(f for f in rules.forgotten if not (f == rel or f.startswith(rel + "/")))
    if kept == rules.forgotten:
        return False
    store.set_meta(meta_key(root), dataclasses.replace(rules, forgotten=kept).to_json())
    return True


def rules_for(store: Any, root: str, given: FileRules | RulesChange | None) -> FileRules:
    """The rules a run of `root` (its `store.root_key`) applies: the change `given` (a
    `RulesChange`) applied to those stored for it by an earlier run (`meta_key`; the
    defaults when none are), `given` itself when it is a whole `FileRules` (it replaces
    them), the stored rules when None. Rules stored by an earlier version (without
    `forgotten`) read as they were."""
    if isinstance(given, FileRules):
        return given
    stored = store.meta(meta_key(root))
    if stored is None:
        rules = FileRules()
    else:
        try:
            rules = FileRules.from_json(stored)
        except (TypeError, ValueError) as exc:  # ConfigError is a ValueError
            raise ConfigError(
                f"{meta_key(root)}: expected the stored file rules of this root, "
                f"got {stored!r} ({exc}); give --clear-rules (and the rules wanted) "
                "to replace them"
            ) from None
    return rules if given is None else given.apply(rules)
