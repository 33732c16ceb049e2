"""A real server over a tree with per-folder modes and an ACL, three principals, and what the
kernel lets each reader read: the one setup of the tests that check a reader's answers on
every front end (tests/service/test_reader_views.py: the HTTP routes;
tests/integrations/test_reader_clients.py: the MCP tools over HTTP and stdio, the LangChain
and LlamaIndex `url=` clients).

The tree (`FOLDERS`): a public folder, a folder only group adm may enter holding a copy of
a public file, a folder bin may read by an ACL. The access file (`ACCESS`): the readers
daemon (groups daemon, adm) and bin (groups bin, staff), and the admin root (its key given
as a digest). `served_tree` builds the tree in a folder any user may search (pytest's own
temporary folders are root's alone), starts a real `attnswitch serve` over a fresh store
(SQLite, or a new database on the session's PostgreSQL cluster) with that access file, and
indexes the tree by an admin's job. `view_of` is the admin's whole index (every chunk's
paths and text, and each query's order) with the files the kernel lets a reader read (a
forked child as that user, with the groups the access file gives it, calls os.access:
`permission_tree.kernel_reads`); `strings` walks every string of a JSON answer. Needs root
and setfacl (`permission_tree.require`) and the system groups adm and staff, else skips."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from attnswitch.service import launch
from corpus_testing import CORPUS
from permission_tree import Principal, kernel_reads, require, setfacl

KEYS = {"daemon": "daemon-key-41c9", "bin": "bin-key-8e07", "root": "root-key-c2d5"}
ACCESS = f"""
[[principal]]
name = "daemon"
groups = ["daemon", "adm"]
role = "reader"
keys = ["{KEYS["daemon"]}"]

[[principal]]
name = "bin"
groups = ["bin", "staff"]
role = "reader"
keys = ["{KEYS["bin"]}"]

[[principal]]
name = "root"
role = "admin"
keys = ["sha256:{hashlib.sha256(KEYS["root"].encode()).hexdigest()}"]
"""
READERS = ("daemon", "bin")
GROUPS = {"daemon": ("daemon", "adm"), "bin": ("bin", "staff")}  # as the access file lists
# (folder, mode, group, ACL of the folder, ACL of its files, corpus files)
FOLDERS = (
    ("public", 0o755, "root", None, None, ("postgresql/tutorial-start.html",)),
    ("adm-only", 0o750, "adm", None, None, ("postgresql/tutorial-update.html",)),
    ("bin-acl", 0o700, "root", "u:bin:rx", "u:bin:r", ("postgresql/tutorial-advanced.html",)),
)
COPY = ("adm-only/start-copy.html", "postgresql/tutorial-start.html")  # a public file's bytes
QUERIES = ("how do I update rows in a table", "window functions", "create a database")
STARTUP_TIMEOUT_S = 180.0
JOB_TIMEOUT_S = 300.0


@dataclass
class Served:
    """A running server over the tree: the jobs root `top` (the tree is its "tree"), the
    tree's files relative to it ("tree/public/..."), the store's `location` (`--db`) and
    the access file, for other servers over the same index."""

    server: launch.ServerProcess
    top: Path
    files: list[str]
    location: str
    access: Path


def require_tree() -> None:
    """Skip unless the tree can be built and judged (`permission_tree.require`, and the
    groups adm and staff)."""
    require()
    for group in ("adm", "staff"):
        try:
            grp.getgrnam(group)
        except KeyError:
            pytest.skip(f"the system group {group!r} is missing")


def build_tree(tree: Path) -> list[str]:
    """`FOLDERS` and the copy `COPY` under `tree` (made here); the files, relative to
    `tree`'s parent ("tree/public/tutorial-start.html")."""
    tree.mkdir(mode=0o755)
    tree.chmod(0o755)
    files = []
    for folder, mode, group, folder_acl, file_acl, sources in FOLDERS:
        path = tree / folder
        path.mkdir()
        for source in sources:
            target = path / Path(source).name
            shutil.copyfile(CORPUS / source, target)
            target.chmod(0o644 if file_acl is None else 0o600)
            if file_acl:
                setfacl(target, file_acl)
            files.append(f"tree/{folder}/{target.name}")
        os.chown(path, 0, grp.getgrnam(group).gr_gid)
        path.chmod(mode)
        if folder_acl:
            setfacl(path, folder_acl)
    copy, source = COPY
    shutil.copyfile(CORPUS / source, tree / copy)
    (tree / copy).chmod(0o644)
    files.append(f"tree/{copy}")
    return files


