"""uvicorn's h11 protocol with a deadline on request headers.

uvicorn closes an idle keep-alive connection (`timeout_keep_alive`), but any byte received
cancels that timer, and nothing bounds the time a client takes to finish its headers: a
client sending one header byte at a time holds a connection for ever. This protocol
closes a connection whose request headers are not complete `seconds` after it opened, or
after its previous response. Bodies have their own deadline (`limits.BodyLimitMiddleware`).

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
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._expire)

        def _expire(self) -> None:
            self._header_timer = None
            waiting = self.conn.their_state is h11.IDLE and (
                self.cycle is None or self.cycle.response_complete)
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol
