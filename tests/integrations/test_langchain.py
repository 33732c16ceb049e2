"""LangChain over attnswitch with LangChain's own runnables: the retriever piped into a
prompt template (local index and a real `attnswitch serve`, sync and async), the embeddings
class against `attnswitch.encode`, the loader against what the index stores, and bad values
refused as pydantic's `ValidationError` naming the field."""

from __future__ import annotations

import asyncio
from collections import Counter

import numpy as np
import pytest
from adapter_testing import PAGES, QUESTION, UPDATE_PAGE, hit_fields

pytest.importorskip("langchain_core", reason="the langchain extra")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from attnswitch.integrations.index_client import RemoteSearchError  # noqa: E402
from attnswitch.integrations.langchain import (  # noqa: E402
    AttnswitchEmbeddings,
    AttnswitchLoader,
    AttnswitchRetriever,
)

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from these passages only:\n\n{context}"),
        ("human", "{question}"),
    ]
)


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(f"[{d.metadata['path']}] {d.page_content}" for d in docs)


def chain(retriever: AttnswitchRetriever):
    return {"context": retriever | format_docs, "question": RunnablePassthrough()} | PROMPT


def test_a_chain_from_the_retriever_to_the_prompt(indexed) -> None:
    retriever = AttnswitchRetriever(db=indexed.db, k=3)
    prompt = chain(retriever).invoke(QUESTION)
    system, human = prompt.to_messages()
    assert human.content == QUESTION
    assert f"[{UPDATE_PAGE}]" in system.content and "UPDATE weather" in system.content

    docs = retriever.invoke(QUESTION)
    assert len(docs) == 3 and docs[0].metadata["path"] == UPDATE_PAGE
    meta = docs[0].metadata
    assert set(meta) == hit_fields() - {"text"}  # every hit field but the text, generically
    assert meta["rank"] == 1 and meta["chunk_id"] >= 1 and meta["heading_path"]
    assert meta["root"] == str(indexed.folder)
    assert [d.metadata["rank"] for d in docs] == [1, 2, 3]


def test_the_served_index_gives_the_same_documents_sync_and_async(indexed, served) -> None:
    local = AttnswitchRetriever(db=indexed.db, k=4, mode="keyword")
    remote = AttnswitchRetriever(url=served, k=4, mode="keyword")
    want = [
        (d.metadata["chunk_id"], d.metadata["path"], d.page_content) for d in local.invoke(QUESTION)
    ]
    for docs in (
        remote.invoke(QUESTION),
        asyncio.run(remote.ainvoke(QUESTION)),
        asyncio.run(local.ainvoke(QUESTION)),
    ):
        assert [(d.metadata["chunk_id"], d.metadata["path"], d.page_content) for d in docs] == want
    # the service never shows the server's absolute path of a root
    assert not remote.invoke(QUESTION)[0].metadata["root"].startswith("/")
    prompt = chain(remote).invoke(QUESTION)
    assert "UPDATE weather" in prompt.to_messages()[0].content


@pytest.mark.parametrize("where", ["local", "served"])
def test_filters_reach_the_index(indexed, served, where: str) -> None:
    source = {"db": indexed.db} if where == "local" else {"url": served}
    only = AttnswitchRetriever(**source, k=5, path=UPDATE_PAGE).invoke(QUESTION)
    assert only and {d.metadata["path"] for d in only} == {UPDATE_PAGE}
    others = AttnswitchRetriever(**source, k=5, path=["*start*", "*conclusion*"])
    assert {d.metadata["path"] for d in others.invoke(QUESTION)} <= set(PAGES) - {UPDATE_PAGE}
    assert AttnswitchRetriever(**source, type="pdf").invoke(QUESTION) == []
    assert AttnswitchRetriever(**source, modified_after="2100-01-01").invoke(QUESTION) == []


