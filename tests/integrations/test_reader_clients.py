"""A reader's answers through the MCP tools (over streamable HTTP with a bearer key, and over
stdio with the key in ATTNSWITCH_API_KEY, each through the MCP SDK's own client) and the
LangChain and LlamaIndex retrievers (`url=` and `api_key=` of a real `attnswitch serve`),
checked against the kernel: the tree of tests/reader_tree.py (per-folder modes, an ACL, a
copy of a public file in a folder only adm may enter), indexed by an admin's job on either
store; the readers daemon (groups daemon, adm) and bin (groups bin, staff), the admin root.

For each reader: a search is the admin's restricted to the files the kernel lets it read,
in the same order; k readable hits still come back (k = how many it may read, and one
less); `get_document` of a chunk or a path it may not read answers exactly as one that does
not exist; `index_status` counts only what it may read; no forbidden file name, folder
name or forbidden chunk's text appears in any answer. The servers (per store: the `serve`
and `mcp --http` over its index, one stdio process per reader) are started once per
module; slow tier, as the other adapters' tests over a served index."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from mcp_http import start_mcp_http
from reader_tree import KEYS, QUERIES, READERS, Served, View, served_tree, strings, view_of

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reader_clients")]

STARTUP_TIMEOUT_S = 180.0
UNKNOWN_ID = 424242
UNKNOWN_PATH = "public/no-such-page.html"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def tree(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The tree served and indexed on each store (tests/reader_tree.py)."""
    with served_tree(request, tmp_path_factory, "reader_clients") as served:
        yield served


def _mcp_args(tree: Served) -> list[str]:
    return ["-m", "attnswitch.cli", "mcp", "--db", tree.location, "--access-file", str(tree.access)]


