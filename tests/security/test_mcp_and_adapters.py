"""The MCP server and the LangChain/LlamaIndex adapters under hostile input (issue 50,
defects 9, 11, 12 and the minor ones), each against real processes and real stores:

- `attnswitch mcp --http` keeps at most `--max-sessions` sessions open: an `initialize`
  past them is answered 503 with a JSON-RPC error while the open ones go on, and a session
  idle for `--session-idle-minutes` is closed, freeing its place (counted by the sessions
  the server grants, and by its log);
- `get_document` with a chunk_id outside the stores' ids (2**70, 2**63, 0) is a tool error
  in one line naming chunk_id, on a SQLite and a PostgreSQL index (was an OverflowError);
- every malformed message on stdio (not JSON, a batch, no method, an id that is an
  object, an array, null, a fraction or a boolean, ...) gets a JSON-RPC error reply, with
  the request's id when it has a usable one (was silence: the client waited forever);
- a `url=` answering 200 with what is not a search's answer, and a damaged `db=`, give the
  adapters' own `IndexSearchError` naming what was wrong, sync and async (was
  JSONDecodeError, KeyError, TypeError, sqlite3.DatabaseError);
- `attnswitch search -k 101` is refused in one line naming -k, at the service's limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import re
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from security_testing import STARTUP_TIMEOUT_S, corrupt_index
from typer.testing import CliRunner

from mcp_http import start_mcp_http

pytestmark = pytest.mark.xdist_group("security")

REPLY_TIMEOUT_S = 60.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "hostile-client", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
REFUSED_SESSION = "Refusing to open a new session"


def mcp_command(db: Path | str, *args: str) -> list[str]:
    return [sys.executable, "-m", "attnswitch.cli", "mcp", "--db", str(db), *args]


# ---- HTTP sessions (defect 9) ----------------------------------------------------------


@contextlib.contextmanager
def http_server(workdir: Path, *args: str):
    """`attnswitch mcp --http` on a free loopback port, keyless; (its URL, its log file),
    the URL read from the line it prints once it listens. Its log lines are not wrapped."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "mcp.log"
    command = mcp_command(workdir / "data", "--http", "--port", "0", *args)
    env = {**os.environ, "COLUMNS": "1000"}
    proc, url = start_mcp_http(command, log, STARTUP_TIMEOUT_S, env)
    try:
        yield url, log
    finally:
        proc.terminate()
        proc.wait(30)


def initialize(client: httpx.Client, url: str) -> httpx.Response:
    return client.post(url, json=INITIALIZE, headers=MCP_HEADERS)


def ping(client: httpx.Client, url: str, session: str) -> httpx.Response:
    return client.post(
        url,
        json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
        headers={
            **MCP_HEADERS,
            "mcp-session-id": session,
            "mcp-protocol-version": INITIALIZE["params"]["protocolVersion"],
        },
    )


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert "mcp-session-id" not in response.headers
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["message"] == "Too many open sessions", body


@pytest.mark.slow
def test_http_sessions_past_the_default_cap_are_refused_and_the_open_ones_go_on(
    tmp_path: Path,
) -> None:
    from attnswitch.integrations.mcp_sessions import DEFAULT_MAX_SESSIONS

    extra = 20
    with http_server(tmp_path) as (url, log), httpx.Client(timeout=60) as client:
        answers = [initialize(client, url) for _ in range(DEFAULT_MAX_SESSIONS + extra)]
        granted = [r.headers["mcp-session-id"] for r in answers if r.status_code == 200]
        # the live session count is bounded: exactly the cap granted, every other refused
        assert len(set(granted)) == DEFAULT_MAX_SESSIONS, len(granted)
        for refused in answers[DEFAULT_MAX_SESSIONS:]:
            assert_refused(refused)
        assert ping(client, url, granted[0]).status_code == 200  # the open ones go on
        # a session the client ends frees its place, for one session only
        assert (
            client.delete(url, headers={**MCP_HEADERS, "mcp-session-id": granted[0]}).status_code
            == 200
        )
        assert ping(client, url, granted[0]).status_code == 404
        assert initialize(client, url).status_code == 200
        assert_refused(initialize(client, url))
        assert log.read_text().count(REFUSED_SESSION) == extra + 1, log.read_text()


