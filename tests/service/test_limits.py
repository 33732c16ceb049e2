"""Every limit answers its status with the one JSON error shape, through a real server:
body size (declared and chunked), texts per request, tokens per text (truncated, or 422 when
strict), empty input, wrong types, invalid JSON, a full queue (429 + Retry-After) and a
passed deadline (504). Error bodies stay small whatever was sent."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from service_testing import LIMITS

pytestmark = pytest.mark.xdist_group("service")
MAX_ERROR_BYTES = 1024


def assert_error(
    r: httpx.Response, status: int, code: str | None = None, param: str | None = None
) -> dict:
    assert r.status_code == status, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")
    assert len(r.content) <= MAX_ERROR_BYTES
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error
    return error


def test_body_over_the_limit_declared_by_content_length(client) -> None:
    text = "x" * LIMITS["max_body_bytes"]
    r = client.post("/v1/embeddings", json={"input": text})
    error = assert_error(r, 413, "body_too_large", "body")
    assert "xxxx" not in error["message"]


def test_body_over_the_limit_sent_chunked(client) -> None:
    piece = b'{"input": "' + b"y" * 8192

    def chunks():  # no Content-Length: httpx sends Transfer-Encoding: chunked
        yield piece
        for _ in range(LIMITS["max_body_bytes"] // 8192 + 1):
            yield b"y" * 8192
        yield b'"}'

    r = client.post(
        "/v1/embeddings", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in r.request.headers
    assert_error(r, 413, "body_too_large", "body")


def test_body_just_under_the_limit_is_served(client) -> None:
    words = "word " * ((LIMITS["max_body_bytes"] - 64) // 5)
    r = client.post("/v1/embeddings", json={"input": words})
    assert r.status_code == 200, r.text[:300]


def test_too_many_texts(client) -> None:
    r = client.post("/v1/embeddings", json={"input": ["a"] * (LIMITS["max_items"] + 1)})
    assert_error(r, 422, "too_many_items", "input")
    assert (
        client.post("/v1/embeddings", json={"input": ["a"] * LIMITS["max_items"]}).status_code
        == 200
    )


def test_long_text_is_truncated_by_default_and_refused_when_strict(client, reference) -> None:
    text = "attention " * 400
    limit = reference.spec.max_seq_length
    r = client.post("/v1/embeddings", json={"input": ["short", text]})
    assert r.status_code == 200
    assert r.json()["usage"]["prompt_tokens"] == len(reference.tokenize(["short"])[0]) + limit
    strict = client.post("/v1/embeddings", json={"input": ["short", text], "truncate": False})
    error = assert_error(strict, 422, "too_many_tokens", "input[1]")
    assert str(limit) in error["message"]
    assert (
        client.post("/v1/embeddings", json={"input": "short", "truncate": False}).status_code == 200
    )


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({"input": ["fine", "   "]}, "input[1]"),
    ],
)
def test_empty_input_is_400(client, body, param) -> None:
    assert_error(client.post("/v1/embeddings", json=body), 400, "empty_input", param)


def test_empty_search_query_is_400(client) -> None:
    assert_error(client.post("/v1/search", json={"query": " "}), 400, "empty_input", "query")


@pytest.mark.parametrize(
    "body",
    [
        {"input": 5},
        {"input": [1, 2, 3]},
        {"input": [["nested"]]},
        {"input": "x", "encoding_format": "hex"},
        {"input": "x", "truncate": "no"},
        {"input": "x", "dimensions": "384"},
        {},
        [],
    ],
)
def test_wrong_types_are_422(client, body) -> None:
    assert_error(client.post("/v1/embeddings", json=body), 422, "invalid_type")


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/search", {"query": "q", "k": 0}),
        ("/v1/search", {"query": "q", "k": 1.5}),
        ("/v1/search", {"query": 3}),
        ("/v1/jobs", {"path": 7}),
    ],
)
def test_wrong_types_on_other_routes_are_422(client, path, body) -> None:
    assert_error(client.post(path, json=body), 422, "invalid_type")


@pytest.mark.parametrize(
    "body, param", [({"input": "a\ud800b"}, "input"), ({"input": ["ok", "\udfff"]}, "input[1]")]
)
def test_unpaired_surrogates_are_422(client, body, param) -> None:
    r = client.post(
        "/v1/embeddings",
        content=json.dumps(body),  # ascii: escapes survive
        headers={"content-type": "application/json"},
    )
    assert_error(r, 422, "invalid_text", param)


def test_invalid_json_is_400(client) -> None:
    r = client.post(
        "/v1/embeddings",
        content=b'{"input": ["unterminated',
        headers={"content-type": "application/json"},
    )
    assert_error(r, 400, "invalid_json", "body")


def test_errors_never_echo_large_input(client) -> None:
    sent = json.dumps({"input": list(range(2000)), "model": "m" * 20000})  # under 2048
    assert len(sent) < LIMITS["max_body_bytes"]
    r = client.post("/v1/embeddings", content=sent, headers={"content-type": "application/json"})
    error = assert_error(r, 422, "invalid_type")
    assert "mmmm" not in error["message"] and "1999" not in error["message"]
    assert "more" in error["message"]  # the list of errors is cut, and says so


def test_a_list_over_2048_items_stops_validation_at_the_limit(client) -> None:
    sent = json.dumps({"input": [0] * 20000})
    r = client.post("/v1/embeddings", content=sent, headers={"content-type": "application/json"})
    error = assert_error(r, 422, "too_many_items", "input")
    assert "at most 2048 items" in error["message"]


def test_unknown_route_and_method_use_the_error_shape(client) -> None:
    assert_error(client.get("/v1/nothing-here"), 404)
    assert_error(client.get("/v1/embeddings"), 405)


def test_full_queue_answers_429_at_once_with_retry_after(server) -> None:
    texts = ["a sentence of a few tokens " * 8] * LIMITS["max_items"]
    n = 3 * LIMITS["max_queue"] // LIMITS["max_items"] + 3

    async def flood() -> list[httpx.Response]:
        async with httpx.AsyncClient(
            base_url=server.url, headers=server.headers(), timeout=120
        ) as c:
            return await asyncio.gather(
                *(c.post("/v1/embeddings", json={"input": texts}) for _ in range(n))
            )

    responses = asyncio.run(flood())
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429}, statuses
    refused = [r for r in responses if r.status_code == 429]
    # At most max_queue // max_items are admitted; fewer when the measured speed says the
    # work ahead would not finish in time (a loaded machine): refused for time, not 504.
    assert refused and 200 in statuses
    for r in refused:
        error = assert_error(r, 429, "queue_full")
        assert "full queue" in error["message"] or "an answer within" in error["message"]
        assert int(r.headers["retry-after"]) >= 1
        assert r.elapsed.total_seconds() < min(
            x.elapsed.total_seconds() for x in responses if x.status_code == 200
        )


def test_passed_deadline_is_504(client) -> None:
    r = client.post(
        "/v1/embeddings",
        json={"input": ["slow enough " * 50] * 8},
        headers={"x-request-timeout": "0.001"},
    )
    assert_error(r, 504, "deadline_exceeded")
    assert client.post("/v1/embeddings", json={"input": "after a timeout"}).status_code == 200
