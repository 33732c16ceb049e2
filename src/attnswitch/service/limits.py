"""Request limits: body size on the bytes actually read, the time to send it, its
encoding, items per request, empty input.

`BodyLimitMiddleware` reads the whole body before the app sees it and answers 413 (in the
service's JSON error shape) as soon as the bytes read pass the limit, whatever the
Content-Length said or whether there was one (chunked transfer encoding). A declared
Content-Length over the limit is refused without waiting for the bytes (and without "100
Continue" to a client that sent `Expect: 100-continue`: it gets the 413 at once). Starlette's own
limiter answers in plain text, hence this one. The whole body must arrive within
`timeout_s` (a client that trickles it gets 408 and the connection is closed), and be
UTF-8, as JSON must (RFC 8259; 400 `invalid_json` otherwise). The headers' own deadline is
the server's (`protocol`).

After a 413 the rest of the body is read and dropped, up to `DRAIN_BYTES` (8 MiB) and
within the body's deadline, so that a client still sending gets the 413 rather than a
reset connection.

Token limits per item are the model's (`max_seq_length`): longer texts are truncated unless
the request says `"truncate": false` (then 422); see `runtime.Service.embed`. Only a bounded
prefix of a text is tokenised (`token_prefix`: `CHARS_PER_TOKEN` characters per token the
model takes, cut at a space), so a 2 MB text costs the CPU what its first tokens cost, not
seconds; a strict request whose text is longer than that prefix is refused (422) without
tokenising the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from attnswitch.service.errors import ServiceError, error_body

DRAIN_BYTES = 8 * 2**20
# Characters of a text tokenised per token the model takes: far more than any text needs
# (English runs about 4 characters per token; code, with its indentation, under 10).
CHARS_PER_TOKEN = 64


class BodyLimitMiddleware:
    """Refuse HTTP request bodies over `max_bytes` (413), slower than `timeout_s` (408) or
    not UTF-8 (400); see the module doc."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = 20.0):
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            async with asyncio.timeout(self.timeout_s):
                body = await self._read(scope, receive, send)
        except TimeoutError:
            await _refuse(
                send,
                408,
                f"body: expected the whole body within {self.timeout_s:g} s, got less in that time",
                "body_timeout",
            )
            return
        if body is None:  # refused or disconnected
            return
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            await _refuse(
                send,
                400,
                f"body: expected UTF-8 JSON, got invalid UTF-8 at byte {exc.start}",
                "invalid_json",
            )
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            if not _expects_continue(scope):  # else the body never comes: nothing to drain
                await _drain(receive, min(declared, DRAIN_BYTES))
            await self._too_large(send, f"{declared} bytes declared")
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                if message.get("more_body", False):
                    await _drain(receive, DRAIN_BYTES)
                await self._too_large(send, f"more than {self.max_bytes} bytes read")
                return None
            chunks.append(body)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _too_large(self, send: Send, got: str) -> None:
        await _refuse(
            send, 413, f"body: expected at most {self.max_bytes} bytes, got {got}", "body_too_large"
        )


async def _refuse(send: Send, status: int, message: str, code: str) -> None:
    """Answer in the service's error shape and close the connection."""
    body = error_body(status, message, code, "body")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _expects_continue(scope: Scope) -> bool:
    """Whether the client waits for "100 Continue" before sending its body (reading the
    body would make the server send it)."""
    return any(
        name == b"expect" and value.strip().lower() == b"100-continue"
        for name, value in scope.get("headers", ())
    )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _drain(receive: Receive, limit: int) -> None:
    """Read and drop the rest of a body, at most `limit` bytes."""
    dropped = 0
    while dropped < limit:
        message = await receive()
        if message["type"] != "http.request":
            return
        dropped += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # http.disconnect, for handlers that watch for it

    return replay


def check_items(
    texts: Sequence[str], max_items: int, param: str = "input", is_list: bool = True
) -> None:
    """Refuse an empty list or an empty text (400) and too many texts (422). `is_list`:
    whether the client sent a list (errors then name the item, `input[3]`)."""
    if not texts:
        raise ServiceError(
            400,
            f"{param}: expected at least one text, got an empty list",
            code="empty_input",
            param=param,
        )
    if len(texts) > max_items:
        raise ServiceError(
            422,
            f"{param}: expected at most {max_items} texts per request, got {len(texts)}",
            code="too_many_items",
            param=param,
        )
    for i, text in enumerate(texts):
        if not text.strip():
            where = f"{param}[{i}]" if is_list else param
            raise ServiceError(
                400,
                f"{where}: expected a non-empty text, got "
                f"{'an empty string' if not text else 'only whitespace'}",
                code="empty_input",
                param=where,
            )


def token_prefix(text: str, max_tokens: int) -> str:
    """The part of `text` to tokenise when only its first `max_tokens` tokens count: all of
    it when it has at most `max_tokens * CHARS_PER_TOKEN` characters, else that many cut
    back to the last whitespace (so that no word is split and the first tokens are the
    whole text's)."""
    bound = max_tokens * CHARS_PER_TOKEN
    if len(text) <= bound:
        return text
    head = text[:bound]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:cut] if cut > bound // 2 else head
