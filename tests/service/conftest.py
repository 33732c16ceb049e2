"""Fixtures of the service tests: a real `attnswitch serve` process on a free loopback port,
shared by the modules of one test process (each xdist worker starts its own: the
`xdist_group` marks do not keep tests in one worker with the installed pytest-xdist, and
nothing here depends on them), an httpx client, and the reference encoder in the test
process (helpers in service_testing.py).

The shared server has API keys (a plain one and one given by its digest) and small limits,
so that every limit is cheap to reach: 64 KiB bodies, 16 texts per request, 48 queued texts.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from service_testing import HASHED_KEY, LIMITS, PLAIN_KEY, Server, copy_corpus, start_server


@pytest.fixture(scope="session")
def service_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("service")
    jobs_root = base / "jobs"
    copy_corpus(jobs_root / "docs")
    data = base / "data"
    data.mkdir()  # an existing folder: `SQLiteStore(data)` and `--db data` mean the same file
    return {"base": base, "jobs_root": jobs_root, "data": data}


@pytest.fixture(scope="session")
def server(service_dirs: dict[str, Path]) -> Server:
    """The shared server: keys on, small limits (see the module doc)."""
    keys = service_dirs["base"] / "keys.txt"
    digest = hashlib.sha256(HASHED_KEY.encode()).hexdigest()
    keys.write_text(f"# test keys\n{PLAIN_KEY}\n\nsha256:{digest}\n")
    srv = start_server(
        service_dirs["base"] / "server",
        "--db",
        str(service_dirs["data"]),
        "--api-key-file",
        str(keys),
        "--jobs-root",
        str(service_dirs["jobs_root"]),
        "--max-body-bytes",
        str(LIMITS["max_body_bytes"]),
        "--max-items",
        str(LIMITS["max_items"]),
        "--max-queue",
        str(LIMITS["max_queue"]),
        "--request-timeout",
        "120",
        key=PLAIN_KEY,
    )
    yield srv
    srv.stop()


@pytest.fixture
def client(server: Server) -> httpx.Client:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=120) as c:
        yield c


@pytest.fixture(scope="session")
def reference():
    """The encoder `attnswitch.engines.encode` uses by default, in the test process."""
    from attnswitch.engines import get_engine

    return get_engine()


@pytest.fixture(params=["sqlite", "postgres"])
def served_location(request, tmp_path: Path) -> str:
    """A fresh store of each backend, as `serve --db` takes it."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    data = tmp_path / "data"
    data.mkdir()
    return str(data)
