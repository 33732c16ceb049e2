"""Principals: the access file read and refused field by field; a real server with an access
file (a reader and an admin): jobs and skipped files are an admin's (a reader gets 403
`forbidden`), the page's data calls say the caller's role, a search writes an audit line, and
SIGHUP re-reads the file (a bad one keeps the old); a plain key file means admin; both
options together are refused."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from service_testing import PLAIN_KEY, Server, copy_corpus, start_server, wait_for_jobs
from starlette.requests import Request

from access_testing import access_text
from attnswitch.errors import ConfigError
from attnswitch.indexing.access import Reader
from attnswitch.service.access import (
    LOCAL,
    AccessControl,
    AccessFileError,
    Principal,
    load_access,
)
from attnswitch.service.auth import KeyChecker
from attnswitch.service.config import ServiceConfig
from attnswitch.service.errors import ServiceError

pytestmark = pytest.mark.xdist_group("service")

READER_KEY = "reader-key-5d1e"
ADMIN_KEY = "admin-key-77c2"
LATER_KEY = "later-key-0b3f"
QUERY = "how do I update rows in a table"

ACCESS = access_text(
    READER_KEY,
    ADMIN_KEY,
    groups=("staff", "hr"),
    grants=[("docs/postgresql", ["hr"]), ("other/*.txt", ["finance"])],
)


def request_with(key: str | None) -> Request:
    headers = [] if key is None else [(b"authorization", f"Bearer {key}".encode())]
    return Request({"type": "http", "headers": headers, "method": "GET", "path": "/"})


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- the file ------------------------------------------------------------------------------


def test_an_access_file_gives_principals_readers_and_grants(tmp_path: Path) -> None:
    access = load_access(write(tmp_path / "access.toml", ACCESS))
    alice = Principal("alice", frozenset({"staff", "hr"}), "reader")
    root = Principal("root", frozenset(), "admin")
    assert access.principals == (alice, root)
    assert access.principal(request_with(READER_KEY)) == alice
    assert access.principal(request_with(ADMIN_KEY)) == root  # given by its digest
    # a reader gets the grants naming one of its groups, an admin is no reader
    assert access.reader(alice) == Reader("alice", frozenset({"staff", "hr"}), ("docs/postgresql",))
    assert access.reader(root) is None
    for key in (None, "nope", hashlib.sha256(ADMIN_KEY.encode()).hexdigest()):
        with pytest.raises(ServiceError) as refused:
            access.principal(request_with(key))
        assert refused.value.status == 401


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['k']\ncolour='red'\n",
            "principal[0]: expected only the fields name, groups, role, keys, got colour",
        ),
        (
            "[[principal]]\nname='a'\nrole='owner'\nkeys=['k']\n",
            'principal[0].role: expected "reader" or "admin", got \'owner\'',
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=[]\n",
            "principal[0].keys: expected at least one key, got none",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\n",
            "principal[0].keys: expected a list of keys or sha256 digests, got none",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['k']\n"
            "[[principal]]\nname='b'\nrole='admin'\nkeys=['j', 'k']\n",
            "principal[1].keys: expected keys of this principal only, got one that "
            "principal[0] (a) also has",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['k']\n"
            "[[principal]]\nname='a'\nrole='admin'\nkeys=['j']\n",
            "principal[1].name: expected a name given once, got 'a' again",
        ),
        (
            "[[principal]]\nrole='reader'\nkeys=['k']\n",
            "principal[0].name: expected a user name (a string), got none",
        ),
        (
            "[[principal]]\nname='a'\ngroups='hr'\nrole='reader'\nkeys=['k']\n",
            "principal[0].groups: expected a list of group names, got 'hr'",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['sha256:12ab']\n",
            "principal[0].keys: expected 'sha256:' and 64 hex digits, got 4 characters",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['  ']\n",
            "principal[0].keys: expected non-blank keys, got a blank one",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['k']\n[[grant]]\npath='x'\n",
            "grant[0].groups: expected a list of group names, got none",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['k']\n[[grant]]\npath='x'\ngroups=[]\n",
            "grant[0].groups: expected at least one group, got none",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['k']\n[[grant]]\ngroups=['g']\n",
            "grant[0].path: expected a folder or glob (a string), got none",
        ),
        (
            "[[principal]]\nname='a'\nrole='reader'\nkeys=['k']\n[[grants]]\npath='x'\n",
            "access file: expected only the fields principal, grant, got grants",
        ),
        ("principal = 'a'\n", "principal: expected [[principal]] tables, got 'a'"),
        ("[[grant]]\npath='x'\ngroups=['g']\n", "access file: expected at least one [[principal]]"),
        ("[[principal]\n", "access file: expected TOML, got"),
    ],
)
def test_a_bad_access_file_is_refused_naming_the_table_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(AccessFileError) as refused:
        load_access(write(tmp_path / "access.toml", text))
    assert str(refused.value).startswith(message), str(refused.value)


def test_a_key_file_means_admin_and_no_keys_the_local_user(tmp_path: Path) -> None:
    keys = write(tmp_path / "keys", f"{PLAIN_KEY}\n")
    control = AccessControl(api_key_file=keys)
    admin = control.identify(request_with(PLAIN_KEY))
    assert admin.admin and admin.name == "admin"
    assert control.current.reader(admin) is None
    keyless = AccessControl()
    assert keyless.keyless and keyless.identify(request_with(None)) is LOCAL
    assert LOCAL.admin


def test_both_files_are_refused(tmp_path: Path) -> None:
    keys = write(tmp_path / "keys", "k\n")
    access = write(tmp_path / "access.toml", ACCESS)
    with pytest.raises(AccessFileError, match="expected --access-file or --api-key-file, got both"):
        AccessControl(access, keys)
    with pytest.raises(ConfigError, match="expected --access-file or --api-key-file, got both"):
        ServiceConfig(api_key_file=keys, access_file=access)
    done = subprocess.run(
        [sys.executable, "-m", "attnswitch.service", "--port", "0"]
        + ["--api-key-file", str(keys), "--access-file", str(access)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "expected --access-file or --api-key-file, got both" in done.stderr


def test_the_key_checker_gives_back_the_owner_of_any_entry() -> None:
    digests = tuple(hashlib.sha256(k.encode()).hexdigest() for k in ("a", "b", "c"))
    checker = KeyChecker(digests, ("first", "second", "third"))
    assert [checker.identify(k) for k in ("a", "b", "c", "d")] == [
        "first",
        "second",
        "third",
        None,
    ]
    assert KeyChecker(digests).identify("b") == digests[1]  # no owners: the digest


def test_reload_keeps_the_old_access_when_the_new_file_is_bad(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "access.toml", ACCESS)
    control = AccessControl(path)
    write(path, ACCESS.replace('role = "reader"', 'role = "boss"'))
    assert not control.reload()
    assert "access not reloaded, the old one is kept: principal[0].role" in capsys.readouterr().err
    assert control.identify(request_with(READER_KEY)).role == "reader"
    write(path, ACCESS.replace(READER_KEY, LATER_KEY))
    assert control.reload()
    assert control.identify(request_with(LATER_KEY)).name == "alice"
    with pytest.raises(ServiceError):
        control.identify(request_with(READER_KEY))


# -- a real server -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def access_server(tmp_path_factory: pytest.TempPathFactory) -> Server:
    base = tmp_path_factory.mktemp("access")
    jobs_root = base / "jobs"
    copy_corpus(jobs_root / "docs", ("postgresql/tutorial-start.html",))
    (base / "data").mkdir()
    srv = start_server(
        base / "server",
        "--db",
        str(base / "data"),
        "--access-file",
        str(write(base / "access.toml", ACCESS)),
        "--audit-log",
        str(base / "audit.jsonl"),
        "--jobs-root",
        str(jobs_root),
        key=ADMIN_KEY,
    )
    srv.base = base  # type: ignore[attr-defined]
    with client_of(srv, ADMIN_KEY) as admin:  # an index to search: the admin's job
        assert admin.post("/v1/jobs", json={"path": "docs"}).status_code == 202
        assert wait_for_jobs(admin)[0]["status"] == "completed"
    yield srv
    srv.stop()


def client_of(server: Server, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    )


def test_a_readers_jobs_and_skipped_files_are_forbidden(access_server: Server) -> None:
    with client_of(access_server, READER_KEY) as reader:
        for method, path, body in [
            ("POST", "/v1/jobs", {"path": "docs"}),
            ("GET", "/v1/jobs", None),
            ("GET", "/v1/jobs/abc", None),
            ("POST", "/v1/jobs/abc/cancel", None),
            ("GET", "/v1/index/skipped", None),
        ]:
            r = reader.request(method, path, json=body)
            assert r.status_code == 403, (path, r.text)
            error = r.json()["error"]
            assert error["code"] == "forbidden"
            assert error["message"] == (
                f"{path}: expected an admin's key, got the key of reader 'alice'"
            )
        assert reader.get("/v1/whoami").json() == {
            "name": "alice",
            "groups": ["hr", "staff"],
            "role": "reader",
            "jobs": False,
        }
        server_info = reader.get("/v1/server").json()
        assert server_info["role"] == "reader" and server_info["jobs"] is False
        summary = reader.get("/v1/index").json()
        assert not {"skipped", "skipped_by_reason", "runs"} & set(summary)
        # the one document lies under a folder only root may enter (the test's temporary
        # folder, mode 700), so alice reads it only by the grant of docs/postgresql to hr
        with client_of(access_server, ADMIN_KEY) as admin:
            mine = admin.get("/v1/chunks/1/context")
            unknown = admin.get("/v1/chunks/424242/context")
        assert mine.status_code == 200 and reader.get("/v1/chunks/1/context").json() == mine.json()
        assert reader.get("/v1/chunks/424242/context").json() == unknown.json()


def test_an_admin_runs_jobs_and_sees_the_whole_index(access_server: Server) -> None:
    with client_of(access_server, ADMIN_KEY) as admin:
        assert admin.get("/v1/whoami").json() == {
            "name": "root",
            "groups": [],
            "role": "admin",
            "jobs": True,
        }
        assert admin.get("/v1/server").json()["jobs"] is True
        started = admin.post("/v1/jobs", json={"path": "docs"})
        assert started.status_code == 202, started.text
        jobs = wait_for_jobs(admin)
        assert [j["status"] for j in jobs] == ["completed", "completed"]  # the fixture's too
        assert admin.post(f"/v1/jobs/{jobs[0]['id']}/cancel").status_code == 409  # finished
        assert admin.get("/v1/index/skipped").status_code == 200
        summary = admin.get("/v1/index").json()
        assert summary["documents"] == 1 and "runs" in summary and "skipped" in summary


def test_a_search_writes_an_audit_line_without_the_query(access_server: Server) -> None:
    with client_of(access_server, ADMIN_KEY) as admin:
        found = admin.post("/v1/search", json={"query": QUERY, "k": 3, "mode": "keyword"})
        assert found.status_code == 200, found.text
    audit = (access_server.base / "audit.jsonl").read_text(encoding="utf-8")  # type: ignore[attr-defined]
    assert QUERY not in audit
    line = json.loads(audit.splitlines()[-1])
    assert {k: line[k] for k in line if k != "time"} == {
        "event": "search",
        "principal": "root",
        "role": "admin",
        "route": "/v1/search",
        "query_sha256": hashlib.sha256(QUERY.encode()).hexdigest(),
        "query_chars": len(QUERY),
        "k": 3,
        "mode": "keyword",
        "filter": False,
        "returned": len(found.json()["data"]),
    }
    assert line["time"].endswith("Z")


def wait_for_log(server: Server, text: str, count: int, timeout: float = 60.0) -> None:
    """Wait until `text` is in the server's stderr `count` times (a line it prints)."""
    deadline = time.monotonic() + timeout
    while server.stderr().count(text) < count:
        assert time.monotonic() < deadline, server.stderr()
        assert server.proc.poll() is None, server.stderr()
        time.sleep(0.02)


