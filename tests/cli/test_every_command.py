"""Every `attnswitch` command, found by walking the typer app (a new command is covered
without editing this file), run on a small real index with and without `--json` where it
has that flag: each exits 0, prints no traceback, and with `--json` prints one JSON
document on stdout. `serve`, which runs until stopped, is started as a real process and
stopped with SIGTERM once it is ready."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer.main
from cli_testing import FAST, Indexed, invoke

from attnswitch.cli import app

# What each command needs to run quickly here; a command not named runs with its defaults.
QUICK_OPTIONS = {
    "conformance": ("--quick", "--backend", "reference"),
    "doctor": ("--no-timing",),
    "run": ("--no-progress", *FAST),
}
# Commands that serve until stopped.
SERVING = {"serve"}
# Commands that follow a folder until stopped (tests/cli/test_watch_command.py runs them),
# or speak a protocol on stdin and stdout until it closes (`mcp`: the MCP SDK's own client
# drives it over stdio and HTTP in tests/integrations/test_mcp.py).
WATCHING = {"watch", "mcp"}
# Commands that change the index: each runs on a copy of it, so the others still find it.
CHANGING = {"forget", "unforget"}
SERVE_TIMEOUT_S = 180


def commands() -> dict:
    return dict(typer.main.get_command(app).commands)


def has_option(command, flag: str) -> bool:
    return any(flag in p.opts for p in command.params if p.param_type_name == "option")


def arguments(name: str, command, indexed: Indexed) -> list[str]:
    """Values for the command's positional arguments, by their name."""
    values = {"path": str(indexed.folder), "query": "how do I update rows in a table"}
    out = []
    for p in command.params:
        if p.param_type_name == "argument":
            if p.name not in values:
                pytest.fail(
                    f"{name}: no test value for its argument {p.name!r}: add one "
                    "to `arguments` in this file"
                )
            out.append(values[p.name])
    return out


def command_line(name: str, indexed: Indexed, scratch: Path | None = None) -> list[str]:
    """The command's line on `indexed`, or on a copy of it in `scratch` for a command
    that changes the index (`CHANGING`)."""
    if name in CHANGING and scratch is not None:
        shutil.copytree(indexed.db, scratch / "data")
        indexed = Indexed(indexed.folder, scratch / "data")
    command = commands()[name]
    line = [name, *arguments(name, command, indexed), *QUICK_OPTIONS.get(name, ())]
    if has_option(command, "--db"):
        line += ["--db", str(indexed.db)]
    return line


def test_the_walk_finds_the_documented_commands() -> None:
    assert {"conformance", "doctor", "engines", "run", "search", "status", "serve"} <= set(
        commands()
    )


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
@pytest.mark.parametrize("name", sorted(set(commands()) - SERVING - WATCHING))
def test_every_command_runs_without_a_traceback(
    name: str, as_json: bool, indexed: Indexed, cache_dir: Path, tmp_path: Path
) -> None:
    command = commands()[name]
    if as_json and not has_option(command, "--json"):
        pytest.skip(f"{name} has no --json")
    line = command_line(name, indexed, tmp_path) + (["--json"] if as_json else [])
    result = invoke(*line)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{' '.join(line)} raised {result.exception!r}\n{result.output}"
    )
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == 0, result.output
    if as_json:
        json.loads(result.stdout)
    else:
        assert result.stdout.strip()


@pytest.mark.parametrize("name", sorted(SERVING))
def test_serving_commands_start_and_stop_cleanly(
    name: str, indexed: Indexed, tmp_path: Path
) -> None:
    line = command_line(name, indexed) + ["--port", "0", "--log-level", "warning"]
    log = tmp_path / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "attnswitch.cli", *line],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            env=dict(os.environ),
        )
    try:
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        url = None
        while url is None or httpx.get(url + "/readyz", timeout=10).status_code != 200:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            if url is None and (m := re.search(r"listening on (http://\S+)", log.read_text())):
                url = m.group(1)
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) in (0, -signal.SIGTERM), log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "Traceback" not in log.read_text(), log.read_text()
