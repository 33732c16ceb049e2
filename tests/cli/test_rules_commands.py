"""File rules on the command line, on both stores: rules given to `run` add up to those kept
with the index (the newcomer's sequence `run --gitignore`, then `run --exclude 'Wiki
export/'`, never indexes the ignored folder), `run` and `status` show the rules in effect,
a change of rules that brings files in says how many and where, `run --dry-run` lists them
and writes nothing, and `forget` keeps a folder out of later runs until `unforget`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testing import FAST, invoke

from attnswitch.indexing.index import Index
from attnswitch.indexing.location import open_store

SECRET = "ORCAVELVET"
FILES = {
    ".gitignore": "Archive/Private/\n",
    "Archive/Private/salaries.txt": f"secret salary table {SECRET}-7",
    "Archive/minutes.txt": "Minutes of the board meeting about the heron survey.",
    "Wiki export/home.txt": "The wiki home page lists every KESTRELWIKI article.",
    "Wiki export/faq.txt": "Questions asked about KESTRELWIKI and their answers.",
    "notes.txt": "Notes on the quarterly budget for the lighthouse.",
}


@pytest.fixture
def drive(tmp_path: Path) -> Path:
    root = tmp_path / "drive"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    return root


@pytest.fixture
def db(location) -> str:
    """`--db` for the store `location` names: the PostgreSQL URL, or the SQLite file's
    data folder."""
    return str(location) if isinstance(location, str) else str(Path(location).parent)


def run(drive: Path, db: str, *options: str, as_json: bool = True):
    line = ["run", str(drive), "--db", db, "--no-progress", *FAST, *options]
    result = invoke(*line, *(["--json"] if as_json else []))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if as_json else result


def indexed(db: str, word: str) -> set[str]:
    """The sources whose chunks a keyword search for `word` finds (no model loaded)."""
    with open_store(Index.resolve(db)) as store:
        hits = store.keyword(word, 100)
        return {c.source for c in store.chunks([cid for cid, _ in hits]).values()}


def status(db: str) -> dict:
    result = invoke("status", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_gitignore_then_exclude_never_indexes_the_ignored_folder(drive: Path, db: str) -> None:
    first = run(drive, db, "--gitignore")
    assert first["rules"]["rules"]["gitignore"] is True
    assert indexed(db, SECRET) == set() and len(indexed(db, "KESTRELWIKI")) == 2

    second = run(drive, db, "--exclude", "Wiki export/")
    assert second["rules"]["rules"]["gitignore"] is True  # the exclude added to it
    assert second["rules"]["rules"]["exclude"] == ["Wiki export/"]
    assert (second["new"], second["deleted"]) == (0, 2)
    assert indexed(db, SECRET) == set() and indexed(db, "KESTRELWIKI") == set()

    third = run(drive, db)  # no rule given: the kept ones, as they were
    assert (third["new"], third["deleted"]) == (0, 0)
    assert indexed(db, SECRET) == set()

    (root,) = status(db)["rules"]
    assert status(db)["rules"][root] == {
        "include": [],
        "exclude": ["Wiki export/"],
        "gitignore": True,
        "system_folders": False,
        "forgotten": [],
    }
    shown = invoke("status", "--db", db)
    assert "exclude Wiki export/; .gitignore/.ignore honoured" in shown.stdout, shown.stdout
    text = run(drive, db, as_json=False)
    assert "rules: exclude Wiki export/; .gitignore/.ignore honoured" in text.stderr


def test_a_change_that_brings_files_in_is_listed_first(drive: Path, db: str) -> None:
    run(drive, db, "--gitignore", "--exclude", "Wiki export/")
    before = status(db)

    dry = invoke("run", str(drive), "--db", db, "--no-gitignore", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["brought_in"] == 1 and plan["brought_in_folders"] == {"Archive/": 1}
    assert (plan["new"], plan["changed"], plan["removed"]) == (
        ["Archive/Private/salaries.txt"],
        [],
        [],
    )
    assert plan["rules"]["gitignore"] is False and plan["unchanged"] == 2
    text = invoke("run", str(drive), "--db", db, "--clear-rules", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "brought in by the new rules: 3 file(s): Wiki export/ 2, Archive/ 1" in text.stdout
    assert "  Archive/Private/salaries.txt" in text.stdout
    # nothing written: the same rules, documents and runs
    after = status(db)
    assert (after["rules"], after["documents"], after["last_run"]) == (
        before["rules"],
        before["documents"],
        before["last_run"],
    )
    assert indexed(db, SECRET) == set()

    result = run(drive, db, "--include-only", "Archive/**", "--no-gitignore", as_json=False)
    assert "rules: only Archive/**; exclude Wiki export/ (changed by this run)" in result.stderr
    assert "bring 1 file(s) into the index: Archive/ 1" in result.stderr
    assert indexed(db, SECRET) == {"Archive/Private/salaries.txt"}
    assert indexed(db, "lighthouse") == set()


def test_forget_lasts_until_unforget(drive: Path, db: str) -> None:
    run(drive, db)
    assert len(indexed(db, "KESTRELWIKI")) == 2
    done = invoke("forget", str(drive / "Wiki export"), "--db", db)
    assert done.exit_code == 0, done.output
    assert "forgot 2 document(s)" in done.stdout and "unforget" in done.stdout
    (root,) = status(db)["rules"]
    assert status(db)["rules"][root]["forgotten"] == ["Wiki export"]
    assert "forgotten Wiki export" in invoke("status", "--db", db).stdout

    again = run(drive, db, "--exclude", "*.tmp")
    assert again["new"] == 0 and indexed(db, "KESTRELWIKI") == set()

    back = invoke("unforget", str(drive / "Wiki export"), "--db", db, "--json")
    assert back.exit_code == 0, back.output
    assert json.loads(back.stdout)["taken_back"] == [{"root": root, "paths": ["Wiki export"]}]
    assert run(drive, db)["new"] == 2 and len(indexed(db, "KESTRELWIKI")) == 2
    nothing = invoke("unforget", str(drive / "Wiki export"), "--db", db)
    assert nothing.exit_code == 0 and "nothing forgotten" in nothing.stdout

    once = invoke("forget", str(drive / "Wiki export"), "--once", "--db", db)
    assert once.exit_code == 0 and "not recorded" in once.stdout
    assert run(drive, db)["new"] == 2  # --once: back with the next run
