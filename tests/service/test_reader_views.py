"""A reader's views of a real server, checked against the kernel: an index built by an
admin's job over a tree with per-folder modes and an ACL (a public folder, a folder only
group adm may enter holding a copy of a public file, a folder bin may read by an ACL); for
the readers daemon (groups daemon, adm) and bin (groups bin, staff), the files each may read
are asked of the kernel (a forked child as that user calls os.access). A reader's search is
the admin's restricted to those files, k readable hits still come back, its index counts
only them, and no forbidden path or text appears in any answer. Both stores."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from service_testing import CORPUS, Server, start_server, wait_for_jobs

from permission_tree import Principal, kernel_reads, require, setfacl

pytestmark = pytest.mark.xdist_group("service")

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
# (folder, mode, group, ACL of the folder, ACL of its files, corpus files)
FOLDERS = (
    ("public", 0o755, "root", None, None, ("postgresql/tutorial-start.html",)),
    ("adm-only", 0o750, "adm", None, None, ("postgresql/tutorial-update.html",)),
    ("bin-acl", 0o700, "root", "u:bin:rx", "u:bin:r", ("postgresql/tutorial-advanced.html",)),
)
QUERIES = ("how do I update rows in a table", "window functions", "create a database")


@dataclass
class Served:
    server: Server
    top: Path
    files: list[str]  # relative to the jobs root ("tree/...")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require()
    for group in ("adm", "staff"):
        if not _has_group(group):
            pytest.skip(f"the system group {group!r} is missing")
    base = Path(tempfile.mkdtemp(prefix="attnswitch-views-", dir="/tmp"))
    try:
        base.chmod(0o755)
        tree = base / "tree"
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
        copy = tree / "adm-only" / "start-copy.html"  # the same bytes as the public file
        shutil.copyfile(CORPUS / "postgresql/tutorial-start.html", copy)
        copy.chmod(0o644)
        files.append("tree/adm-only/start-copy.html")
        work = tmp_path_factory.mktemp("views")
        (work / "data").mkdir()
        location = str(work / "data")
        if request.param == "postgres":  # a fresh database on the session's cluster
            import psycopg

            cluster = request.getfixturevalue("pg_cluster")
            with psycopg.connect(cluster.url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "t_reader_views_{os.getpid()}"')
            location = cluster.url.rsplit("/", 1)[0] + f"/t_reader_views_{os.getpid()}"
        (work / "access.toml").write_text(ACCESS, encoding="utf-8")
        srv = start_server(
            work / "server",
            "--db",
            location,
            "--access-file",
            str(work / "access.toml"),
            "--jobs-root",
            str(base),
            key=KEYS["root"],
        )
        try:
            with client_of(srv, "root") as admin:
                started = admin.post("/v1/jobs", json={"path": "tree"})
                assert started.status_code == 202, started.text
                assert wait_for_jobs(admin)[0]["status"] == "completed"
            yield Served(srv, base, files)
        finally:
            srv.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _has_group(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def client_of(server: Server, who: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=120
    )


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


def view_of(served: Served, who: str) -> View:
    with client_of(served.server, "root") as admin:
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
    return View(chunks, order, readable)


READERS = ("daemon", "bin")
GROUPS = {"daemon": ("daemon", "adm"), "bin": ("bin", "staff")}  # as the access file lists


def as_listed(who: str) -> Principal:
    """The user `who` with the groups the access file gives it (not the system's list), as
    the kernel's forked child takes them."""
    gids = tuple(grp.getgrnam(g).gr_gid for g in GROUPS[who])
    uid = pwd.getpwnam(who).pw_uid
    return Principal(who, frozenset(GROUPS[who]), uid, gids[0], gids)


@pytest.mark.parametrize("who", READERS)
def test_a_readers_search_is_the_admins_restricted_to_what_the_kernel_lets_it_read(
    served: Served, who: str
) -> None:
    view = view_of(served, who)
    allowed = {i for i, (paths, _) in view.chunks.items() if paths & view.readable}
    assert 0 < len(allowed) < len(view.chunks)  # the reader is neither blind nor all-seeing
    with client_of(served.server, who) as reader:
        for query, admin_order in view.order.items():
            found = reader.post("/v1/search", json={"query": query, "k": len(view.chunks)})
            assert found.status_code == 200, found.text
            hits = found.json()["data"]
            assert [h["chunk_id"] for h in hits] == [i for i in admin_order if i in allowed]
            for h in hits:  # the path and every copy listed are readable
                assert {h["path"]} | {a["path"] for a in h["also_at"]} <= view.readable, h
                assert {h["path"]} | {a["path"] for a in h["also_at"]} == (
                    view.chunks[h["chunk_id"]][0] & view.readable
                ), h
            small = reader.post("/v1/search", json={"query": query, "k": len(allowed) - 1})
            assert len(small.json()["data"]) == len(allowed) - 1
            assert len(
                reader.post("/v1/search", json={"query": query, "k": len(allowed)}).json()["data"]
            ) == len(allowed)


@pytest.mark.parametrize("who", READERS)
def test_no_reader_answer_names_or_quotes_a_forbidden_file(served: Served, who: str) -> None:
    view = view_of(served, who)
    forbidden_paths = {f.removeprefix("tree/") for f in served.files} - view.readable
    forbidden_ids = {i for i, (paths, _) in view.chunks.items() if not paths & view.readable}
    forbidden_texts = {view.chunks[i][1] for i in forbidden_ids}
    assert forbidden_paths and forbidden_ids
    names = {Path(p).name for p in forbidden_paths}
    with client_of(served.server, who) as reader:
        answers = [reader.post("/v1/search", json={"query": q, "k": 50}) for q in QUERIES]
        answers += [
            reader.post("/v1/search", json={"query": q, "k": 50, "mode": "keyword"})
            for q in QUERIES
        ]
        answers += [
            reader.post("/v1/search", json={"query": QUERIES[0], "k": 5, "path": p})
            for p in sorted(forbidden_paths)
        ]
        answers += [reader.get("/v1/index"), reader.get("/v1/whoami"), reader.get("/v1/server")]
        unknown = {tail: reader.get(f"/v1/chunks/424242/{tail}") for tail in ("context", "file")}
        for chunk_id in sorted(view.chunks):
            for tail, nothing in unknown.items():
                got = reader.get(f"/v1/chunks/{chunk_id}/{tail}")
                answers.append(got)
                if chunk_id in forbidden_ids:
                    assert got.status_code == nothing.status_code, (chunk_id, tail)
                    assert got.content.replace(str(chunk_id).encode(), b"ID") == (
                        nothing.content.replace(b"424242", b"ID")
                    ), (chunk_id, tail)
                else:
                    assert got.status_code == 200, (chunk_id, tail, got.text)
        for answer in answers:
            body = answer.text
            for name in names | {p.split("/")[0] for p in forbidden_paths if "/" in p}:
                if name == "public":
                    continue
                assert name not in body, (answer.request.url, name)
            if answer.headers.get("content-type", "").startswith("application/json"):
                for text in strings(answer.json()):
                    for secret in forbidden_texts:
                        assert secret not in text and (len(text) < 40 or text not in secret), (
                            answer.request.url,
                            text,
                        )


@pytest.mark.parametrize("who", READERS)
def test_a_readers_index_counts_only_what_it_may_read(served: Served, who: str) -> None:
    view = view_of(served, who)
    with client_of(served.server, who) as reader:
        summary = reader.get("/v1/index").json()
    assert summary["documents"] == len(view.readable)
    allowed = {i for i, (paths, _) in view.chunks.items() if paths & view.readable}
    # a copy's chunks count once per readable copy, as the admin's index counts them
    assert summary["chunks"] == sum(len(view.chunks[i][0] & view.readable) for i in allowed)
