"""Run `python -m attnswitch.service` as a child process on a free loopback port, for
integration tests, benchmarks and scripts that drive a real server over HTTP.

`start` asks for port 0, reads the address the server prints on stderr
(`attnswitch serve: listening on http://127.0.0.1:PORT`), then polls `/readyz` until it
answers 200. `ServerProcess.stop` sends SIGTERM (a graceful drain) and kills the process
only if it outlives the timeout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

_LISTENING = re.compile(r"listening on (http://\S+)")


class ServerStartError(RuntimeError):
    """The server exited, or did not listen or become ready in time; the message holds its
    stderr."""


@dataclass
class ServerProcess:
    """A running server: its process, base URL and stderr log file. `readyz_during_startup`
    lists every /readyz status seen while waiting (0: connection refused)."""

    proc: subprocess.Popen
    url: str
    log: Path
    readyz_during_startup: list[int] = field(default_factory=list)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, wait up to `timeout` seconds for the drain, then kill; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def start(
    workdir: Path, *args: str, wait_ready: bool = True, timeout: float = 180.0, poll_s: float = 0.02
) -> ServerProcess:
    """Start a server in `workdir` (created if missing; its stderr goes to
    `workdir/server.log`) with the extra command-line `args`, on 127.0.0.1 and a free port.
    Returns once it listens and, with `wait_ready`, once /readyz is 200.

    Raises `ServerStartError` when the process exits or `timeout` seconds pass first."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "attnswitch.service",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--log-level",
                "warning",
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            cwd=workdir,
            env=dict(os.environ),
        )
    deadline = time.monotonic() + timeout
    server = None
    while server is None:
        _check_alive(proc, log, deadline, timeout, "listening")
        if match := _LISTENING.search(log.read_text(errors="replace")):
            server = ServerProcess(proc, match.group(1), log)
        else:
            time.sleep(poll_s)
    if wait_ready:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            while True:
                _check_alive(proc, log, deadline, timeout, "ready")
                try:
                    status = client.get("/readyz").status_code
                except httpx.TransportError:
                    status = 0
                server.readyz_during_startup.append(status)
                if status == 200:
                    break
                time.sleep(poll_s)
    return server


def _check_alive(
    proc: subprocess.Popen, log: Path, deadline: float, timeout: float, what: str
) -> None:
    if proc.poll() is not None:
        raise ServerStartError(
            f"server exited with code {proc.returncode} before it was "
            f"{what}:\n{log.read_text(errors='replace')}"
        )
    if time.monotonic() > deadline:
        proc.kill()
        proc.wait(10)
        raise ServerStartError(
            f"server was not {what} within {timeout:g} s:\n{log.read_text(errors='replace')}"
        )