@pytest.mark.parametrize("where", ["local", "served"])
def test_grouped_by_document_one_document_each_with_how_many_more(
    indexed, served, where: str
) -> None:
    source = {"db": indexed.db} if where == "local" else {"url": served}
    chunks = AttnswitchRetriever(**source, k=100).invoke(QUESTION)
    per_path = Counter(d.metadata["path"] for d in chunks)
    assert max(per_path.values()) > 1  # some page has several matching chunks
    assert all(d.metadata["more_in_document"] == 0 for d in chunks)

    grouped = AttnswitchRetriever(**source, k=100, group="document")
    for docs in (grouped.invoke(QUESTION), asyncio.run(grouped.ainvoke(QUESTION))):
        paths = [d.metadata["path"] for d in docs]
        assert len(paths) == len(set(paths)) and set(paths) == set(per_path)
        assert paths[0] == UPDATE_PAGE and [d.metadata["rank"] for d in docs] == [
            *range(1, len(docs) + 1)
        ]
        # every other chunk of a document that matched is counted on its one document
        assert {d.metadata["path"]: d.metadata["more_in_document"] for d in docs} == {
            path: n - 1 for path, n in per_path.items()
        }
    two = AttnswitchRetriever(**source, k=2, group="document").invoke(QUESTION)
    assert len({d.metadata["path"] for d in two}) == 2
    assert "UPDATE weather" in format_docs(two)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"group": "page"}, "group: expected one of chunk, document, got 'page'"),
        ({"mode": "fuzzy"}, "mode: expected one of hybrid, dense, keyword, got 'fuzzy'"),
        ({"k": 0}, "k: expected an integer from 1 to 100, got 0"),
        ({"k": 101}, "k: expected an integer from 1 to 100, got 101"),
        ({"modified_after": "yesterday"}, "modified_after: expected"),
        ({"url": "ftp://host"}, "url: expected the http:// or https:// address"),
        ({"db": "x", "url": "http://127.0.0.1:1"}, "db, url: expected one of them"),
    ],
)
def test_bad_values_are_validation_errors_naming_the_field(fields, message) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
        AttnswitchRetriever(**fields)


def test_a_search_the_service_refuses_says_why(served) -> None:
    from attnswitch.service.config import ServiceConfig

    # a query past the service's body limit: only the service knows it (k, mode and the
    # filters are checked by the adapter, as the service checks them: indexing.requests)
    query = "x" * (ServiceConfig().max_body_bytes + 1)
    with pytest.raises(RemoteSearchError, match=r"/v1/search: the service answered 413: "):
        AttnswitchRetriever(url=served).invoke(query)


def test_embeddings_are_attnswitch_encode() -> None:
    import attnswitch

    texts = ["UPDATE changes rows", "a window function"]
    emb = AttnswitchEmbeddings()
    got = np.array(emb.embed_documents(texts))
    np.testing.assert_allclose(got, attnswitch.encode(texts), atol=1e-5)
    np.testing.assert_allclose(emb.embed_query(texts[0]), got[0], atol=1e-5)
    np.testing.assert_allclose(asyncio.run(emb.aembed_documents(texts)), got, atol=1e-5)
    assert emb.embed_documents([]) == []
    with pytest.raises(ValidationError, match="engine: expected one of auto"):
        AttnswitchEmbeddings(engine="nope")
    with pytest.raises(ValidationError, match="precision: expected one of"):
        AttnswitchEmbeddings(precision="fp8")


def test_the_loader_gives_the_chunks_the_index_stores(indexed) -> None:
    from attnswitch.indexing.location import open_store

    docs = AttnswitchLoader(indexed.folder).load()
    with open_store(indexed.db) as store:
        stored = {
            (r.source, r.ordinal): r
            for s in PAGES
            for r in store.document_chunks(str(indexed.folder), s)
        }
    assert {(d.metadata["path"], d.metadata["ordinal"]): d.page_content for d in docs} == {
        key: row.text for key, row in stored.items()
    }
    first = next(d for d in docs if d.metadata["path"] == UPDATE_PAGE)
    row = stored[(UPDATE_PAGE, 0)]
    assert first.metadata["heading_path"] == list(row.heading_path)
    assert first.metadata["kind"] == "html" and first.metadata["root"] == str(indexed.folder)

    blocks = AttnswitchLoader(indexed.folder / UPDATE_PAGE, by="blocks").load()
    assert blocks[0].metadata["block_kind"] == "heading"
    assert {b.metadata["path"] for b in blocks} == {"tutorial-update.html"}
    whole = AttnswitchLoader(indexed.folder, by="documents").load()
    assert sorted(d.metadata["path"] for d in whole) == sorted(PAGES)
    with pytest.raises(ValueError, match="by: expected one of chunks, blocks, documents"):
        AttnswitchLoader(indexed.folder, by="pages")
    with pytest.raises(ValueError, match="path: expected an existing folder or file"):
        AttnswitchLoader(indexed.folder / "missing")
