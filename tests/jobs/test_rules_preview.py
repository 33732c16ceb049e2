"""`rules_preview` on both stores, before anything is read: a change of the stored rules
lists the files it brings in and leaves out, by top folder; a dry run lists what a run
would add and writes nothing; the rules unchanged cost no comparison."""

from __future__ import annotations

from pathlib import Path

from attnswitch.documents.rules import FileRules, RulesChange, meta_key
from attnswitch.indexing.location import open_store
from attnswitch.indexing.records import root_key
from attnswitch.jobs.options import RunOptions
from attnswitch.jobs.rules_preview import dry_run, preview, top_folders, where_text

FILES = ("Archive/Private/a.txt", "Archive/b.txt", "Wiki/c.txt", "Wiki/d.txt", "e.txt")


def test_a_change_lists_what_it_brings_in_and_a_dry_run_writes_nothing(
    tmp_path: Path, location
) -> None:
    root = tmp_path / "drive"
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("text\n")
    (root / ".gitignore").write_text("Archive/Private/\n")
    key = root_key(root)
    stored = FileRules(exclude=("Wiki/",), gitignore=True)
    with open_store(location) as store:
        assert preview(root, store, RulesChange(exclude=("x/",))).stored is None  # never run
        store.set_meta(meta_key(key), stored.to_json())
        same = preview(root, store, RulesChange(exclude=("Wiki/",)))
        assert (same.changed, same.brought_in, same.left_out) == (False, [], [])

        seen = preview(root, store, RulesChange(clear=True, exclude=("e.txt",)))
        assert seen.changed and seen.rules == FileRules(exclude=("e.txt",))
        assert seen.brought_in == ["Archive/Private/a.txt", "Wiki/c.txt", "Wiki/d.txt"]
        assert seen.left_out == ["e.txt"]
        assert where_text(seen.brought_in) == "Wiki/ 2, Archive/ 1"

        plan = dry_run(root, store, RunOptions.of(rules=RulesChange(gitignore=False)))
        assert plan.new == ["Archive/Private/a.txt", "Archive/b.txt", "e.txt"]
        assert (plan.changed, plan.removed, plan.unchanged) == ([], [], 0)
        assert store.meta(meta_key(key)) == stored.to_json() and store.roots() == []


def test_top_folders_count_most_first() -> None:
    sources = ["a/x", "b/y", "b/z", "top.txt", "c/1", "d/1", "e/1", "f/1"]
    assert top_folders(sources, 3) == [("b/", 2), (".", 1), ("a/", 1)]
    assert where_text(sources, 2) == "b/ 2, . 1 (and 5 more folder(s))"