@pytest.mark.slow
def test_an_idle_http_session_is_closed_and_frees_its_place(tmp_path: Path) -> None:
    # 0.02 minutes: 1.2 s without a request in flight
    with (
        http_server(tmp_path, "--max-sessions", "2", "--session-idle-minutes", "0.02") as (
            url,
            log,
        ),
        httpx.Client(timeout=60) as client,
    ):
        first, second = (initialize(client, url) for _ in range(2))
        assert first.status_code == second.status_code == 200
        assert_refused(initialize(client, url))
        # polled by new sessions only: a request to an open one would keep it alive
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while (third := initialize(client, url)).status_code != 200:
            assert_refused(third)
            assert time.monotonic() < deadline, "no idle session was ever closed"
            time.sleep(0.1)
        assert ping(client, url, first.headers["mcp-session-id"]).status_code == 404
        assert ping(client, url, third.headers["mcp-session-id"]).status_code == 200


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--max-sessions", "0", "max_sessions: expected an integer from 1 to 10,000, got 0"),
        ("--max-sessions", "10001", "max_sessions: expected an integer from 1 to 10,000"),
        ("--session-idle-minutes", "0", "session_idle_minutes: expected a number of minutes"),
        ("--session-idle-minutes", "inf", "session_idle_minutes: expected a number of minutes"),
    ],
)
def test_session_settings_out_of_range_are_refused_in_one_line(
    tmp_path, option, value, message
) -> None:
    done = subprocess.run(
        mcp_command(tmp_path / "data", "--http", "--port", "0", option, value),
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"attnswitch mcp: {message}"), done.stderr


# ---- get_document's chunk_id (defect 11), both stores ------------------------------------


def small_index(location: Path | str, folder: Path) -> list[int]:
    """A real index (SQLite file or PostgreSQL database) holding one document of two
    chunks; their ids."""
    from attnswitch.documents.ingest import Document
    from attnswitch.indexing.location import open_store
    from attnswitch.indexing.store import ChunkRecord

    if isinstance(location, Path):
        location.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    doc = Document(
        root=str(folder),
        source="a.txt",
        path=folder / "a.txt",
        size=9,
        mtime_ns=1,
        sha256="0" * 64,
        kind="text",
        text="some text",
    )
    with open_store(location) as store:
        store.write_document(
            doc,
            [ChunkRecord("some", 1, 0, 4), ChunkRecord("text", 1, 5, 9)],
            np.eye(2, 8, dtype=np.float32),
        )
        return sorted(c.id for c in store.document_chunks(str(folder), "a.txt"))


