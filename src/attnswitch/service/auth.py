"""API keys: optional bearer tokens, stored hashed, compared in constant time.

Key file (`--api-key-file`), one entry per line; blank lines and lines starting with `#`
are ignored:

- `sha256:<64 hex digits>` or a bare 64-hex-digit line: the SHA-256 digest of a key
  (`printf %s "$KEY" | sha256sum`), so the file never holds the key itself;
- any other line: a plain key, hashed when the file is read (only the digest is kept).

A UTF-8 byte order mark at the start of the file is dropped; a `sha256:` line without
exactly 64 hex digits is refused (never taken for a plain key); the file must be a regular
file (a named pipe would block start-up).

A request presents `Authorization: Bearer <key>`. Its SHA-256 digest is compared with every
stored digest by `hmac.compare_digest`, all of them each time, so neither the key nor which
entry matched shows in the timing. Health routes (`/livez`, `/readyz`) and `/metrics` stay
open; every `/v1/` route needs a key when keys are configured.

Without keys the service refuses a non-loopback host unless `allow_no_auth` says so. A
keyless server on a loopback address also checks every request's Host header
(`LoopbackHostMiddleware`): a name that is not a loopback one is refused (400
`invalid_host`), so a web page whose own name was made to resolve to 127.0.0.1 (DNS
rebinding) cannot read the service from the browser.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import stat
from pathlib import Path
from typing import Any

from fastapi import Request

from attnswitch.errors import AttnswitchError
from attnswitch.service.errors import ServiceError, error_response

_HEX64 = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


class KeyFileError(AttnswitchError, ValueError):
    """A key file that cannot be used, with the reason."""


class BindRefusedError(AttnswitchError, ValueError):
    """A host that may not be served with the given authentication settings."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return f"mode {stat.filemode(mode)}"


def hash_key(key: str) -> str:
    """The SHA-256 hex digest of a key, as the key file stores it."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def load_keys(path: str | os.PathLike) -> tuple[str, ...]:
    """The digests of every key in `path` (see the module doc); at least one. The file must
    be a regular file (a pipe or a device is refused, never waited on); a UTF-8 byte order
    mark at its start is dropped; a line starting with `sha256:` must hold exactly 64 hex
    digits after it."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise KeyFileError(
                    f"api key file: expected a regular file, got {_kind(mode)} at {str(p)!r}"
                )
            lines = fh.read().decode("utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(
            f"api key file: expected a readable UTF-8 file, got {str(p)!r} "
            f"({type(exc).__name__}: {exc})"
        ) from None
    digests = []
    for number, line in enumerate(lines, 1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        match = _HEX64.fullmatch(entry)
        if match is None and entry.lower().startswith("sha256:"):
            digits = entry.split(":", 1)[1].strip()
            if re.fullmatch(r"[0-9a-fA-F]{64}", digits):  # "SHA256:", or a space after ":"
                digests.append(digits.lower())
                continue
            raise KeyFileError(
                f"api key file: line {number}: expected 'sha256:' and 64 hex "
                f"digits, got {len(digits)} characters"
                + ("" if re.fullmatch(r"[0-9a-fA-F]*", digits) else " that are not all hex digits")
            )
        digests.append(match.group(1).lower() if match else hash_key(entry))
    if not digests:
        raise KeyFileError(
            f"api key file: expected at least one key or sha256 digest, got none in {str(p)!r}"
        )
    return tuple(dict.fromkeys(digests))


class KeyChecker:
    """Checks bearer tokens against stored digests (constant time, see the module doc).
    `owners` (one per digest; default: the digests themselves) is what `identify` and
    `check` give back for a matching key: the principal it belongs to (`access`)."""

    def __init__(self, digests: tuple[str, ...], owners: tuple[Any, ...] | None = None):
        if not digests:
            raise KeyFileError("api keys: expected at least one digest, got none")
        if owners is not None and len(owners) != len(digests):
            raise KeyFileError(
                f"api keys: expected one owner per digest ({len(digests)}), got {len(owners)}"
            )
        self._digests = tuple(bytes.fromhex(d) for d in digests)
        self._owners = tuple(digests) if owners is None else tuple(owners)

    def identify(self, token: str) -> Any | None:
        """The owner of `token`'s digest, or None: every digest is compared, whichever
        matches."""
        presented = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found = -1
        for i, digest in enumerate(self._digests):
            match = hmac.compare_digest(presented, digest)
            found = (i & -match) | (found & (match - 1))  # i where it matches, else as was
        return None if found < 0 else self._owners[found]

    def valid(self, token: str) -> bool:
        return self.identify(token) is not None

    def check(self, request: Request) -> Any:
        """The owner of the request's bearer key; a 401 `ServiceError` unless it carries a
        valid one."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ServiceError(
                401,
                "authorization: expected 'Bearer <api key>', got "
                + ("none" if not header else "another scheme"),
                code="missing_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        owner = self.identify(token.strip())
        if owner is None:
            raise ServiceError(
                401,
                "authorization: expected a valid api key, got an unknown one",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return owner


def is_loopback(host: str) -> bool:
    """True for loopback addresses (127.0.0.0/8, ::1) and localhost names."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, has_keys: bool, allow_no_auth: bool) -> None:
    """Refuse a non-loopback host without keys unless explicitly allowed."""
    if has_keys or allow_no_auth or is_loopback(host):
        return
    raise BindRefusedError(
        f"host: expected a loopback address without api keys, got {host!r}: give "
        "--api-key-file FILE, or --allow-no-auth to serve it to the network without keys"
    )


def host_name(header: str) -> str:
    """The host of a Host header, without its port: "[::1]:80" -> "::1", "a:80" -> "a"."""
    header = header.strip()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    name, _, port = header.rpartition(":")
    return name if name and port.isdigit() else header


class LoopbackHostMiddleware:
    """Refuse requests whose Host header names anything but a loopback host (see the
    module doc). Hand-written: Starlette's TrustedHostMiddleware matches names only (not
    127.0.0.0/8), drops IPv6 literals' ports wrongly and answers in plain text."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = next((v for k, v in scope.get("headers", ()) if k == b"host"), None)
            name = None if header is None else host_name(header.decode("latin-1"))
            if name is not None and not is_loopback(name.rstrip(".")):
                response = error_response(
                    400,
                    "host: expected a loopback name (localhost, 127.0.0.1, [::1]) on "
                    "a server without api keys, got another",
                    "invalid_host",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
