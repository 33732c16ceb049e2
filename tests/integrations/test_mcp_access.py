"""`attnswitch mcp --http --access-file`: each tool call runs as its key's principal, through
the MCP SDK's own client. A reader's index_status leaves out the whole index's skipped files
and runs, its index_folder and get_document are tool errors, its search is restricted to
what it may read; an admin's calls are as before; an unknown key is 401."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_mcp import _args, error, payload

from mcp_http import start_mcp_http

pytest.importorskip("mcp", reason="the mcp extra")

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from access_testing import access_text  # noqa: E402

READER_KEY = "mcp-reader-key-2a9d"
ADMIN_KEY = "mcp-admin-key-c04e"
STARTUP_TIMEOUT_S = 120.0
ACCESS = access_text(READER_KEY, ADMIN_KEY)


def start_http_with_access(db: Path, allowed: Path, workdir: Path) -> tuple[subprocess.Popen, str]:
    """`attnswitch mcp --http --access-file` on a free loopback port; its URL, read from the
    line it prints on stderr once it listens."""
    (workdir / "access.toml").write_text(ACCESS)
    log = workdir / "mcp.log"
    command = [sys.executable, *_args(db, allowed), "--http", "--port", "0"]
    command += ["--access-file", str(workdir / "access.toml")]
    return start_mcp_http(command, log, STARTUP_TIMEOUT_S, dict(os.environ))


def test_each_call_runs_as_its_keys_principal(indexed, tmp_path: Path) -> None:
    import httpx
    import httpx2

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    proc, url = start_http_with_access(indexed.db, allowed, tmp_path)
    try:
        refused = httpx.post(url, json={}, headers={"Authorization": "Bearer nope"})
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"

        async def call(key: str, tool: str, arguments: dict):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as h,
                streamable_http_client(url, http_client=h) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool(tool, arguments)

        async def main() -> None:
            admin_status = payload(await call(ADMIN_KEY, "index_status", {}))
            assert {"skipped", "skipped_by_reason", "runs"} <= set(admin_status)
            reader_status = payload(await call(READER_KEY, "index_status", {}))
            assert not {"skipped", "skipped_by_reason", "runs"} & set(reader_status)

            assert error(await call(READER_KEY, "index_folder", {"folder": "."})) == (
                "index_folder: expected an admin's key, got reader 'alice'"
            )
            # the index lies under the test's temporary folder, which only root may enter
            # (mode 700): alice may read none of it, and is told so as of a chunk that
            # does not exist, in the same words
            assert error(await call(READER_KEY, "get_document", {"chunk_id": 1})) == error(
                await call(ADMIN_KEY, "get_document", {"chunk_id": 424242})
            ).replace("424242", "1")
            assert payload(await call(ADMIN_KEY, "get_document", {"chunk_id": 1}))["chunks"]
            hits = payload(await call(ADMIN_KEY, "search", {"query": "update rows"}))["hits"]
            assert hits
            mine = payload(await call(READER_KEY, "search", {"query": "update rows"}))
            assert mine["hits"] == []
            assert payload(await call(READER_KEY, "index_status", {}))["documents"] == 0

        asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait(30)