def test_sighup_rereads_the_access_file_and_keeps_it_when_bad(access_server: Server) -> None:
    path = access_server.base / "access.toml"  # type: ignore[attr-defined]
    try:
        write(path, ACCESS.replace(READER_KEY, LATER_KEY))
        access_server.proc.send_signal(signal.SIGHUP)
        wait_for_log(access_server, "access reloaded: 2 principals, 2 grants", 1)
        with client_of(access_server, LATER_KEY) as later:
            assert later.get("/v1/whoami").json()["name"] == "alice"
        with client_of(access_server, READER_KEY) as old:
            assert old.get("/v1/whoami").status_code == 401

        write(path, ACCESS.replace(READER_KEY, LATER_KEY) + "[[grant]]\npath = 'x'\n")
        access_server.proc.send_signal(signal.SIGHUP)
        wait_for_log(access_server, "access not reloaded, the old one is kept: grant[2].groups", 1)
        with client_of(access_server, LATER_KEY) as later:
            assert later.get("/v1/whoami").json()["role"] == "reader"
    finally:  # the other tests' keys
        write(path, ACCESS)
        access_server.proc.send_signal(signal.SIGHUP)
        wait_for_log(access_server, "access reloaded", 2)


def test_a_plain_key_file_still_means_admin(server: Server, client: httpx.Client) -> None:
    assert client.get("/v1/whoami").json() == {
        "name": "admin",
        "groups": [],
        "role": "admin",
        "jobs": True,
    }
    assert client.get("/v1/jobs").status_code == 200
