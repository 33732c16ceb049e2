"""The MCP server's stdio transport: the SDK's own (`mcp.server.stdio.stdio_server`), fed
lines that are checked first, so that every malformed message gets a JSON-RPC error reply.

The SDK's transport parses each line itself and, when it cannot use one, drops it without
a reply: a line that is not JSON, a batch array, an object without a method, a member of
the wrong type. A request whose id is an object, an array, null, a fraction or a boolean
it reads as a notification, which gets no reply either. Either way the client waits for
an answer that never comes. Here each line is checked before the SDK sees it
(`malformed`): one that is not JSON is answered -32700 (parse error), one that is not a
JSON-RPC message MCP takes is answered -32600 (invalid request) with its id when it is a
request with a usable id (JSON-RPC 2.0: null otherwise), each with one line naming what
was wrong ("id: expected a string or an integer, got {"a": 1}"); blank lines are not
messages and are skipped. Every other line goes on to the SDK as it came.

The replies go through the SDK's own writer (its write stream), so they are never
interleaved with its messages on stdout. As the SDK's transport does when it owns stdin,
fd 0 reads the null device while serving (a child process or a stray read gets EOF, never
the client's messages), and the client's messages are read from a private copy of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from pydantic_core import from_json


def _shown(value: Any) -> str:
    """`value` as JSON for a message, cut to 80 characters."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 80 else text[:77] + "..."


def _usable_id(message: dict[str, Any]) -> str | int | None:
    """The id to answer a request with: its id when MCP takes it (a string or an integer),
    else None. A message without a method is not a request, and its id (a response's, of
    the server's requests) is never echoed: the client would take the error for the answer
    to a request of its own with that id."""
    value = message.get("id") if "method" in message else None
    return value if _takes_id(value) else None


def _takes_id(value: Any) -> bool:
    """Whether MCP takes `value` as an id: a string or an integer (not null, a fraction,
    a boolean, an object or an array)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _error(code: int, request_id: str | int | None, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


def _schema_problem(exc: ValidationError, message: dict[str, Any]) -> str:
    """What the SDK's message models find wrong with `message`, said for the kind of
    message it looks like (a request when it has an id and a method, ...)."""
    kind = (
        "JSONRPCRequest"
        if "method" in message and "id" in message
        else "JSONRPCNotification"
        if "method" in message
        else "JSONRPCError"
        if "error" in message
        else "JSONRPCResponse"
    )
    errors = exc.errors(include_url=False)
    error = next((e for e in errors if e["loc"][:1] == (kind,)), errors[0])
    where = ".".join(str(part) for part in error["loc"][1:]) or "message"
    if error["type"] == "missing":
        return f"{where}: expected a value (a JSON-RPC {kind[7:].lower()} has one), got none"
    expected = error["msg"].removeprefix("Input should be ")
    return f"{where}: expected {expected}, got {_shown(error['input'])}"


def malformed(line: str) -> types.JSONRPCError | None:
    """The error reply to `line` when it is not a JSON-RPC message the SDK takes (see the
    module doc); None when it is one."""
    try:
        message = from_json(line)
    except ValueError as exc:
        return _error(
            types.PARSE_ERROR,
            None,
            f"message: expected one JSON-RPC message as "
            f"JSON on its line, got text that is not JSON ({exc})",
        )
    if isinstance(message, list):
        return _error(
            types.INVALID_REQUEST,
            None,
            f"message: expected one JSON object (MCP "
            f"takes no JSON-RPC batches), got an array of {len(message)} items",
        )
    if not isinstance(message, dict):
        return _error(
            types.INVALID_REQUEST, None, f"message: expected a JSON object, got {_shown(message)}"
        )
    request_id = _usable_id(message)
    if "id" in message and not _takes_id(message["id"]):
        return _error(
            types.INVALID_REQUEST,
            None,
            f"id: expected a string or an integer, got {_shown(message['id'])}",
        )
    if "method" not in message and "result" not in message and "error" not in message:
        return _error(
            types.INVALID_REQUEST,
            request_id,
            "method: expected the name of the method called, got none",
        )
    if "method" in message and not isinstance(message["method"], str):
        return _error(
            types.INVALID_REQUEST,
            request_id,
            f"method: expected a string, got {_shown(message['method'])}",
        )
    try:  # what the SDK's transport does with the line, so that it takes every line passed
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        return _error(types.INVALID_REQUEST, request_id, _schema_problem(exc, message))
    return None


class CheckedLines:
    """The lines of `lines` that are JSON-RPC messages (async iteration, what the SDK's
    transport reads its stdin with); each other line is answered on the write stream given
    to `reply_on` (waited for when a line needs a reply before it is given)."""

    def __init__(self, lines: Any):
        self._lines = lines
        self._replies: Any = None
        self._ready = anyio.Event()

    def reply_on(self, write_stream: Any) -> None:
        self._replies = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._checked()

    async def _checked(self) -> AsyncIterator[str]:
        async for line in self._lines:
            if not line.strip():
                continue
            reply = malformed(line)
            if reply is None:
                yield line
                continue
            await self._ready.wait()
            try:
                await self._replies.send(SessionMessage(reply))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the server stopped: nobody reads replies any more


@contextmanager
def _private_stdin() -> Iterator[Any]:
    """stdin's wire on a descriptor of its own, fd 0 reading the null device meanwhile."""
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # Never closed: a worker thread may still be blocked reading it after the server
        # stops (as the SDK's transport leaves its own copy).
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        os.dup2(wire, 0)


async def serve_stdio(server: Any) -> None:
    """Serve the MCP server `server` (an `MCPServer`) on stdin/stdout until the client
    closes them, answering malformed messages (see the module doc)."""
    # MCPServer.run_stdio_async, with checked lines in place of the transport's own
    # reading: the SDK offers no other way to put its transport's input in front of it.
    lowlevel = server._lowlevel_server
    with _private_stdin() as wire:
        lines = CheckedLines(
            anyio.wrap_file(TextIOWrapper(wire, encoding="utf-8", errors="replace"))
        )
        async with stdio_server(stdin=lines) as (read_stream, write_stream):
            lines.reply_on(write_stream)
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


__all__ = ["CheckedLines", "malformed", "serve_stdio"]
