"""`attnswitch --help` (cli/__init__.py `ABOUT`, `PANELS`): it says first what attnswitch
is for, documents, and lists the document job's commands before the engines' and the
attention kernels', in two groups, at 80 columns as at 200."""

from __future__ import annotations

import pytest
import typer
from cli_testing import invoke

from attnswitch.cli import PANELS, app

DOCUMENT_JOB = ("run", "search", "status", "watch", "forget", "unforget", "serve", "mcp")
KERNELS = ("engines", "doctor", "conformance")


@pytest.mark.parametrize("columns", ["80", "200"])
def test_help_leads_with_the_document_job(columns: str) -> None:
    result = invoke("--help", COLUMNS=columns)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= int(columns) for line in lines)
    text = " ".join(result.stdout.split())
    about = text.split("Usage:", 1)[1]
    assert (
        about.split("]...", 1)[1]
        .lstrip()
        .startswith("attnswitch: a search engine for your documents")
    ), text
    assert about.index("search engine for your documents") < about.index("attention contract")
    titles = [line.strip("╭─╮ ").strip() for line in lines if line.startswith("╭")]
    assert titles == ["Options", *PANELS], titles
    listed = [
        line.strip("│ ").split()[0]
        for line in lines
        if line.startswith("│ ") and line.strip("│ ") and not line.startswith("│   ")
    ]
    commands = [name for name in listed if name in DOCUMENT_JOB + KERNELS]
    assert commands == [*DOCUMENT_JOB, *KERNELS], listed


def test_every_command_is_in_a_group() -> None:
    """A command added later is put in a group, not left after them."""
    names = set(typer.main.get_command(app).commands)
    grouped = [name for group in PANELS.values() for name in group]
    assert sorted(grouped) == sorted(names)
    assert tuple(PANELS.values()) == (DOCUMENT_JOB, KERNELS)
