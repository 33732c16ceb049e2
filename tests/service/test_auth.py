"""API keys: a real server with keys answers 401 without a valid bearer key and keeps the
health routes open; key files, constant-time checks and the loopback rule, directly; the
command refuses a non-loopback host without keys before loading anything."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from service_testing import HASHED_KEY, PLAIN_KEY

from attnswitch.service.auth import (
    BindRefusedError,
    KeyChecker,
    KeyFileError,
    check_bind,
    hash_key,
    host_name,
    is_loopback,
    load_keys,
)

pytestmark = pytest.mark.xdist_group("service")


@pytest.mark.parametrize(
    "headers, code",
    [
        ({}, "missing_api_key"),
        ({"Authorization": "Bearer wrong-key"}, "invalid_api_key"),
        ({"Authorization": f"Bearer {PLAIN_KEY}x"}, "invalid_api_key"),
        ({"Authorization": f"Basic {PLAIN_KEY}"}, "missing_api_key"),
        ({"Authorization": "Bearer"}, "missing_api_key"),
        # the stored digest is not a key
        ({"Authorization": f"Bearer {hash_key(HASHED_KEY)}"}, "invalid_api_key"),
    ],
)
@pytest.mark.parametrize(
    "method, path",
    [
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/search"),
        ("POST", "/v1/jobs"),
        ("GET", "/v1/jobs/abc"),
        ("GET", "/v1/models"),
    ],
)
def test_v1_routes_need_a_valid_key(server, headers, code, method, path) -> None:
    body = {"input": "x", "query": "x", "path": "docs"} if method == "POST" else None
    r = httpx.request(method, server.url + path, json=body, headers=headers, timeout=60)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert r.json()["error"]["code"] == code


@pytest.mark.parametrize("key", [PLAIN_KEY, HASHED_KEY])
def test_plain_and_hashed_keys_are_accepted(server, key) -> None:
    r = httpx.post(
        server.url + "/v1/embeddings",
        json={"input": "x"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path", ["/livez", "/readyz", "/metrics"])
def test_health_routes_stay_open(server, path) -> None:
    assert httpx.get(server.url + path, timeout=30).status_code == 200


def test_key_file_entries(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"second").hexdigest()
    f = tmp_path / "keys"
    f.write_text(f"# comment\n\n  first  \nsha256:{digest}\n{digest.upper()}\nfirst\n")
    assert load_keys(f) == (hash_key("first"), digest)
    checker = KeyChecker(load_keys(f))
    assert checker.valid("first") and checker.valid("second")
    assert not checker.valid(digest) and not checker.valid("firs") and not checker.valid("")


@pytest.mark.parametrize("content", ["", "# only a comment\n\n"])
def test_a_key_file_without_keys_is_refused(tmp_path: Path, content: str) -> None:
    f = tmp_path / "keys"
    f.write_text(content)
    with pytest.raises(KeyFileError, match="at least one key"):
        load_keys(f)
    with pytest.raises(KeyFileError, match="readable"):
        load_keys(tmp_path / "missing")


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.4", False),
        ("example.org", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_non_loopback_needs_keys_or_an_explicit_flag() -> None:
    with pytest.raises(BindRefusedError, match="--api-key-file"):
        check_bind("0.0.0.0", has_keys=False, allow_no_auth=False)
    check_bind("0.0.0.0", has_keys=True, allow_no_auth=False)
    check_bind("0.0.0.0", has_keys=False, allow_no_auth=True)
    check_bind("127.0.0.1", has_keys=False, allow_no_auth=False)


def test_serve_refuses_a_public_host_without_keys_before_binding(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnswitch.service",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--db",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "--allow-no-auth" in done.stderr and "listening" not in done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "header, name",
    [
        ("localhost", "localhost"),
        ("localhost:8000", "localhost"),
        ("127.0.0.1:80", "127.0.0.1"),
        ("[::1]:8000", "::1"),
        ("[::1]", "::1"),
        ("evil.example:80", "evil.example"),
        ("a:b", "a:b"),
        ("", ""),
    ],
)
def test_host_name_drops_the_port(header: str, name: str) -> None:
    assert host_name(header) == name
