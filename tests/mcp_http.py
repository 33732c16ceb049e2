"""`attnswitch mcp --http` started by a test: the process and the URL it serves, read from
the line it prints on stderr once it listens (polled, as service/launch.py does)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

LISTENING = re.compile(r"listening on (http://\S+)")


def start_mcp_http(
    command: list[str], log: Path, timeout_s: float, env: dict[str, str]
) -> tuple[subprocess.Popen, str]:
    """Start `command` (an `attnswitch mcp --http --port 0 ...` line) with its stderr in
    `log`; return it and its URL once it listens. Fails the test, with the log, when the
    process exits first or prints no such line within `timeout_s`."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=fh, env=env)
    deadline = time.monotonic() + timeout_s
    while not (found := LISTENING.search(log.read_text())):
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.02)
    return proc, found.group(1)
