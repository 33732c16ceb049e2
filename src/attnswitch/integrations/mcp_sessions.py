"""The limits on the MCP server's streamable HTTP sessions (`attnswitch mcp --http`): how
many may be open at once, and after how long without a request one is closed. Apart from
`integrations.mcp` so that the command line shows and checks them without the mcp extra.

Each open session holds a server task and its streams, kept until the client ends it or
it has gone `session_idle_minutes` with no request in flight (no call, no open event
stream); without a cap, a client opening sessions in a loop grew the server by about
40 KiB a session for as long as they lasted. Past the cap, the SDK's session manager
answers a new `initialize` 503 ("Too many open sessions", a JSON-RPC error) while the
open sessions go on: refusing the newcomer, rather than closing the least recently used
session, never cuts off a client in the middle of its work (nor lets a flood of sessions
push out the ones in use), and room comes back as sessions end or go idle.
"""

from __future__ import annotations

import math
from typing import Any

from attnswitch.errors import ConfigError

DEFAULT_MAX_SESSIONS = 100
MAX_SESSIONS_LIMIT = 10_000
DEFAULT_IDLE_MINUTES = 10.0
MAX_IDLE_MINUTES = 24 * 60.0


def check_sessions(max_sessions: Any, session_idle_minutes: Any) -> tuple[int, float]:
    """(`max_sessions`, the idle time in seconds) once checked: refuses values out of
    range with `ConfigError` naming the argument (the option without its dashes)."""
    if (
        isinstance(max_sessions, bool)
        or not isinstance(max_sessions, int)
        or not 1 <= max_sessions <= MAX_SESSIONS_LIMIT
    ):
        raise ConfigError(
            f"max_sessions: expected an integer from 1 to "
            f"{MAX_SESSIONS_LIMIT:,}, got {max_sessions!r}"
        )
    minutes = session_idle_minutes
    if (
        isinstance(minutes, bool)
        or not isinstance(minutes, (int, float))
        or not math.isfinite(minutes)
        or not 0 < minutes <= MAX_IDLE_MINUTES
    ):
        raise ConfigError(
            f"session_idle_minutes: expected a number of minutes above 0 and "
            f"at most {MAX_IDLE_MINUTES:g}, got {minutes!r}"
        )
    return max_sessions, float(minutes) * 60.0


__all__ = [
    "DEFAULT_IDLE_MINUTES",
    "DEFAULT_MAX_SESSIONS",
    "MAX_IDLE_MINUTES",
    "MAX_SESSIONS_LIMIT",
    "check_sessions",
]
