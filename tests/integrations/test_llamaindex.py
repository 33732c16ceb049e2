"""LlamaIndex over attnswitch with LlamaIndex's own pieces: a `RetrieverQueryEngine` whose
retrieval is real (local index and a real `attnswitch serve`) and whose answer step is
LlamaIndex's `MockLLM` (no LLM weights are reachable here; it echoes its prompt, so the
answer shows what retrieval handed it), the embedding class against `attnswitch.encode`,
the reader, and bad values refused naming the argument."""

from __future__ import annotations

import asyncio
from collections import Counter

import numpy as np
import pytest
from adapter_testing import PAGES, QUESTION, UPDATE_PAGE, hit_fields

pytest.importorskip("llama_index.core", reason="the llamaindex extra")

from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import MetadataMode  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from attnswitch.integrations.llamaindex import (  # noqa: E402
    AttnswitchEmbedding,
    AttnswitchReader,
    AttnswitchRetriever,
)


def test_a_query_engine_answers_from_what_the_retriever_found(indexed) -> None:
    engine = RetrieverQueryEngine.from_args(AttnswitchRetriever(indexed.db, k=3), llm=MockLLM())
    response = engine.query(QUESTION)
    assert response.source_nodes[0].node.metadata["path"] == UPDATE_PAGE
    # MockLLM echoes the prompt it got: the retrieved text and its path reached the LLM
    assert "UPDATE weather" in str(response) and f"path: {UPDATE_PAGE}" in str(response)
    assert "dense_similarity" not in str(response)  # the other metadata stays out

    node = response.source_nodes[0]
    assert set(node.node.metadata) == hit_fields() - {"text"}
    assert node.score == node.node.metadata["score"]
    assert node.node.node_id == f"attnswitch-chunk-{node.node.metadata['chunk_id']}"
    assert node.node.get_content(MetadataMode.EMBED) == node.node.get_content()


def test_the_served_index_gives_the_same_nodes_sync_and_async(indexed, served) -> None:
    local = AttnswitchRetriever(indexed.db, k=4, mode="dense")
    remote = AttnswitchRetriever(url=served, k=4, mode="dense")
    want = [(n.node.node_id, n.node.get_content()) for n in local.retrieve(QUESTION)]
    for nodes in (
        remote.retrieve(QUESTION),
        asyncio.run(remote.aretrieve(QUESTION)),
        asyncio.run(local.aretrieve(QUESTION)),
    ):
        assert [(n.node.node_id, n.node.get_content()) for n in nodes] == want
    engine = RetrieverQueryEngine.from_args(remote, llm=MockLLM())
    assert "UPDATE weather" in str(asyncio.run(engine.aquery(QUESTION)))


@pytest.mark.parametrize("where", ["local", "served"])
def test_filters_reach_the_index(indexed, served, where: str) -> None:
    source = {"db": indexed.db} if where == "local" else {"url": served}
    nodes = AttnswitchRetriever(**source, k=5, type="html", path="postgresql/").retrieve(QUESTION)
    assert len(nodes) == 5 and {n.node.metadata["path"] for n in nodes} <= set(PAGES)
    assert AttnswitchRetriever(**source, type=[".pdf", "docx"]).retrieve(QUESTION) == []


@pytest.mark.parametrize("where", ["local", "served"])
def test_grouped_by_document_one_node_per_document_with_how_many_more(
    indexed, served, where: str
) -> None:
    source = {"db": indexed.db} if where == "local" else {"url": served}
    chunks = AttnswitchRetriever(**source, k=100, mode="dense").retrieve(QUESTION)
    per_path = Counter(n.node.metadata["path"] for n in chunks)
    assert max(per_path.values()) > 1  # some page has several matching chunks
    assert all(n.node.metadata["more_in_document"] == 0 for n in chunks)

    grouped = AttnswitchRetriever(**source, k=100, mode="dense", group="document")
    for nodes in (grouped.retrieve(QUESTION), asyncio.run(grouped.aretrieve(QUESTION))):
        paths = [n.node.metadata["path"] for n in nodes]
        assert len(paths) == len(set(paths)) and set(paths) == set(per_path)
        assert {n.node.metadata["path"]: n.node.metadata["more_in_document"] for n in nodes} == {
            path: count - 1 for path, count in per_path.items()
        }
        # each document's node is its best chunk: the one the ungrouped search ranked first
        best = {}
        for n in chunks:
            best.setdefault(n.node.metadata["path"], n.node.node_id)
        assert {n.node.metadata["path"]: n.node.node_id for n in nodes} == best
    engine = RetrieverQueryEngine.from_args(
        AttnswitchRetriever(**source, k=2, group="document"), llm=MockLLM()
    )
    response = engine.query(QUESTION)
    assert len({n.node.metadata["path"] for n in response.source_nodes}) == 2
    assert "UPDATE weather" in str(response)
    assert "more_in_document" not in str(response)  # metadata for code, not for the LLM


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group": "page"}, "group: expected one of chunk, document, got 'page'"),
        ({"mode": "fuzzy"}, "mode: expected one of hybrid, dense, keyword, got 'fuzzy'"),
        ({"k": -1}, "k: expected an integer from 1 to 100, got -1"),
        ({"modified_before": "2024-13-40"}, "modified_before: expected"),
        (
            {"modified_after": "2024-02-01", "modified_before": "2024-01-01"},
            "modified_before: expected a time not before modified_after",
        ),
    ],
)
def test_bad_values_are_value_errors_naming_the_argument(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        AttnswitchRetriever(**kwargs)


def test_the_embedding_is_attnswitch_encode() -> None:
    import attnswitch

    texts = ["UPDATE changes rows", "a window function", "transactions"]
    emb = AttnswitchEmbedding(embed_batch_size=2)
    want = attnswitch.encode(texts)
    np.testing.assert_allclose(emb.get_text_embedding_batch(texts), want, atol=1e-5)
    np.testing.assert_allclose(emb.get_query_embedding(texts[0]), want[0], atol=1e-5)
    np.testing.assert_allclose(asyncio.run(emb.aget_query_embedding(texts[1])), want[1], atol=1e-5)
    np.testing.assert_allclose(asyncio.run(emb.aget_text_embedding_batch(texts)), want, atol=1e-5)
    with pytest.raises(ValidationError, match="precision: expected one of"):
        AttnswitchEmbedding(precision="fp8")


def test_the_reader_reads_every_page(indexed) -> None:
    reader = AttnswitchReader(by="documents")
    docs = reader.load_data(indexed.folder)
    assert sorted(d.metadata["path"] for d in docs) == sorted(PAGES)
    assert all(d.metadata["kind"] == "html" for d in docs) and reader.skipped == []
    chunks = AttnswitchReader().load_data(indexed.folder / UPDATE_PAGE)
    assert chunks[0].metadata["heading_path"] and "UPDATE" in chunks[0].text
    with pytest.raises(ValueError, match="by: expected one of"):
        AttnswitchReader(by="nodes")
