"""`attnswitch watch` as a user runs it: a real process that indexes the folder, prints one
JSON line per batch, follows a file added to it, and ends cleanly (exit 0) on SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from cli_testing import CORPUS, FAST, SMALL

WAIT_S = 300  # a cold process loads the model first


def test_watch_indexes_follows_and_stops_on_sigterm(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    for source in SMALL[:2]:
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, folder / source)
    line = [sys.executable, "-m", "attnswitch.cli", "watch", str(folder), "--db",
            str(tmp_path / "data"), "--json", "--debounce-ms", "200", "--read-workers", "0",
            *FAST[:4]]  # --max-tokens, --overlap
    proc = subprocess.Popen(line, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        first = json.loads(proc.stdout.readline())
        assert (first["new"], first["status"]) == (2, "completed")
        (folder / "added.txt").write_text("A kingfisher dives for minnows.\n")
        batch = json.loads(proc.stdout.readline())
        assert (batch["new"], batch["unchanged"]) == (1, 2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