@pytest.mark.slow
def test_get_document_with_a_chunk_id_out_of_range_is_a_tool_error_naming_it(
    location, tmp_path: Path
) -> None:
    pytest.importorskip("mcp", reason="the mcp extra")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    ids = small_index(location, tmp_path / "docs")
    params = StdioServerParameters(
        command=sys.executable, args=mcp_command(location)[1:], env=dict(os.environ)
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            found = await session.call_tool("get_document", {"chunk_id": ids[0]})
            assert not found.is_error, found.content
            assert [c["chunk_id"] for c in found.structured_content["chunks"]] == ids
            for chunk_id in (2**70, 2**63, 0, -1):
                result = await session.call_tool("get_document", {"chunk_id": chunk_id})
                assert result.is_error, result
                text = result.content[0].text
                assert "\n" not in text, text
                assert re.sub(r"^Error executing tool \w+: ", "", text) == (
                    f"chunk_id: expected an integer from 1 to {2**63 - 1} (the chunk_id of a "
                    f"search hit), got {chunk_id}"
                )
            missing = await session.call_tool("get_document", {"chunk_id": 2**63 - 1})
            assert "chunk_id: expected the id of a chunk" in missing.content[0].text

    asyncio.run(main())


# ---- malformed messages on stdio (minor) ------------------------------------------------


class StdioPeer:
    """`attnswitch mcp` over stdio, driven by raw JSON-RPC lines; replies read by a thread,
    each waited for with a bound."""

    def __init__(self, db: Path):
        self.proc = subprocess.Popen(
            mcp_command(db),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.replies: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.replies.put(line)

    def send(self, line: bytes | str | dict) -> None:
        if isinstance(line, dict):
            line = json.dumps(line)
        self.proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict:
        try:
            return json.loads(self.replies.get(timeout=REPLY_TIMEOUT_S))
        except queue.Empty:
            raise AssertionError(f"no reply in {REPLY_TIMEOUT_S} s") from None

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture(scope="module")
def stdio_peer(tmp_path_factory: pytest.TempPathFactory):
    peer = StdioPeer(tmp_path_factory.mktemp("stdio") / "data")
    try:
        peer.send(INITIALIZE)
        assert peer.reply()["result"]["serverInfo"]["name"] == "attnswitch"
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield peer
    finally:
        peer.close()


PARSE, INVALID = -32700, -32600
MALFORMED = {
    "not JSON": (b"this is not JSON", PARSE, None, "message: expected one JSON-RPC message"),
    "cut JSON": (
        b'{"jsonrpc": "2.0", "id": 3, "method": "ping"',
        PARSE,
        None,
        "message: expected one JSON-RPC message",
    ),
    "not UTF-8": (b"\xff\xfe\xfd", PARSE, None, "message: expected one JSON-RPC message"),
    "a batch": (
        b'[{"jsonrpc": "2.0", "id": 3, "method": "ping"}]',
        INVALID,
        None,
        "message: expected one JSON object (MCP takes no JSON-RPC batches), got an "
        "array of 1 items",
    ),
    "a string": (b'"ping"', INVALID, None, 'message: expected a JSON object, got "ping"'),
    "no method": (
        b'{"jsonrpc": "2.0", "id": 3}',
        INVALID,
        None,
        "method: expected the name of the method called, got none",
    ),
    "a method that is a number": (
        b'{"jsonrpc": "2.0", "id": 4, "method": 5}',
        INVALID,
        4,
        "method: expected a string, got 5",
    ),
    "an object id": (
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',
        INVALID,
        None,
        'id: expected a string or an integer, got {"a": 1}',
    ),
    "an array id": (
        b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}',
        INVALID,
        None,
        "id: expected a string or an integer, got [1]",
    ),
    "a null id": (
        b'{"jsonrpc": "2.0", "id": null, "method": "ping"}',
        INVALID,
        None,
        "id: expected a string or an integer, got null",
    ),
    "a fraction id": (
        b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
        INVALID,
        None,
        "id: expected a string or an integer, got 1.5",
    ),
    "a boolean id": (
        b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
        INVALID,
        None,
        "id: expected a string or an integer, got true",
    ),
    "another JSON-RPC version": (
        b'{"jsonrpc": "1.0", "id": "v1", "method": "ping"}',
        INVALID,
        "v1",
        "jsonrpc: expected '2.0', got \"1.0\"",
    ),
    "params that are not an object": (
        b'{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": 5}',
        INVALID,
        6,
        "params: expected an object, got 5",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MALFORMED))
def test_each_malformed_message_on_stdio_gets_a_json_rpc_error(stdio_peer, name) -> None:
    line, code, request_id, message = MALFORMED[name]
    stdio_peer.send(line)
    stdio_peer.send({"jsonrpc": "2.0", "id": f"after {name}", "method": "ping"})
    error = stdio_peer.reply()  # before the ping's: the server answered the line
    assert error == {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": error["error"]["message"]},
    }, error
    assert error["error"]["message"].startswith(message), error
    assert stdio_peer.reply() == {"jsonrpc": "2.0", "id": f"after {name}", "result": {}}


# ---- the adapters (defect 12) ------------------------------------------------------------


def a_hit() -> dict[str, Any]:
    from attnswitch.indexing.search import Hit

    return Hit(
        rank=1,
        score=0.5,
        path="a.txt",
        root="docs",
        source="a.txt",
        chunk_id=7,
        ordinal=0,
        start=0,
        end=9,
        heading_path=[],
        location={},
        dense_similarity=None,
        dense_rank=None,
        keyword_score=0.5,
        keyword_rank=1,
        snippet="some text",
        text="some text",
    ).to_dict()


def answer(data: Any) -> bytes:
    """A search answer around `data` (every other member right)."""
    return json.dumps(
        {
            "object": "list",
            "data": data,
            "model": "m",
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
    ).encode()


class Answers(BaseHTTPRequestHandler):
    """`POST /v1/search` answered 200 with the server's `body`, whatever was asked."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def answering() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    server.body = answer([a_hit()])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def wrong(**fields: Any) -> dict[str, Any]:
    return {**a_hit(), **fields}


def without(name: str) -> dict[str, Any]:
    return {k: v for k, v in a_hit().items() if k != name}


BAD_ANSWERS = {
    "not JSON": (b"<html>Service Unavailable</html>", "got a body that is not JSON"),
    "empty": (b"", "got a body that is not JSON"),
    "an array": (b"[]", "got [], not an object"),
    "no data": (json.dumps({"object": "list"}).encode(), "got one without data"),
    "data not a list": (answer(5), "got one whose data is 5"),
    "a hit not an object": (answer([1]), "got one whose data[0] is 1"),
    "a hit without text": (answer([without("text")]), "got one without data[0].text"),
    "a hit without chunk_id": (answer([without("chunk_id")]), "got one without data[0].chunk_id"),
    "a chunk_id that is a string": (
        answer([wrong(chunk_id="7")]),
        "got one whose data[0].chunk_id is '7'",
    ),
    "a text that is a number": (answer([wrong(text=5)]), "got one whose data[0].text is 5"),
    "a score that is null": (answer([wrong(score=None)]), "got one whose data[0].score is None"),
    "a metadata field of the wrong type": (
        answer([wrong(heading_path="a")]),
        "got one whose data[0].heading_path is 'a'",
    ),
}


def retrievers(**where: Any) -> dict[str, Any]:
    """Each adapter's search over `where` (url= or db=), sync and async."""
    lc = pytest.importorskip("attnswitch.integrations.langchain", reason="the langchain extra")
    li = pytest.importorskip("attnswitch.integrations.llamaindex", reason="the llamaindex extra")
    langchain, llamaindex = lc.AttnswitchRetriever(**where), li.AttnswitchRetriever(**where)
    return {
        "langchain": langchain.invoke,
        "langchain async": lambda q: asyncio.run(langchain.ainvoke(q)),
        "llamaindex": llamaindex.retrieve,
        "llamaindex async": lambda q: asyncio.run(llamaindex.aretrieve(q)),
    }


def test_a_right_answer_gives_documents(answering) -> None:
    answering.body = answer([a_hit()])
    url = f"http://127.0.0.1:{answering.server_port}"
    for name, search in retrievers(url=url).items():
        (found,) = search("some text")
        text = found.page_content if name.startswith("langchain") else found.node.text
        assert text == "some text", name


@pytest.mark.parametrize("name", list(BAD_ANSWERS))
def test_a_bad_answer_is_the_adapters_error_naming_the_problem(answering, name) -> None:
    from attnswitch.integrations.index_client import IndexSearchError

    answering.body, message = BAD_ANSWERS[name]
    url = f"http://127.0.0.1:{answering.server_port}"
    for adapter, search in retrievers(url=url).items():
        with pytest.raises(IndexSearchError) as raised:
            search("some text")
        text = str(raised.value)
        assert text.startswith("/v1/search: expected a search answer from the service"), text
        assert message in text and "\n" not in text, (adapter, text)


def another_programs_database(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "index.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT)")
    return path


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (corrupt_index, "not a readable attnswitch index"),
        (another_programs_database, "not an attnswitch index of a schema"),
    ],
    ids=["corrupt", "another schema"],
)
def test_a_damaged_db_is_the_adapters_error_in_the_clis_words(tmp_path, make, what) -> None:
    from attnswitch.integrations.index_client import IndexSearchError

    path = make(tmp_path / "data")
    before = path.read_bytes()
    for adapter, search in retrievers(db=tmp_path / "data").items():
        with pytest.raises(IndexSearchError) as raised:
            search("some text")
        text = str(raised.value)
        assert text.startswith(f"{path}: {what}") and "\n" not in text, (adapter, text)
    assert path.read_bytes() == before  # nothing stored is lost


# ---- search -k (minor) ---------------------------------------------------------------------


@pytest.mark.parametrize("k", ["101", "0", "100000000000000000000000"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_search_k_past_the_services_limit_is_refused_in_one_line(
    tmp_path, monkeypatch, k, as_json
) -> None:
    from attnswitch.cli import app
    from attnswitch.service.schemas import MAX_K

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["search", "some text", "-k", k, "--db", "data"] + (["--json"] if as_json else [])
    )
    assert result.exit_code == 2, result.output
    line = f"-k: expected an integer from 1 to {MAX_K}, got {k}"
    assert result.stderr.splitlines() == [f"attnswitch search: {line}"], result.stderr
    if as_json:
        assert json.loads(result.stdout) == {"error": line}
    assert not (tmp_path / "data").exists()  # refused before any store is made
