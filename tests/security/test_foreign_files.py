"""Row 6 of issue 29: `--db` naming a file that is not an attnswitch index. `status`,
`search` and `run` refuse another program's SQLite database, an empty file and a file of
another kind in one line, and leave the file byte for byte as it was; `run` still makes
an index in a new file. The real CLI in-process (typer's runner) on real files."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnswitch.cli import app

pytestmark = pytest.mark.xdist_group("security")


def bookmarks(path: Path) -> Path:
    """A browser-like database: one `bookmarks` table with a row."""
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE bookmarks (id INTEGER PRIMARY KEY, url TEXT, title TEXT)")
        conn.execute("INSERT INTO bookmarks (url, title) VALUES ('https://example.org', 'x')")
    return path


def empty_file(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def notes(path: Path) -> Path:
    path.write_text("my notes, not a database\n")
    return path


FILES = {
    "bookmarks.db": (bookmarks, "not an attnswitch index of a schema"),
    "notes.txt": (empty_file, "not a readable attnswitch index (an empty file)"),
    "notes.md": (notes, "not a readable attnswitch index (not a SQLite database)"),
}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["search", "some text"],
        ["search", "some text", "--mode", "keyword"],
        ["run", "docs"],
    ],
    ids=lambda c: "-".join(c[::2]),
)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_file_that_is_not_an_index_is_refused_and_left_untouched(
    tmp_path, monkeypatch, name, command, as_json
) -> None:
    make, what = FILES[name]
    path = make(tmp_path / name)
    before = digest(path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("some text to index\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [*command, "--db", name] + (["--json"] if as_json else []))
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith(f"attnswitch {command[0]}: {name}: ") and what in lines[0]
    if as_json:
        assert json.loads(result.stdout) == {"error": lines[0].split(": ", 1)[1]}
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["docs", name])


def test_run_makes_an_index_in_a_new_file_and_reopens_it(tmp_path, monkeypatch) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("some text to index\n")
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        result = CliRunner().invoke(app, ["run", "docs", "--db", "new.db", "--json"])
        assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["status", "--db", "new.db", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["documents"] == 1
