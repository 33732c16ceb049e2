"""uvicorn's h11 protocol with a deadline on request headers.

uvicorn closes an idle keep-alive connection (`timeout_keep_alive`), but any byte received
cancels that timer, and nothing bounds the time a client takes to finish its headers: a
client sending one header byte at a time holds a connection for ever, and a connection
that never sends a byte is never closed. This protocol closes a connection whose request
headers are not complete `seconds` after it opened, or after the first byte of a later
request arrived; an idle keep-alive connection between requests stays uvicorn's to close
(`timeout_keep_alive`), so pooled client connections see no new race. Bodies have their
own deadline (`limits.BodyLimitMiddleware`).

Hand-written because neither uvicorn nor h11 has a header timeout; it only arms a timer
around uvicorn's own protocol and relies on h11's state (`their_state` stays IDLE until a
request's headers are complete).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


def header_timeout_protocol(seconds: float) -> type[H11Protocol]:
    """An `H11Protocol` subclass closing connections whose headers take over `seconds`
    (for `uvicorn.Config(http=...)`)."""

    class HeaderTimeoutProtocol(H11Protocol):
        header_timeout_s = seconds
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            self._disarm()  # idle until the next request: uvicorn's keep-alive timer
            super().on_response_complete()

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first bytes of a request's headers
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expire(self) -> None:
            self._header_timer = None
            waiting = self.conn.their_state is h11.IDLE and (
                self.cycle is None or self.cycle.response_complete
            )
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol
