"""The HTTP edge of a keyless loopback server (issue row 10): a body that is not UTF-8 is
invalid JSON, a Host header that names anything but loopback is refused (DNS rebinding),
and the docs state what the server protects and its limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnswitch.service.limits import DRAIN_BYTES

pytestmark = pytest.mark.xdist_group("security")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "service.md"


@pytest.mark.parametrize(
    "body", [b'{"input": "\xff\xfe"}', b"\xc3\x28", '{"input": "x"}'.encode("utf-16")]
)
def test_a_body_that_is_not_utf8_is_invalid_json(client, body) -> None:
    r = client.post("/v1/embeddings", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_json"
    assert "UTF-8" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example",
        "attacker.example:80",
        "10.0.0.1",
        "localhost.attacker.example",
        "127.0.0.1.nip.io",
    ],
)
def test_a_foreign_host_header_is_refused(client, host) -> None:
    for path in ("/livez", "/v1/models"):
        r = client.get(path, headers={"host": host})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_host", r.text


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST:1", "127.0.0.1", "127.1.2.3:8", "[::1]:8000"]
)
def test_loopback_host_headers_are_served(client, host) -> None:
    assert client.get("/livez", headers={"host": host}).status_code == 200


def test_the_docs_state_the_drain_limit_and_the_security_model() -> None:
    text = DOCS.read_text()
    assert f"{DRAIN_BYTES // 2**20} MiB" in text
    section = text.split("## Security", 1)[1].split("\n## ", 1)[0]
    for topic in ("keys", "jobs root", "timeout", "loopback", "Host"):
        assert topic.lower() in section.lower(), topic


@pytest.mark.parametrize("chunk_id", [str(2**63), str(2**64), "9" * 40, "0", "-1"])
def test_a_chunk_id_out_of_the_stores_range_is_refused_by_the_request_model(
    client, chunk_id: str
) -> None:
    """Issue 41 (6): an id of 2^63 or more overflowed inside the store (OverflowError,
    500); ids are now 1 .. 2^63 - 1 by the route's model: a one-line 422 naming it."""
    r = client.get(f"/v1/chunks/{chunk_id}/context")
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert "chunk_id" in message and "\n" not in message, message
    assert client.get(f"/v1/chunks/{2**63 - 1}/context").status_code == 404