@contextmanager
def served_tree(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, label: str
) -> Iterator[Served]:
    """The tree served and indexed (see the module doc) on the store `request.param`
    ("sqlite" or "postgres": a database named after `label` on `pg_cluster`); stopped and
    removed after."""
    require_tree()
    base = Path(tempfile.mkdtemp(prefix="attnswitch-views-", dir="/tmp"))
    try:
        base.chmod(0o755)
        files = build_tree(base / "tree")
        work = tmp_path_factory.mktemp(label)
        (work / "data").mkdir()
        location = str(work / "data")
        if request.param == "postgres":  # a fresh database on the session's cluster
            import psycopg

            cluster = request.getfixturevalue("pg_cluster")
            name = f"t_{label}_{os.getpid()}"
            with psycopg.connect(cluster.url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            location = cluster.url.rsplit("/", 1)[0] + f"/{name}"
        access = work / "access.toml"
        access.write_text(ACCESS, encoding="utf-8")
        server = launch.start(
            work / "server",
            "--db",
            location,
            "--access-file",
            str(access),
            "--jobs-root",
            str(base),
            timeout=STARTUP_TIMEOUT_S,
        )
        try:
            with client_of(server.url, "root") as admin:
                started = admin.post("/v1/jobs", json={"path": "tree"})
                assert started.status_code == 202, started.text
                assert _finished(admin)["status"] == "completed"
            yield Served(server, base, files, location, access)
        finally:
            server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _finished(admin: httpx.Client) -> dict:
    """The server's one job, once it is neither queued nor running."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        (job,) = admin.get("/v1/jobs").json()["data"]
        if job["status"] not in ("queued", "running"):
            return job
        assert time.monotonic() < deadline, f"the job still runs after {JOB_TIMEOUT_S} s: {job}"
        time.sleep(0.1)


def client_of(url: str, who: str) -> httpx.Client:
    """An HTTP client of the server at `url` with the key of `who` (`KEYS`)."""
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=120)


def strings(value: object) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


@dataclass
class View:
    """The admin's whole index (every chunk's paths, text, in one search's order per query)
    and what the kernel lets `who` read."""

    chunks: dict[int, tuple[set[str], str]]  # chunk id -> (its paths, its text)
    order: dict[str, list[int]]  # query -> the admin's chunk ids, best first
    readable: set[str]  # paths under the jobs root's "tree" ("public/...")
    files: set[str]  # every file of the tree, as `readable` names them

    def allowed(self) -> set[int]:
        """The chunks `who` may read: those with a readable path (a copy's chunks are its
        original's, readable through either)."""
        return {i for i, (paths, _) in self.chunks.items() if paths & self.readable}

    def forbidden_paths(self) -> set[str]:
        return self.files - self.readable

    def forbidden_texts(self) -> set[str]:
        return {text for i, (_, text) in self.chunks.items() if i not in self.allowed()}

    def forbidden_names(self) -> set[str]:
        """The forbidden files' names and their folders' (but "public", which a readable
        file's path names too)."""
        paths = self.forbidden_paths()
        names = {Path(p).name for p in paths} | {p.split("/")[0] for p in paths if "/" in p}
        return names - {"public"}


def view_of(served: Served, who: str) -> View:
    """The admin's index through `/v1/search` (k: every chunk) and the kernel's answer for
    `who` (see the module doc)."""
    with client_of(served.server.url, "root") as admin:
        total = admin.get("/v1/index").json()["chunks"]
        chunks: dict[int, tuple[set[str], str]] = {}
        order = {}
        for query in QUERIES:
            found = admin.post("/v1/search", json={"query": query, "k": total})
            assert found.status_code == 200, found.text
            hits = found.json()["data"]
            # every chunk once (a copy's chunks are its original's, listed in also_at)
            assert sum(1 + len(h["also_at"]) for h in hits) == total
            order[query] = [h["chunk_id"] for h in hits]
            for h in hits:
                paths = {h["path"]} | {a["path"] for a in h["also_at"]}
                chunks[h["chunk_id"]] = (paths, h["text"])
    kernel = kernel_reads(as_listed(who), [served.top / f for f in served.files])
    readable = {f.removeprefix("tree/") for f, ok in zip(served.files, kernel, strict=True) if ok}
    return View(chunks, order, readable, {f.removeprefix("tree/") for f in served.files})


def as_listed(who: str) -> Principal:
    """The user `who` with the groups the access file gives it (not the system's list), as
    the kernel's forked child takes them."""
    gids = tuple(grp.getgrnam(g).gr_gid for g in GROUPS[who])
    uid = pwd.getpwnam(who).pw_uid
    return Principal(who, frozenset(GROUPS[who]), uid, gids[0], gids)
