"""Readiness is one gate on every /v1 route (issue 29, "the service's readiness becomes one
router dependency"): every route of the OpenAPI document answers 503 with Retry-After
while the service warms up and while it drains, jobs included, and before it looks at the
body; with keys on, a client without a key learns nothing first (401 before an invalid
body's 400), and a body with no JSON content type gets 415, not a puzzling 422.

The app runs on a real uvicorn server on a loopback port, in a thread of this process, with
its lifespan off: the service never starts its warm-up, so it stays "warming up" for as
long as the walk takes; `Service.begin_drain` (what SIGTERM calls) then makes it drain.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from attnswitch.service.app import create_app
from attnswitch.service.auth import hash_key
from attnswitch.service.config import ServiceConfig
from attnswitch.service.runtime import Service

pytestmark = pytest.mark.xdist_group("security")
KEY = "a-test-key-of-this-module"
START_TIMEOUT_S = 30.0


class Served:
    def __init__(self, service: Service, url: str):
        self.service = service
        self.url = url


def serve_in_thread(service: Service) -> Iterator[Served]:
    app = create_app(service=service)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.01)
    try:
        yield Served(service, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(START_TIMEOUT_S)
        sock.close()


@pytest.fixture
def warming(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "jobs").mkdir()
    config = ServiceConfig(db=tmp_path / "data", jobs_root=tmp_path / "jobs")
    yield from serve_in_thread(Service(config))


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[Served]:
    keys = tmp_path / "keys"
    keys.write_text(f"sha256:{hash_key(KEY)}\n")
    config = ServiceConfig(db=tmp_path / "data", api_key_file=keys)
    yield from serve_in_thread(Service(config))


def v1_routes(url: str) -> list[tuple[str, str]]:
    """(method, path) of every /v1 route the OpenAPI document lists, path parameters
    filled in."""
    spec = httpx.get(url + "/openapi.json", timeout=30).json()
    routes = [
        (method.upper(), re.sub(r"\{[^}]+\}", "0123456789abcdef", path))
        for path, methods in spec["paths"].items()
        if path.startswith("/v1/")
        for method in methods
    ]
    assert len(routes) >= 6, routes  # embeddings, search, jobs (3), models
    return routes


def walk(url: str, code: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        for method, path in v1_routes(url):
            r = client.request(method, path, json={} if method == "POST" else None)
            assert r.status_code == 503, (method, path, r.status_code, r.text)
            assert r.json()["error"]["code"] == code, (method, path, r.text)
            assert int(r.headers["retry-after"]) >= 1
        assert client.get("/livez").status_code == 200
        assert client.get("/readyz").json()["status"] == code.replace("_", " ")


def test_every_v1_route_is_503_while_warming_up_then_while_draining(warming) -> None:
    walk(warming.url, "warming_up")
    warming.service.begin_drain()
    walk(warming.url, "draining")


@pytest.mark.parametrize("body", [b"{not json", b'{"input": ['])
def test_an_invalid_body_without_a_key_is_401(keyed, body) -> None:
    r = httpx.post(
        keyed.url + "/v1/embeddings",
        content=body,
        timeout=30,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key", r.text


def test_an_invalid_body_with_a_key_is_answered_after_readiness(keyed) -> None:
    r = httpx.post(
        keyed.url + "/v1/embeddings",
        content=b"{not json",
        timeout=30,
        headers={"content-type": "application/json", "authorization": f"Bearer {KEY}"},
    )
    assert r.status_code == 503 and r.json()["error"]["code"] == "warming_up", r.text


def test_a_body_without_a_json_content_type_is_415(keyed) -> None:
    keyed.service.readiness.set_ready()  # the gate passes; the body is what is wrong
    for headers in ({}, {"content-type": "text/plain"}):
        r = httpx.post(
            keyed.url + "/v1/embeddings",
            content=b'{"input": "x"}',
            timeout=30,
            headers={**headers, "authorization": f"Bearer {KEY}"},
        )
        assert r.status_code == 415, r.text
        error = r.json()["error"]
        assert error["code"] == "unsupported_media_type"
        assert error["message"].startswith("content-type: expected application/json, got")
