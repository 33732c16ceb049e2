"""Helpers of the service tests: start a real `python -m attnswitch.service` process on a
free loopback port (`attnswitch.service.launch`) and stop it with SIGTERM; copy real corpus
documents."""

from __future__ import annotations

import re
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from attnswitch.service import launch

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
SMALL = (
    "postgresql/tutorial-start.html",
    "postgresql/tutorial-advanced.html",
    "postgresql/tutorial-update.html",
    "postgresql/tutorial-conclusion.html",
)
PYTHON_DOCS = ("python-tutorial/appetite.rst.txt", "python-tutorial/interpreter.rst.txt")
LARGER = SMALL + ("sqlite/copyright-release.pdf", "python-tutorial/index.rst.txt")
PLAIN_KEY = "test-key-plain-6f1d"
HASHED_KEY = "test-key-hashed-93ab"
LIMITS = {"max_body_bytes": 65536, "max_items": 16, "max_queue": 48}
STARTUP_TIMEOUT_S = 180.0


@dataclass
class Server(launch.ServerProcess):
    """A running `python -m attnswitch.service` process and the API key its tests send."""

    key: str | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}


def copy_corpus(dest: Path, sources: tuple[str, ...] = SMALL) -> Path:
    for source in sources:
        (dest / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, dest / source)
    return dest


def copy_corpus_marked(dest: Path, sources: tuple[str, ...], mark: str) -> Path:
    """Copies of text documents (HTML, plain text) whose every "the" reads "the {mark}":
    copies with different marks share no file and almost no chunk, so neither the file
    dedup nor the chunk vector reuse shortcuts a job over them (a short page without "the"
    stays a copy)."""
    marks = 0
    for source in sources:
        text = (CORPUS / source).read_text(encoding="utf-8")
        marked, count = re.subn(r"\bthe\b", f"the {mark}", text)
        marks += count
        (dest / source).parent.mkdir(parents=True, exist_ok=True)
        (dest / source).write_text(marked, encoding="utf-8")
    assert marks, f"{sources}: expected text documents with 'the' in them"
    return dest


def start_server(
    workdir: Path, *args: str, key: str | None = None, wait_ready: bool = True
) -> Server:
    """`launch.start` (free loopback port, /readyz polled every 20 ms, each status seen
    recorded), with the API key the tests send."""
    srv = launch.start(workdir, *args, wait_ready=wait_ready, timeout=STARTUP_TIMEOUT_S)
    return Server(srv.proc, srv.url, srv.log, srv.readyz_during_startup, key=key)


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


def store_content(store, root: Path) -> dict:
    """What a store holds for `root`, comparable across stores and backends: per source its
    row (status, hash, chunks, tokens) and its chunks (ordinal, text, tokens, span), and the
    vectors by (source, ordinal)."""
    import numpy as np

    ids, vectors = store.vectors()
    by_id = dict(zip(ids.tolist(), vectors))
    rows, chunks, vecs = {}, {}, {}
    for source in sorted(store.sources(root)):
        doc = store.lookup(root, source)
        rows[source] = (doc.status, doc.sha256, doc.n_chunks, doc.config)
        parts = store.document_chunks(root, source)
        chunks[source] = [(c.ordinal, c.text, c.n_tokens, c.start, c.end) for c in parts]
        for c in parts:
            vecs[(source, c.ordinal)] = np.asarray(by_id[c.id])
    return {"rows": rows, "chunks": chunks, "vectors": vecs}


def assert_same_content(got: dict, want: dict) -> None:
    """Two `store_content`s hold the same documents, chunks and vectors: to float32
    rounding of other batchings, and then one float16 step (the stores keep float16: a
    value that other batchings moved across a rounding boundary lands on the next one)."""
    import numpy as np

    assert got["rows"] == want["rows"]
    assert got["chunks"] == want["chunks"]
    assert got["vectors"].keys() == want["vectors"].keys()
    for key, vector in want["vectors"].items():
        assert np.allclose(got["vectors"][key], vector, rtol=2.0**-10, atol=1e-5), key


# Enough documents that a job is still running after its first ones are committed.
TUTORIAL_PAGES = tuple(
    sorted(
        p.relative_to(CORPUS).as_posix() for p in (CORPUS / "postgresql").glob("tutorial-*.html")
    )
)


def committed(location: str, folder: Path) -> int:
    """Documents of `folder` the store holds now (read by a connection of this process)."""
    from attnswitch.indexing.location import is_url, open_store
    from attnswitch.indexing.store import resolve_path

    if not is_url(location) and not resolve_path(location).is_file():
        return 0
    with open_store(location) as store:
        return store.root_counts(folder)[0]


def start_job_and_wait(
    client: httpx.Client,
    location: str,
    folder: Path,
    documents: int,
    path: str = "docs",
    timeout: float = 300.0,
) -> str:
    """Start a job indexing `path` (of the server's jobs root: `folder` here); its id once
    the store at `location` holds `documents` of the folder's documents (the job still
    "queued" or "running" meanwhile)."""
    started = client.post("/v1/jobs", json={"path": path})
    assert started.status_code == 202, started.text
    job_id = started.json()["id"]
    deadline = time.monotonic() + timeout
    while committed(location, folder) < documents:
        assert time.monotonic() < deadline, f"{documents} documents not committed in time"
        # queued until its thread starts (on a loaded machine, after this GET)
        assert client.get(f"/v1/jobs/{job_id}").json()["status"] in ("queued", "running")
        time.sleep(0.05)
    return job_id


def connection_attempts(port: int, count: int, timeout: float) -> None:
    """Stand in for a stopped server on 127.0.0.1:`port`: take `count` connections, closing
    each at once (to its client, a server that hung up), then free the port. Returns when
    the last one came: an event, where polling could not see a client trying to connect;
    `TimeoutError` when fewer come within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with socket.create_server(("127.0.0.1", port)) as listener:
        for taken in range(count):
            left = deadline - time.monotonic()
            if left > 0:
                listener.settimeout(left)
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    pass
                else:
                    conn.close()
                    continue
            raise TimeoutError(
                f"127.0.0.1:{port}: expected {count} connection attempts "
                f"within {timeout} s, got {taken}"
            )


def finished_job(client: httpx.Client, job_id: str, timeout: float = 300.0) -> dict:
    """The job once it is neither queued nor running."""
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job.get("status") not in ("queued", "running"):
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job still running after {timeout} s: {job}")
        time.sleep(0.1)