@pytest.fixture(scope="module")
def mcp_url(tree: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`attnswitch mcp --http --access-file` over the tree's index, on a free loopback port
    (its URL read from the line it prints on stderr once it listens)."""
    pytest.importorskip("mcp", reason="the mcp extra")
    log = tmp_path_factory.mktemp("mcp") / "mcp.log"
    command = [sys.executable, *_mcp_args(tree), "--http", "--port", "0"]
    proc, url = start_mcp_http(command, log, STARTUP_TIMEOUT_S, dict(os.environ))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@asynccontextmanager
async def mcp_session(tree: Served, url: str, who: str, transport: str) -> AsyncIterator[Any]:
    """An initialised MCP `ClientSession` as `who`: over HTTP with its bearer key, or over
    stdio, `attnswitch mcp --access-file` spawned with its key in ATTNSWITCH_API_KEY."""
    from mcp import ClientSession

    if transport == "http":
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=120) as h,
            streamable_http_client(url, http_client=h) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
        return
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=_mcp_args(tree),
        env={**os.environ, "ATTNSWITCH_API_KEY": KEYS[who]},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _answer(result: Any) -> Any:
    """A tool's answer: its JSON (a dict), or a tool error's text (a str)."""
    if result.is_error:
        return re.sub(r"^Error executing tool \w+: ", "", result.content[0].text)
    return result.structured_content or json.loads(result.content[0].text)


def _paths(hit: dict) -> set[str]:
    return {hit["path"]} | {a["path"] for a in hit["also_at"]}


def assert_tells_nothing_forbidden(view: View, answers: list[Any]) -> None:
    """No forbidden file or folder name, and no forbidden chunk's text (nor a long part of
    one), in any string of `answers`."""
    names, secrets = view.forbidden_names(), view.forbidden_texts()
    assert names and secrets
    for answer in answers:
        for text in strings(answer):
            for name in names:
                assert name not in text, (name, text)
            for secret in secrets:
                assert secret not in text and (len(text) < 40 or text not in secret), text


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("who", READERS)
def test_a_readers_mcp_tools_answer_the_admins_restricted_to_what_the_kernel_lets_it_read(
    tree: Served, mcp_url: str, who: str, transport: str
) -> None:
    view = view_of(tree, who)
    allowed = view.allowed()
    assert 0 < len(allowed) < len(view.chunks)  # the reader is neither blind nor all-seeing
    total = len(view.chunks)

    async def main() -> None:
        async with mcp_session(tree, mcp_url, "root", "http") as admin:
            admin_order = {}
            for query in QUERIES:
                hits = _answer(await admin.call_tool("search", {"query": query, "k": total}))
                admin_order[query] = [h["chunk_id"] for h in hits["hits"]]
            assert admin_order == view.order  # the tool's ranking is the service's
            unknown_chunk = _answer(await admin.call_tool("get_document", {"chunk_id": UNKNOWN_ID}))
            unknown_path = _answer(await admin.call_tool("get_document", {"path": UNKNOWN_PATH}))
        assert isinstance(unknown_chunk, str) and isinstance(unknown_path, str)

        async with mcp_session(tree, mcp_url, who, transport) as reader:

            async def call(tool: str, arguments: dict) -> Any:
                answer = _answer(await reader.call_tool(tool, arguments))
                answers.append(answer)
                return answer

            answers: list[Any] = []
            for query in QUERIES:
                found = await call("search", {"query": query, "k": total})
                hits = found["hits"]
                assert [h["chunk_id"] for h in hits] == [
                    i for i in admin_order[query] if i in allowed
                ], query
                for h in hits:  # the path and every copy listed: readable, all of them
                    assert _paths(h) == view.chunks[h["chunk_id"]][0] & view.readable, h
                for k in (len(allowed), len(allowed) - 1):
                    assert len((await call("search", {"query": query, "k": k}))["hits"]) == k
                keyword = await call("search", {"query": query, "k": total, "mode": "keyword"})
                assert {h["chunk_id"] for h in keyword["hits"]} <= allowed
            for path in sorted(view.forbidden_paths()):
                narrowed = await call("search", {"query": QUERIES[0], "k": 5, "path": path})
                assert narrowed["hits"] == [], path

            for chunk_id in sorted(view.chunks):
                got = await call("get_document", {"chunk_id": chunk_id, "around": 10})
                if chunk_id in allowed:
                    assert not isinstance(got, str), (chunk_id, got)
                    assert got["path"] in view.readable
                    assert chunk_id in [c["chunk_id"] for c in got["chunks"]]
                    assert {c["chunk_id"] for c in got["chunks"]} <= allowed
                else:  # as a chunk that does not exist, in the same words
                    assert got == unknown_chunk.replace(str(UNKNOWN_ID), str(chunk_id))
            for path in sorted(view.readable):
                document = await call("get_document", {"path": path})
                assert not isinstance(document, str) and document["text"], path
            for path in sorted(view.forbidden_paths()):  # the reader's own words echoed
                refused = _answer(await reader.call_tool("get_document", {"path": path}))
                assert refused == unknown_path.replace(UNKNOWN_PATH, path)

            status = await call("index_status", {})
            assert status["documents"] == len(view.readable)
            # a copy's chunks count once per readable copy, as the admin's index counts them
            assert status["chunks"] == sum(len(view.chunks[i][0] & view.readable) for i in allowed)
            assert not {"skipped", "skipped_by_reason", "runs"} & set(status)
        assert_tells_nothing_forbidden(view, answers)

    asyncio.run(main())


def _restricted(view: View, query: str) -> list[int]:
    return [i for i in view.order[query] if i in view.allowed()]


def _check_documents(view: View, query: str, got: list[tuple[int, str, dict]], k: int) -> None:
    """`got` ((chunk id, text, metadata) per document, best first): the admin's first `k`
    restricted to what the reader may read, with readable paths only, telling nothing
    forbidden."""
    assert [i for i, _, _ in got] == _restricted(view, query)[:k], query
    for chunk_id, text, meta in got:
        assert text == view.chunks[chunk_id][1]
        assert _paths(meta) == view.chunks[chunk_id][0] & view.readable, meta
    assert_tells_nothing_forbidden(view, [[text, meta] for _, text, meta in got])


@pytest.mark.parametrize("who", READERS)
def test_the_langchain_retriever_over_url_gives_a_reader_the_admins_restricted(
    tree: Served, who: str
) -> None:
    pytest.importorskip("langchain_core", reason="the langchain extra")
    from attnswitch.integrations.langchain import AttnswitchRetriever

    view = view_of(tree, who)
    allowed = len(view.allowed())
    admin = AttnswitchRetriever(url=tree.server.url, api_key=KEYS["root"], k=len(view.chunks))
    for query in QUERIES:
        assert [d.metadata["chunk_id"] for d in admin.invoke(query)] == view.order[query]
        for k in (len(view.chunks), allowed, allowed - 1):
            reader = AttnswitchRetriever(url=tree.server.url, api_key=KEYS[who], k=k)
            docs = reader.invoke(query) if k != allowed else asyncio.run(reader.ainvoke(query))
            got = [(d.metadata["chunk_id"], d.page_content, d.metadata) for d in docs]
            _check_documents(view, query, got, k)


@pytest.mark.parametrize("who", READERS)
def test_the_llamaindex_retriever_over_url_gives_a_reader_the_admins_restricted(
    tree: Served, who: str
) -> None:
    pytest.importorskip("llama_index.core", reason="the llamaindex extra")
    from attnswitch.integrations.llamaindex import AttnswitchRetriever

    view = view_of(tree, who)
    allowed = len(view.allowed())
    admin = AttnswitchRetriever(url=tree.server.url, api_key=KEYS["root"], k=len(view.chunks))
    for query in QUERIES:
        assert [n.node.metadata["chunk_id"] for n in admin.retrieve(query)] == view.order[query]
        for k in (len(view.chunks), allowed, allowed - 1):
            reader = AttnswitchRetriever(url=tree.server.url, api_key=KEYS[who], k=k)
            nodes = reader.retrieve(query) if k != allowed else asyncio.run(reader.aretrieve(query))
            got = [
                (n.node.metadata["chunk_id"], n.node.get_content(), n.node.metadata) for n in nodes
            ]
            _check_documents(view, query, got, k)
