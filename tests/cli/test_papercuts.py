"""Small things a new user meets first: `--version`, errors that name the flag the user
typed and say what is wrong with a path, and help texts shown as written (brackets such
as `attnswitch[ray]` are not taken for rich markup)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from cli_testing import Indexed, invoke

from attnswitch import __version__
from attnswitch.cli import app


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"attnswitch {__version__}\n"


@pytest.mark.parametrize("module", ["attnswitch", "attnswitch.cli"])
def test_python_dash_m_runs_the_command(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"attnswitch {__version__}\n"


@pytest.mark.parametrize("ef", ["0", "5000"])
def test_a_bad_ef_names_the_flag(indexed: Indexed, ef: str) -> None:
    plain = invoke("search", "rows", "--ef", ef, "--db", str(indexed.db))
    assert plain.exit_code == 1
    assert f"--ef: expected an integer from 1 to 1000, got {ef}" in plain.output
    assert "ef_search" not in plain.output
    as_json = invoke("search", "rows", "--ef", ef, "--db", str(indexed.db), "--json")
    assert json.loads(as_json.stdout)["error"].startswith("--ef: expected")


@pytest.mark.parametrize("fill", ["-1", "1001"])
def test_a_bad_fill_names_the_flag(indexed: Indexed, fill: str) -> None:
    plain = invoke("search", "rows", "--fill", fill, "--db", str(indexed.db))
    assert plain.exit_code == 1
    assert f"--fill: expected an integer from 0 to 1000, got {fill}" in plain.output
    as_json = invoke("search", "rows", "--fill", fill, "--db", str(indexed.db), "--json")
    assert json.loads(as_json.stdout)["error"].startswith("--fill: expected")


def test_a_mistyped_path_says_it_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    result = invoke("run", str(missing), "--db", str(tmp_path / "db"))
    assert result.exit_code == 1
    assert (
        f"PATH: expected a folder to index, got '{missing}', which does not exist" in result.output
    )
    (a_file := tmp_path / "notes.txt").write_text("x")
    result = invoke("run", str(a_file), "--db", str(tmp_path / "db"))
    assert result.exit_code == 1 and f"got '{a_file}', a file" in result.output
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize("command", ["run", "watch"])
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("eng+qaa", ": qaa not installed (Debian: tesseract-ocr-qaa)"),
        ("eng deu", ""),
    ],
)
def test_a_bad_ocr_languages_names_the_flag_and_the_installed_packs(
    tmp_path: Path, command: str, value: str, why: str
) -> None:
    """One line, before any store is made: the flag, the packs this machine's Tesseract
    has (`tesseract --list-langs`, but osd) and what is wrong with the value."""
    if shutil.which("tesseract") is None:
        pytest.skip("Tesseract is not installed (Debian: tesseract-ocr; make system-packages)")
    listed = subprocess.run(
        ["tesseract", "--list-langs"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()[1:]
    installed = ", ".join(sorted(p.strip() for p in listed if p.strip() not in ("", "osd")))
    result = invoke(command, str(tmp_path), "--ocr-languages", value, "--db", str(tmp_path / "db"))
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"attnswitch {command}: --ocr-languages: expected language packs Tesseract has here "
        f"({installed}) joined by '+' or ',', got {value!r}{why}"
    ]
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize("name", sorted(typer.main.get_command(app).commands))
def test_help_shows_bracketed_text_literally(name: str) -> None:
    """Every `[...]` in an option's help (escaped `\\[` in the source, for typer's rich
    markup) is shown as written by `--help`."""
    command = typer.main.get_command(app).commands[name]
    wanted = [
        m
        for p in command.params
        for m in re.findall(r"\[[^\]]*\]", (p.help or "").replace("\\[", "["))
    ]
    result = invoke(name, "--help", COLUMNS="1000")
    assert result.exit_code == 0, result.output
    for text in wanted:
        assert text in result.stdout, (text, result.stdout)
    if name == "run":
        assert "pip install 'attnswitch[ray]'" in result.stdout


@pytest.mark.parametrize("name", ["search", "status", "doctor"])
def test_help_reads_cleanly_at_80_columns(name: str) -> None:
    """`COLUMNS=80 attnswitch search --help`: nothing wider than the terminal, nothing cut
    with an ellipsis, and the description's paragraphs wrapped by the terminal, not broken
    where the source's lines end (a line of prose followed by more prose fills the width)."""
    result = invoke(name, "--help", COLUMNS="80")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [x for x in lines if len(x) > 80]
    assert "…" not in result.stdout
    usage = next(i for i, line in enumerate(lines) if "Usage:" in line)
    panels = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    prose = [line.strip() for line in lines[usage + 1 : panels]]
    for line, following in zip(prose, prose[1:]):
        if line and following:  # inside a paragraph
            assert len(line) >= 60, (line, result.stdout)
