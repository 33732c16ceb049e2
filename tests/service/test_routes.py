"""The routes through a real server and real HTTP clients: the official `openai` client gets
the vectors `attnswitch.engines.encode` gives in-process, in both encodings; requests from
many clients are batched together and each still gets its own vectors.

Equality criterion: cosine >= 0.9999 per vector (and max |diff| <= 1e-5), not bit equality.
The batcher puts texts of different clients into one encoder call, so a text's padded batch
shape depends on what else was queued; float32 matmuls of other shapes round differently.
"""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import openai
import pytest

pytestmark = pytest.mark.xdist_group("service")

TEXTS = [
    "PostgreSQL is a relational database management system.",
    "Attention is all you need.",
    "ein kurzer deutscher Satz",
    "?",
    "Tokens, tokens everywhere: " + "word " * 60,
]


def assert_same_vectors(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    cos = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert cos.min() >= 0.9999, cos
    assert np.abs(got - want).max() <= 1e-5


@pytest.fixture
def oai(server) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.url + "/v1", api_key=server.key, max_retries=0, timeout=120
    )


@pytest.fixture(scope="module")
def want(reference) -> np.ndarray:
    return reference.encode(TEXTS)


@pytest.mark.parametrize("encoding_format", [None, "float", "base64"])
def test_openai_client_gets_the_engines_vectors(oai, reference, want, encoding_format) -> None:
    kwargs = {} if encoding_format is None else {"encoding_format": encoding_format}
    response = oai.embeddings.create(input=TEXTS, model="anything", **kwargs)
    if encoding_format == "base64":  # the client leaves an explicit base64 undecoded
        import base64

        got = np.stack([np.frombuffer(base64.b64decode(d.embedding), "<f4") for d in response.data])
    else:
        got = np.array([d.embedding for d in response.data], dtype=np.float32)
    assert [d.index for d in response.data] == list(range(len(TEXTS)))
    assert_same_vectors(got, want)
    tokens = sum(len(ids) for ids in reference.tokenize(TEXTS))
    assert response.usage.prompt_tokens == response.usage.total_tokens == tokens
    assert response.model == oai.models.list().data[0].id


def test_a_single_string_is_one_embedding(oai, want) -> None:
    response = oai.embeddings.create(input=TEXTS[0], model="m", encoding_format="float")
    assert len(response.data) == 1
    assert_same_vectors(np.array([response.data[0].embedding], np.float32), want[:1])


def test_dimensions_other_than_the_models_are_refused(oai, reference) -> None:
    ok = oai.embeddings.create(input="x", model="m", dimensions=reference.dim)
    assert len(ok.data[0].embedding) == reference.dim
    with pytest.raises(openai.UnprocessableEntityError) as err:
        oai.embeddings.create(input="x", model="m", dimensions=reference.dim // 2)
    assert err.value.body["code"] == "invalid_dimensions"


def test_concurrent_clients_are_batched_and_get_their_own_vectors(server, reference) -> None:
    texts = [f"request {i}: " + "alpha beta gamma " * (1 + i % 7) for i in range(12)]

    def batches() -> float:
        metrics = httpx.get(server.url + "/metrics").text
        return next(
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("attnswitch_service_batches_total")
        )

    async def one(client: httpx.AsyncClient, text: str) -> np.ndarray:
        r = await client.post("/v1/embeddings", json={"input": [text]})
        assert r.status_code == 200, r.text
        return np.array(r.json()["data"][0]["embedding"], np.float32)

    async def all_at_once() -> list[np.ndarray]:
        async with httpx.AsyncClient(
            base_url=server.url, headers=server.headers(), timeout=120
        ) as client:
            return await asyncio.gather(*(one(client, t) for t in texts))

    before = batches()
    got = np.stack(asyncio.run(all_at_once()))
    calls = batches() - before
    assert_same_vectors(got, reference.encode(texts))
    assert 1 <= calls < len(texts)  # some encoder call served several clients


def test_metrics_expose_service_and_attention_metrics(client, server) -> None:
    client.post("/v1/embeddings", json={"input": "count me"}).raise_for_status()
    text = httpx.get(server.url + "/metrics").text
    for name in (
        "attnswitch_service_requests_total",
        "attnswitch_service_request_seconds",
        "attnswitch_service_tokens_total",
        "attnswitch_service_queue_depth",
        "attnswitch_service_memory_rss_bytes",
        "process_resident_memory_bytes",
        "attnswitch_attention_calls_total",
        "attnswitch_service_rejected_total",
    ):
        assert name in text, name
    assert 'route="/v1/embeddings"' in text
