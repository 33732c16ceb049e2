"""Who a stdio MCP server serves when it has an access file (`attnswitch mcp --access-file
FILE`, without `--http`): the principal whose key is in the environment variable
`ATTNSWITCH_API_KEY`, the way stdio MCP servers take credentials (an MCP client passes the
`env` of the server's entry in its configuration to the process it spawns). Over HTTP each
request carries its own key (`mcp.BearerKeys`); over stdio the one client is one principal
for the whole session.

`EnvKeyPrincipal.start(access_file, key)` reads the access file (`service.access.
AccessControl`) and refuses to start, with one line, when the key is missing, blank or no
key of the file ("ATTNSWITCH_API_KEY: expected ..., got an unknown one"; the key itself is
never shown). `asker()` gives each tool call its principal and the `indexing.access.Reader`
it filters by (None: an admin), as the access is now: `reload()` (SIGHUP) re-reads the file
(`AccessControl.reload`: a file that cannot be used keeps the old access), the principal is
found again by the same key, and while the file no longer lists the key every call is a
tool error. Without an access file, stdio serves the local user as an admin
(`service.access.LOCAL`), as before.
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from attnswitch.service.access import AccessControl
from attnswitch.service.auth import KeyFileError

ENV_KEY = "ATTNSWITCH_API_KEY"


class EnvKeyError(KeyFileError):
    """No usable key in `ENV_KEY` for a stdio server with an access file (a `KeyFileError`,
    so the command refuses it as it refuses a bad access file)."""


class EnvKeyPrincipal:
    """The principal of `control`'s access whose key is `key`, looked up at each call."""

    def __init__(self, control: AccessControl, key: str):
        self.control = control
        self._key = key

    @classmethod
    def start(cls, access_file: str | os.PathLike, key: str | None) -> EnvKeyPrincipal:
        """The principal of `access_file` whose key is `key` (`ENV_KEY`'s value, None when
        unset); an `EnvKeyError` (or the access file's `AccessFileError`) otherwise."""
        if key is None or not key.strip():
            raise EnvKeyError(
                f"{ENV_KEY}: expected the key of a principal of the access file in the "
                "environment (stdio serves that principal), got "
                + ("none" if key is None else "a blank one")
            )
        found = cls(AccessControl(access_file, label="attnswitch mcp"), key.strip())
        if found._identify() is None:
            raise EnvKeyError(
                f"{ENV_KEY}: expected the key of a principal of {str(access_file)!r}, got an "
                "unknown one"
            )
        return found

    def _identify(self) -> tuple[Any, Any] | None:
        """(the key's principal, the access it was found in), or None."""
        access = self.control.current
        if access.checker is None:
            return None
        principal = access.checker.identify(self._key)
        return None if principal is None else (principal, access)

    def asker(self) -> tuple[Any, Any]:
        """(the principal, its `Reader`; None for an admin) of a tool call; a `ToolError`
        while the access file no longer lists the key."""
        found = self._identify()
        if found is None:
            raise ToolError(
                f"{ENV_KEY}: expected the key of a principal of the access file, got one it "
                "no longer lists (the file was reloaded)"
            )
        principal, access = found
        return principal, access.reader(principal)

    def reload(self) -> bool:
        """Re-read the access file (SIGHUP); whether it was reloaded."""
        return self.control.reload()


__all__ = ["ENV_KEY", "EnvKeyError", "EnvKeyPrincipal"]
