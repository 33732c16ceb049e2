"""Fixtures of the security suite: real servers on free loopback ports, started the way an
operator would start them, over folders laid out the way an attacker would lay them out.

- `layout`: a jobs root holding a real document, a link to a secret outside the root, a
  folder link out of the root, a hidden `.ssh` folder with a private key (no extension)
  and a link to it; the secrets carry `SECRET` so a search can look for them.
- `keyless`: `attnswitch serve` without keys on 127.0.0.1, with that jobs root and short
  header and body deadlines (2 s), so that slow clients are cut off quickly.
- `broken`: a server started over a corrupt index file, without a jobs root.

Nothing here reaches the network: every server binds 127.0.0.1, every loop is bounded in
count and in time.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest
from security_testing import (
    CORPUS,
    DOCUMENT,
    SECRET,
    SHORT_TIMEOUT_S,
    STARTUP_TIMEOUT_S,
    Layout,
    corrupt_index,
)

from attnswitch.service import launch


@pytest.fixture(scope="session")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    base = tmp_path_factory.mktemp("security")
    outside = base / "outside"
    (outside / "etc").mkdir(parents=True)
    (outside / "passwd").write_text(SECRET + "\n")
    (outside / "etc" / "shadow.txt").write_text(SECRET + " shadow\n")
    jobs = base / "jobs"
    docs = jobs / "docs"
    docs.mkdir(parents=True)
    shutil.copy2(CORPUS / DOCUMENT, docs / Path(DOCUMENT).name)
    (docs / "passwd").symlink_to(outside / "passwd")  # a file link out of the root
    (docs / "etc").symlink_to(outside / "etc", target_is_directory=True)  # a folder link out
    (jobs / ".ssh").mkdir()
    (jobs / ".ssh" / "id_ed25519").write_text(SECRET + " ssh\n")  # no extension: "text"
    (jobs / "keys").symlink_to(jobs / ".ssh", target_is_directory=True)
    (jobs / "notes.txt").write_text("a file, not a folder\n")
    data = base / "data"
    data.mkdir()
    return Layout(base, jobs, outside, data)


def _start(workdir: Path, *args: str) -> launch.ServerProcess:
    return launch.start(workdir, *args, timeout=STARTUP_TIMEOUT_S)


@pytest.fixture(scope="session")
def keyless(layout: Layout) -> launch.ServerProcess:
    srv = _start(
        layout.base / "keyless",
        "--db",
        str(layout.data),
        "--jobs-root",
        str(layout.jobs_root),
        "--header-timeout",
        str(SHORT_TIMEOUT_S),
        "--body-timeout",
        str(SHORT_TIMEOUT_S),
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def broken_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data folder of the `broken` server, its index file corrupt at start."""
    data = tmp_path_factory.mktemp("broken") / "data"
    corrupt_index(data)
    return data


@pytest.fixture(scope="session")
def broken(broken_data: Path) -> launch.ServerProcess:
    srv = _start(broken_data.parent / "server", "--db", str(broken_data))
    yield srv
    srv.stop()


@pytest.fixture
def client(keyless: launch.ServerProcess) -> httpx.Client:
    with httpx.Client(base_url=keyless.url, timeout=60) as c:
        yield c
