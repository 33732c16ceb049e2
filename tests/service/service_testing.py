"""Helpers of the service tests: start a real `python -m attnswitch.service` process on a
free loopback port (`--port 0`, the address read from its stderr) and stop it with SIGTERM;
copy real corpus documents."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
SMALL = ("postgresql/tutorial-start.html", "postgresql/tutorial-advanced.html",
         "postgresql/tutorial-update.html", "postgresql/tutorial-conclusion.html")
PYTHON_DOCS = ("python-tutorial/appetite.rst.txt", "python-tutorial/interpreter.rst.txt")
LARGER = SMALL + ("sqlite/copyright-release.pdf", "python-tutorial/index.rst.txt")
PLAIN_KEY = "test-key-plain-6f1d"
HASHED_KEY = "test-key-hashed-93ab"
LIMITS = {"max_body_bytes": 65536, "max_items": 16, "max_queue": 48}
STARTUP_TIMEOUT_S = 180.0


@dataclass
class Server:
    """A running `python -m attnswitch.service` process."""

    proc: subprocess.Popen
    url: str
    log: Path
    readyz_during_startup: list[int] = field(default_factory=list)
    key: str | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def copy_corpus(dest: Path, sources: tuple[str, ...] = SMALL) -> Path:
    for source in sources:
        (dest / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, dest / source)
    return dest


def start_server(workdir: Path, *args: str, key: str | None = None,
                 wait_ready: bool = True) -> Server:
    """Start a server on a free loopback port (`--port 0`), wait for its address, then
    poll /readyz every 20 ms until 200, recording each status seen."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "attnswitch.service", "--host", "127.0.0.1", "--port", "0",
             "--log-level", "warning", *args],
            stdout=subprocess.DEVNULL, stderr=fh, cwd=workdir, env=env)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    url = None
    while url is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"server did not start:\n{log.read_text(errors='replace')}")
        for line in log.read_text(errors="replace").splitlines():
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].strip()
        time.sleep(0.02)
    server = Server(proc, url, log, key=key)
    if wait_ready:
        with httpx.Client(base_url=url, timeout=10) as client:
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    server.stop()
                    raise RuntimeError(f"server never ready:\n{server.stderr()}")
                try:
                    status = client.get("/readyz").status_code
                except httpx.TransportError:
                    status = 0
                server.readyz_during_startup.append(status)
                if status == 200:
                    break
                time.sleep(0.02)
    return server


def wait_for_jobs(client: httpx.Client, timeout: float = 300.0) -> list[dict]:
    """Wait until no job of the server is queued or running; its jobs, newest first."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = client.get("/v1/jobs").json()["data"]
        if not any(j["status"] in ("queued", "running") for j in jobs):
            return jobs
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still running after {timeout} s: {jobs}")
        time.sleep(0.1)
