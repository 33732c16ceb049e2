"""What the CLI prints to a terminal (issue 41, 3): file names and document text holding
escape sequences (clear screen, window title, colours) or newlines reach `run`, `status`
and `search` escaped (`\\x1b`, `\\n`), never as raw control bytes, and one name is one row.
The real CLI in a subprocess, on real files with such names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("security")
CLI_TIMEOUT_S = 300.0
EMPTY = "\x1b[2J\x1b]0;PWNED\x07empty\nFAKE ROW.txt"
TEXT = "tides\x1b[31m red\u202e.txt"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnswitch.cli", *args],
        cwd=cwd,
        capture_output=True,
        timeout=CLI_TIMEOUT_S,
        env={**os.environ, "COLUMNS": "400"},
    )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    base = tmp_path_factory.mktemp("terminal")
    docs = base / "docs"
    docs.mkdir()
    (docs / EMPTY).write_bytes(b"")  # skipped as empty: its name is shown with the reason
    (docs / TEXT).write_text("A note about the harbour, its boats and tides.\n")
    return base, cli("run", "docs", "--db", "data", cwd=base)


def assert_safe(out: bytes, *shown: str) -> str:
    assert b"\x1b" not in out and b"\x07" not in out and b"\x9b" not in out, out
    text = out.decode()
    assert "\u202e" not in text
    for name in shown:  # each name escaped, on one row
        assert name in text, text
    assert not any(line.lstrip().startswith("FAKE ROW") for line in text.splitlines()), text
    return text


def test_run_prints_hostile_names_escaped_on_one_row(hostile) -> None:
    _, proc = hostile
    assert proc.returncode == 0, proc.stderr.decode()
    assert_safe(proc.stdout, r"\x1b[2J\x1b]0;PWNED\x07empty\nFAKE ROW.txt")
    assert b"\x1b" not in proc.stderr


def test_status_prints_hostile_names_escaped(hostile) -> None:
    base, _ = hostile
    proc = cli("status", "--db", "data", cwd=base)
    assert proc.returncode == 0, proc.stderr.decode()
    assert_safe(proc.stdout, r"\nFAKE ROW.txt")


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_search_prints_hostile_sources_and_queries_escaped(hostile, mode: str) -> None:
    base, _ = hostile
    proc = cli("search", "harbour \x1b[2J", "--mode", mode, "--db", "data", cwd=base)
    assert proc.returncode == 0, proc.stderr.decode()
    assert_safe(proc.stdout, r"tides\x1b[31m red\u202e.txt", r"harbour \x1b[2J")


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("a\x1b[2Jb", r"a\x1b[2Jb"),
        ("one\ntwo", r"one\ntwo"),
        ("tab\there", r"tab\there"),
        ("c1\x9bx", r"c1\x9bx"),
        ("del\x7f", r"del\x7f"),
        ("bidi\u202eabc", r"bidi\u202eabc"),
        ("[bold]markup[/]", r"\[bold]markup\[/]"),
        ("plain é 文", "plain é 文"),
    ],
)
def test_terminal_text_escapes_controls_and_markup(raw: str, shown: str) -> None:
    from attnswitch.cli.output import terminal_text

    assert terminal_text(raw) == shown
