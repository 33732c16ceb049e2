"""The MCP server (`attnswitch mcp`) through the MCP SDK's own `ClientSession`: spawned over
stdio (`python -m attnswitch.cli mcp ...`, as an assistant starts it) and over streamable
HTTP with an API key, every tool called, and refusals returned as the SDK's tool errors
(`is_error`) with a message naming the argument."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from adapter_testing import PAGES, QUESTION, UPDATE_PAGE, copy_pages

from mcp_http import start_mcp_http

pytest.importorskip("mcp", reason="the mcp extra")

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

KEY = "mcp-test-key-41c7"
TOOLS = {"search", "get_document", "index_status", "index_folder"}
STARTUP_TIMEOUT_S = 120.0


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    """A root the server may index, holding one new page."""
    return copy_pages(tmp_path / "allowed", ("postgresql/tutorial-window.html",))


def _args(db: Path, allowed: Path) -> list[str]:
    return ["-m", "attnswitch.cli", "mcp", "--db", str(db), "--allow-index", str(allowed)]


@asynccontextmanager
async def stdio_session(db: Path, allowed: Path):
    params = StdioServerParameters(
        command=sys.executable, args=_args(db, allowed), env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def start_http(db: Path, allowed: Path, workdir: Path) -> tuple[subprocess.Popen, str]:
    """`attnswitch mcp --http` on a free loopback port with a key file; its URL, read from
    the line it prints on stderr once it listens (polled, as service/launch.py does)."""
    (workdir / "keys").write_text(KEY + "\n")
    log = workdir / "mcp.log"
    command = [sys.executable, *_args(db, allowed), "--http", "--port", "0"]
    command += ["--api-key-file", str(workdir / "keys")]
    return start_mcp_http(command, log, STARTUP_TIMEOUT_S, dict(os.environ))


def payload(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content or json.loads(result.content[0].text)


def error(result) -> str:
    """A tool error's message, less the SDK's "Error executing tool NAME: " prefix."""
    assert result.is_error, result
    return re.sub(r"^Error executing tool \w+: ", "", result.content[0].text)


async def exercise(session: ClientSession, indexed, allowed: Path, private: bool) -> None:
    """Every tool, and a refusal through each."""
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    assert all(len(t.description) > 100 for t in tools.values())
    assert set(tools["search"].input_schema["properties"]) >= {
        "query",
        "k",
        "mode",
        "path",
        "type",
        "modified_after",
        "modified_before",
    }
    # the stores' ids, as the HTTP route takes them (out of them: tests/security)
    chunk_id = tools["get_document"].input_schema["properties"]["chunk_id"]
    assert (chunk_id["minimum"], chunk_id["maximum"]) == (1, 2**63 - 1)

    found = payload(await session.call_tool("search", {"query": QUESTION, "k": 3}))
    hits = found["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3] and hits[0]["path"] == UPDATE_PAGE
    assert "UPDATE weather" in hits[0]["text"] and hits[0]["where"].startswith(UPDATE_PAGE)
    root = hits[0]["root"]
    assert root == (indexed.folder.name if private else str(indexed.folder))
    only = payload(
        await session.call_tool(
            "search", {"query": QUESTION, "mode": "keyword", "path": ["*start*"], "type": "html"}
        )
    )
    assert {h["path"] for h in only["hits"]} == {"postgresql/tutorial-start.html"}
    # the path as a hit shows it, its folder's name first (issue 53, point 8)
    shown = f"{indexed.folder.name}/{UPDATE_PAGE}"
    narrowed = payload(await session.call_tool("search", {"query": QUESTION, "path": shown}))
    assert narrowed["hits"] and {h["path"] for h in narrowed["hits"]} == {UPDATE_PAGE}
    none = payload(await session.call_tool("search", {"query": QUESTION, "type": "pdf"}))
    assert none["hits"] == [] and none["note"]

    doc = payload(await session.call_tool("get_document", {"path": UPDATE_PAGE}))
    assert doc["path"] == UPDATE_PAGE and "UPDATE weather" in doc["text"]
    assert hits[0]["chunk_id"] in [c["chunk_id"] for c in doc["chunks"]]
    assert not doc["truncated"]
    cut = payload(await session.call_tool("get_document", {"path": UPDATE_PAGE, "max_chars": 40}))
    assert cut["truncated"] and len(cut["text"]) == 40
    near = payload(
        await session.call_tool("get_document", {"chunk_id": hits[0]["chunk_id"], "around": 1})
    )
    assert hits[0]["chunk_id"] in [c["chunk_id"] for c in near["chunks"]]
    assert near["path"] == UPDATE_PAGE

    status = payload(await session.call_tool("index_status", {}))
    assert status["documents"] == len(PAGES) and status["chunks"] > 0
    assert "minilm" in status["model"]["name"].lower()

    # refusals: the SDK's schema checks, and attnswitch's own checks as tool errors
    assert "mode" in error(await session.call_tool("search", {"query": "x", "mode": "fuzzy"}))
    assert error(
        await session.call_tool("search", {"query": "x", "modified_after": "soon"})
    ).startswith("modified_after: expected")
    assert error(await session.call_tool("get_document", {"path": "nope.txt"})).startswith(
        "path: expected the path of an indexed document"
    )
    assert error(await session.call_tool("get_document", {})).startswith(
        "path, chunk_id: expected exactly one of them, got neither"
    )
    assert error(await session.call_tool("get_document", {"chunk_id": 999_999})).startswith(
        "chunk_id: expected the id of a chunk"
    )
    outside = error(await session.call_tool("index_folder", {"folder": str(indexed.folder)}))
    assert outside.startswith("folder: expected a folder inside an allowed root (allowed)")
    assert error(await session.call_tool("index_folder", {"folder": "../.."})).startswith(
        "folder: expected a folder inside an allowed root"
    )


async def index_through_mcp(session: ClientSession, allowed: Path) -> None:
    ran = payload(await session.call_tool("index_folder", {"folder": str(allowed)}))
    assert ran["indexed"] == 1 and ran["status"] == "completed"
    found = payload(
        await session.call_tool(
            "search", {"query": "window functions", "path": "postgresql/tutorial-window.html"}
        )
    )
    assert found["hits"] and found["hits"][0]["path"] == "postgresql/tutorial-window.html"


def test_every_tool_over_stdio(indexed, allowed: Path, tmp_path: Path) -> None:
    import shutil

    db = tmp_path / "index.sqlite3"  # a copy: index_folder writes to it
    shutil.copy2(indexed.db, db)

    async def main() -> None:
        async with stdio_session(db, allowed) as session:
            await exercise(session, indexed, allowed, private=False)
            await index_through_mcp(session, allowed)

    asyncio.run(main())


def test_every_tool_over_http_with_a_key(indexed, allowed: Path, tmp_path: Path) -> None:
    import httpx
    import httpx2

    proc, url = start_http(indexed.db, allowed, tmp_path)
    try:
        # the same authentication as `attnswitch serve`: no key, or a wrong one, is 401
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            refused = httpx.post(url, json={}, headers=headers)
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] in ("missing_api_key", "invalid_api_key")

        async def main() -> None:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await exercise(session, indexed, allowed, private=True)

        asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_non_loopback_host_without_keys_is_refused(indexed) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnswitch.cli",
            "mcp",
            "--db",
            str(indexed.db),
            "--http",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "host: expected a loopback address without api keys" in done.stderr


def test_an_allowed_root_must_be_a_folder(indexed, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnswitch.cli",
            "mcp",
            "--db",
            str(indexed.db),
            "--allow-index",
            str(tmp_path / "missing"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "allow-index: expected an existing folder" in done.stderr
