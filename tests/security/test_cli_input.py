"""The search command under hostile input (issue 29, row 7 and the SIGINT item of row 10):
a query holding bytes that are not UTF-8 is refused in one line (and `{"error"}` on stdout
with --json) in every mode, and Ctrl-C inside the command ends it with exit 130 and its
one line, never a traceback. The real CLI in a subprocess, on a real index."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("security")
CLI_TIMEOUT_S = 300.0


def cli(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnswitch.cli", *args],
        cwd=cwd,
        capture_output=True,
        timeout=CLI_TIMEOUT_S,
        env=dict(os.environ),
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("cli-input")
    (base / "docs").mkdir()
    (base / "docs" / "a.txt").write_text("A note about the harbour, its boats and tides.\n")
    proc = cli("run", "docs", "--db", "data", cwd=base)
    assert proc.returncode == 0, proc.stderr.decode()
    return base


@pytest.mark.parametrize("mode", ["hybrid", "dense", "keyword"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_query_that_is_not_utf8_is_refused_in_one_line(index, mode, as_json) -> None:
    proc = cli(
        "search",
        b"abc\xff",
        "--mode",
        mode,
        "--db",
        "data",
        *(["--json"] if as_json else []),
        cwd=index,
    )
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0] == (
        "attnswitch search: QUERY: expected UTF-8 text, got a byte that is not UTF-8 at character 3"
    )
    if as_json:
        assert json.loads(proc.stdout) == {"error": lines[0].split(": ", 1)[1]}


def opened(pid: int, path: Path) -> bool:
    """Whether process `pid` holds `path` open."""
    folder = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        for fd in folder.iterdir():
            with contextlib.suppress(OSError):
                if Path(os.readlink(fd)) == path:
                    return True
    return False


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_ctrl_c_inside_search_exits_130_with_its_line(index) -> None:
    """The test holds a write lock on the index, so the search waits inside the command
    (its file open); SIGINT arrives there, and the lock is released after it."""
    db = (index / "data" / "index.sqlite3").resolve()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnswitch.cli", "search", "tides", "--db", "data", "--json"],
        cwd=index,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    try:
        deadline = time.monotonic() + 120
        while not opened(proc.pid, db):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
    err_text = err.decode(errors="replace")
    assert proc.returncode == 130, err_text
    assert "Traceback" not in err_text
    assert err_text.strip().splitlines()[-1] == "attnswitch search: interrupted"
    assert json.loads(out) == {"error": "interrupted"}
