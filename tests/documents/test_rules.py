"""File rules on both stores: include and exclude globs and ignore files decide which
files of a root are indexed, system folders are skipped with their reason, the rules are
stored with the index so that a later run without rules applies the same ones, and a file
a new rule excludes leaves the index."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pathspec import GitIgnoreSpec

from attnswitch.documents import globs
from attnswitch.documents.ingest import scan
from attnswitch.documents.rules import (
    FileRules,
    RulesChange,
    describe,
    meta_key,
    rules_for,
    set_forgotten,
    stored_rules,
)
from attnswitch.errors import ConfigError
from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import root_key
from attnswitch.jobs.run import RunOptions, run

OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, read_workers=0)
FILES = {
    "a.txt": "Apples grow in the orchard behind the barn.",
    "b.log": "Started the nightly export job without errors.",
    "sub/c.txt": "Copper pipes were replaced in the basement.",
    "sub/keep.log": "Kept: the audit trail of the vault door.",
    "build/out.txt": "Generated output of the build step.",
    "node_modules/pkg/readme.txt": "A package readme nobody wrote.",
    "$RECYCLE.BIN/old.txt": "A deleted draft of the budget.",
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "drive"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    return root


def indexed(store, root: Path) -> set[str]:
    return {
        s
        for s in store.sources(root)
        if (row := store.lookup(root, s)) is not None and row.status == "indexed"
    }


def test_rules_are_applied_stored_and_followed(root: Path, encoder, location) -> None:
    with open_store(location) as store:
        first = run(
            root, store, _with(FileRules(exclude=("*.log", "build/"))), get_encoder=lambda: encoder
        )
        assert indexed(store, root) == {"a.txt", "sub/c.txt"}
        assert {f["source"]: f["reason"].split(":")[0] for f in first.skipped_files} == {
            "$RECYCLE.BIN": "system folder",
            "node_modules": "system folder",
        }
        assert FileRules.from_json(store.meta(meta_key(root_key(root)))) == FileRules(
            exclude=("*.log", "build/")
        )

        again = run(root, store, OPTIONS, get_encoder=lambda: encoder)  # the stored rules
        assert (again.new, again.deleted, again.unchanged) == (0, 0, 2)
        assert indexed(store, root) == {"a.txt", "sub/c.txt"}

        narrower = run(
            root, store, _with(FileRules(include=("sub/**",))), get_encoder=lambda: encoder
        )
        assert narrower.deleted == 1 and indexed(store, root) == {"sub/c.txt", "sub/keep.log"}


def test_gitignore_files_are_honoured_when_asked(root: Path, encoder, location) -> None:
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "sub" / ".ignore").write_text("!keep.log\n")
    with open_store(location) as store:
        run(root, store, OPTIONS, get_encoder=lambda: encoder)
        assert indexed(store, root) == {
            "a.txt",
            "b.log",
            "sub/c.txt",
            "sub/keep.log",
            "build/out.txt",
        }
        summary = run(root, store, _with(FileRules(gitignore=True)), get_encoder=lambda: encoder)
        assert summary.deleted == 2
        assert indexed(store, root) == {"a.txt", "sub/c.txt", "sub/keep.log"}


def test_system_folders_are_walked_when_asked_and_bad_globs_are_refused(root: Path) -> None:
    sources = {e.source for e in scan(root, rules=FileRules(system_folders=True))}
    assert "node_modules/pkg/readme.txt" in sources and "$RECYCLE.BIN/old.txt" in sources
    for bad in ("", "  ", "# a comment", "/"):
        with pytest.raises(ConfigError, match="exclude: expected a glob pattern"):
            FileRules(exclude=(bad,))
    with pytest.raises(ConfigError, match="include: expected a list of glob patterns"):
        FileRules(include="*.txt")
    for bad, reason in (
        ("[z-a]*", "invalid character class range: z-a"),
        ("docs/[abc", "a [ that no ] closes"),
        ("x\\", "Invalid git pattern"),
        ("?" * 1025, "more than the 1024 characters a glob may have"),
    ):
        with pytest.raises(
            ConfigError,
            match=r"^include: expected a gitignore-style glob, "
            r"got .*\(" + reason.replace("[", r"\["),
        ):
            FileRules(include=("*.txt", bad))


# Pieces of globs (gitignore syntax: escapes, classes, `**`, negation, a comment) and of
# names; each random glob is short, so Python's re answers pathspec's own matching quickly.
ATOMS = (
    "a",
    "b",
    "*",
    "?",
    "/",
    "**/",
    "/**",
    "[ab]",
    "[!a]",
    "[]a]",
    "[a-b]",
    "\\*",
    ".",
    "**",
    "!",
    "#",
    " ",
    "\\ ",
)
NAME_PARTS = ("a", "b", "/", ".", "*", "ab", "a/b", " ", "!", "#", "]")


def test_globs_match_as_pathspec_reads_them() -> None:
    """`globs` (RE2) decides as pathspec's own matching (Python's re) on random ignore
    files of short globs, for files and folders ("name/"): same order, negation and
    folder rules; only a line pathspec would drop (an unclosed "[") is refused."""
    rng = random.Random(50)
    names = {
        "/".join(
            p
            for p in "".join(rng.choice(NAME_PARTS) for _ in range(rng.randint(1, 6))).split("/")
            if p
        )
        for _ in range(400)
    } - {""}
    names |= {n + "/" for n in names}
    compared = 0
    for _ in range(400):
        lines = [
            "".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 5)))
            for _ in range(rng.randint(1, 3))
        ]
        try:
            ours = globs.spec([globs.compile_glob(line) for line in lines])
        except globs.GlobError as exc:
            assert exc.reason == "a [ that no ] closes" or "Invalid git pattern" in exc.reason
            continue
        theirs = GitIgnoreSpec.from_lines(lines, backend="simple")
        for name in sorted(names):
            assert ours.check_file(name).include == theirs.check_file(name).include, (lines, name)
        compared += 1
    assert compared > 300


def _with(rules: FileRules) -> RunOptions:
    return OPTIONS.replace(rules=rules)


def test_a_change_adds_to_the_stored_rules_and_says_what_it_removes() -> None:
    stored = FileRules(include=("*.txt",), exclude=("build/",), gitignore=True, forgotten=("a",))
    assert RulesChange(exclude=("Wiki export/", "build/")).apply(stored) == FileRules(
        include=("*.txt",), exclude=("build/", "Wiki export/"), gitignore=True, forgotten=("a",)
    )
    assert RulesChange(include=("*.md",), gitignore=False).apply(stored) == FileRules(
        include=("*.txt", "*.md"), exclude=("build/",), forgotten=("a",)
    )
    assert RulesChange(include_only=("*.pdf",)).apply(stored).include == ("*.pdf",)
    assert RulesChange(clear=True, exclude=("x/",)).apply(stored) == FileRules(exclude=("x/",))
    assert RulesChange().apply(stored) == stored
    with pytest.raises(ConfigError, match="exclude: expected a list of glob patterns"):
        RulesChange(exclude="*.log")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="include: "):
        RulesChange(include_only=("[z-a]",))
    with pytest.raises(ConfigError, match="forgotten: expected paths below the root"):
        FileRules(forgotten=("/abs",))
    assert describe(FileRules()) == "every file (no include, exclude or ignore rules)"
    assert describe(stored) == (
        "only *.txt; exclude build/; .gitignore/.ignore honoured; forgotten a"
    )


def test_forgotten_paths_are_not_walked(root: Path) -> None:
    rules = FileRules(forgotten=("sub", "a.txt"))
    sources = {e.source for e in scan(root, rules=rules) if e.skip is None}
    assert sources == {"b.log", "build/out.txt"}
    assert rules.forgets("sub/deeper/x") and not rules.forgets("subway.txt")


def test_rules_stored_by_the_previous_version_still_apply(root: Path, location) -> None:
    old = '{"exclude": ["*.log"], "gitignore": true, "include": [], "system_folders": false}'
    key = root_key(root)
    with open_store(location) as store:
        store.set_meta(meta_key(key), old)
        assert rules_for(store, key, None) == FileRules(exclude=("*.log",), gitignore=True)
        assert rules_for(store, key, RulesChange(exclude=("build/",))) == FileRules(
            exclude=("*.log", "build/"), gitignore=True
        )
        assert set_forgotten(store, key, "sub", True)
        assert not set_forgotten(store, key, "sub/c.txt", True)  # below a forgotten one
        assert stored_rules(store, key).forgotten == ("sub",)
        assert set_forgotten(store, key, "sub", False) and not stored_rules(store, key).forgotten
