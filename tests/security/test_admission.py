"""Admission under huge texts (issue 29, row 4, and the empty-vector item of row 10),
against the real keyless server: a 2 MB text costs what its first tokens cost, so twelve
of them at once plus a short request a second later are all answered (200, or 429 at
once), none 504, and the short one promptly; a text the tokenizer reduces to nothing is
refused like whitespace. Bounded in count and time."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

pytestmark = pytest.mark.xdist_group("security")
HUGE_CHARS = 2_000_000  # under the 2 MiB body limit once in JSON
HELLO_BOUND_S = 15.0  # a short request behind the huge ones, on a loaded 2-core machine


def huge_text(seed: int) -> str:
    words = ("harbour", "tide", "lantern", "rope", "gull", "anchor", "salt", "mast")
    text = " ".join(words[(i * 7 + seed) % len(words)] for i in range(HUGE_CHARS // 6))
    return text[:HUGE_CHARS]


def test_huge_texts_are_cut_before_tokenising_and_never_504(keyless) -> None:
    async def post(c: httpx.AsyncClient, text: str, delay: float) -> tuple[int, float]:
        await asyncio.sleep(delay)
        start = time.monotonic()
        r = await c.post("/v1/embeddings", json={"input": text})
        return r.status_code, time.monotonic() - start

    async def main() -> list[tuple[int, float]]:
        limits = httpx.Limits(max_connections=20)
        async with httpx.AsyncClient(base_url=keyless.url, timeout=120, limits=limits) as c:
            return await asyncio.gather(
                *[post(c, huge_text(i), 0.0) for i in range(12)], post(c, "hello", 1.0)
            )

    results = asyncio.run(main())
    statuses = [s for s, _ in results]
    assert 504 not in statuses and set(statuses) <= {200, 429}, results
    assert statuses.count(200) >= 1, results
    hello_status, hello_s = results[-1]
    assert hello_status == 200 and hello_s < HELLO_BOUND_S, results[-1]


def test_a_huge_text_embeds_as_its_first_tokens(client) -> None:
    """The cut changes nothing: a huge text's vector is its first tokens' vector."""
    text = huge_text(3)
    head = text[:4000]  # well over 256 tokens
    a = client.post("/v1/embeddings", json={"input": text}).json()["data"][0]["embedding"]
    b = client.post("/v1/embeddings", json={"input": head}).json()["data"][0]["embedding"]
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5


def test_a_huge_strict_text_is_refused_at_once(client) -> None:
    start = time.monotonic()
    r = client.post("/v1/embeddings", json={"input": huge_text(1), "truncate": False})
    assert r.status_code == 422 and r.json()["error"]["code"] == "too_many_tokens", r.text
    assert time.monotonic() - start < HELLO_BOUND_S


@pytest.mark.parametrize("text", ["\x00", "\u200b", "\u200b\u200b \x00"])
def test_a_text_with_no_token_is_refused_like_whitespace(client, text) -> None:
    r = client.post("/v1/embeddings", json={"input": ["fine", text]})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "empty_input"
    assert r.json()["error"]["param"] == "input[1]"
