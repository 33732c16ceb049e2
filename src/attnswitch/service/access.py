"""Who asks: principals (people with groups and a role) behind the service's keys.

The access file (`serve --access-file FILE`, `mcp --http --access-file FILE`) is TOML:

    [[principal]]
    name = "alice"                 # a user name (a Unix one, for the drive's permissions)
    groups = ["staff", "hr"]       # its groups (optional, default none)
    role = "reader"                # "reader" (searches what it may read) or "admin"
    keys = ["sha256:<64 hex>", "a plain key"]   # at least one; plain keys hashed when read

    [[grant]]                      # optional: a folder or glob readable by these groups
    path = "shared/handbook"       # besides what the files allow
    groups = ["staff"]

Every key is kept only as its SHA-256 digest; a key may belong to one principal only, a name
appear once. A request's key is compared with every digest of every principal, all of them
each time (`auth.KeyChecker`), so neither the key nor whose it is shows in the timing.

A plain key file (`--api-key-file`) still works: each of its keys is the admin principal
"admin". No keys at all (a loopback server, or `--allow-no-auth`): every request is the
admin "local" (one user, as before). The two options together are refused.

`AccessControl` holds the current `Access` and re-reads its file on `reload()` (the servers
call it on SIGHUP): a file that cannot be used keeps the old access and says why on stderr.
`identify(request)` puts the request's `Principal` on `request.state.principal`;
`reader_of(request)` is the `indexing.access.Reader` a search filters by (None: an admin).
"""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request

from attnswitch.indexing.access import Reader
from attnswitch.service.auth import KeyChecker, KeyFileError, hash_key, load_keys
from attnswitch.service.errors import ServiceError

ROLES = ("reader", "admin")
# What a reader does not get of an index summary (`/v1/index`, MCP's index_status): the
# whole index's skipped files and runs.
ADMIN_ONLY_FIELDS = ("skipped", "skipped_by_reason", "runs")
_PRINCIPAL_FIELDS = ("name", "groups", "role", "keys")
_GRANT_FIELDS = ("path", "groups")
_DIGEST = re.compile(r"sha256:\s*([0-9a-fA-F]{64})", re.IGNORECASE)


class AccessFileError(KeyFileError):
    """An access file that cannot be used, with the reason (a `KeyFileError`, so the
    commands refuse it as they refuse a bad key file)."""


@dataclass(frozen=True)
class Principal:
    """Who a key belongs to: `name`, `groups`, `role` ("reader" or "admin")."""

    name: str
    groups: frozenset[str] = frozenset()
    role: str = "admin"

    @property
    def admin(self) -> bool:
        return self.role == "admin"

    def to_dict(self) -> dict[str, Any]:
        """What `GET /v1/whoami` answers."""
        return {"name": self.name, "groups": sorted(self.groups), "role": self.role}


@dataclass(frozen=True)
class Grant:
    """A folder prefix or glob (`path`, as `SearchFilter.path` reads it) that `groups` may
    read besides what the files allow."""

    path: str
    groups: frozenset[str]


ADMIN = Principal("admin")  # every key of a plain key file
LOCAL = Principal("local")  # a server without keys: one user


class Access:
    """Principals behind digests, and grants. `keyless`: no keys at all (every request is
    `LOCAL`)."""

    def __init__(
        self, entries: tuple[tuple[str, Principal], ...] = (), grants: tuple[Grant, ...] = ()
    ):
        self.principals = tuple(dict.fromkeys(p for _, p in entries))
        self.grants = grants
        self.checker = (
            KeyChecker(tuple(d for d, _ in entries), tuple(p for _, p in entries))
            if entries
            else None
        )

    @property
    def keyless(self) -> bool:
        return self.checker is None

    @classmethod
    def from_key_file(cls, path: str | os.PathLike) -> Access:
        """Every key of a plain key file (`auth.load_keys`) as the admin `ADMIN`."""
        return cls(tuple((d, ADMIN) for d in load_keys(path)))

    def principal(self, request: Request) -> Principal:
        """The request's principal; 401 (`auth.KeyChecker.check`) without a valid key."""
        if self.checker is None:
            return LOCAL
        return self.checker.check(request)

    def reader(self, principal: Principal) -> Reader | None:
        """The `Reader` a search of `principal` filters by: None for an admin; else its
        name, groups and the path of every grant naming one of its groups."""
        if principal.admin:
            return None
        granted = tuple(g.path for g in self.grants if g.groups & principal.groups)
        return Reader(principal.name, principal.groups, granted)


def _field(table: str, data: dict, name: str, kind: str, required: bool = True) -> Any:
    """`data[name]` checked to be a str or a list of str (`kind`)."""
    if name not in data:
        if required:
            raise AccessFileError(f"{table}.{name}: expected {kind}, got none")
        return [] if kind.startswith("a list") else None
    value = data[name]
    ok = (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
        if kind.startswith("a list")
        else isinstance(value, str)
    )
    if not ok:
        raise AccessFileError(f"{table}.{name}: expected {kind}, got {value!r:.80}")
    return value


def _unknown(table: str, data: dict, known: tuple[str, ...]) -> None:
    extra = sorted(set(data) - set(known))
    if extra:
        raise AccessFileError(
            f"{table}: expected only the fields {', '.join(known)}, got {', '.join(extra)}"
        )


def _digest(table: str, key: str) -> str:
    """A key's digest: `sha256:<64 hex>` as given, anything else hashed (a plain key)."""
    key = key.strip()
    if not key:
        raise AccessFileError(f"{table}: expected non-blank keys, got a blank one")
    if key.lower().startswith("sha256:"):
        match = _DIGEST.fullmatch(key)
        if match is None:
            digits = key.split(":", 1)[1].strip()
            raise AccessFileError(
                f"{table}: expected 'sha256:' and 64 hex digits, got {len(digits)} characters"
            )
        return match.group(1).lower()
    return hash_key(key)


def _read(path: Path) -> str:
    """The file's text: a regular UTF-8 file (a pipe or a device is refused, never waited
    on), without a byte order mark."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise AccessFileError(
                    f"access file: expected a regular file, got {stat.filemode(mode)} "
                    f"at {str(path)!r}"
                )
            return fh.read().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise AccessFileError(
            f"access file: expected a readable UTF-8 file, got {str(path)!r} "
            f"({type(exc).__name__}: {exc})"
        ) from None


def load_access(path: str | os.PathLike) -> Access:
    """The principals and grants of an access file (see the module doc), every field
    checked: an error names the table (`principal[2].role: expected ...`)."""
    p = Path(path)
    try:
        data = tomllib.loads(_read(p))
    except tomllib.TOMLDecodeError as exc:
        raise AccessFileError(f"access file: expected TOML, got {str(p)!r}: {exc}") from None
    _unknown("access file", data, ("principal", "grant"))
    principals = data.get("principal", [])
    grants = data.get("grant", [])
    for name, value in (("principal", principals), ("grant", grants)):
        if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
            raise AccessFileError(f"{name}: expected [[{name}]] tables, got {value!r:.80}")
    if not principals:
        raise AccessFileError(
            f"access file: expected at least one [[principal]], got none in {str(p)!r}"
        )
    entries: list[tuple[str, Principal]] = []
    owners: dict[str, str] = {}
    names: set[str] = set()
    for i, table in enumerate(principals):
        where = f"principal[{i}]"
        _unknown(where, table, _PRINCIPAL_FIELDS)
        name = _field(where, table, "name", "a user name (a string)").strip()
        if not name:
            raise AccessFileError(f"{where}.name: expected a user name, got a blank one")
        if name in names:
            raise AccessFileError(f"{where}.name: expected a name given once, got {name!r} again")
        names.add(name)
        groups = _field(where, table, "groups", "a list of group names", required=False)
        role = _field(where, table, "role", '"reader" or "admin"')
        if role not in ROLES:
            raise AccessFileError(f'{where}.role: expected "reader" or "admin", got {role!r}')
        keys = _field(where, table, "keys", "a list of keys or sha256 digests")
        if not keys:
            raise AccessFileError(f"{where}.keys: expected at least one key, got none")
        principal = Principal(name, frozenset(g.strip() for g in groups if g.strip()), role)
        for digest in dict.fromkeys(_digest(f"{where}.keys", k) for k in keys):
            if digest in owners:
                raise AccessFileError(
                    f"{where}.keys: expected keys of this principal only, got one that "
                    f"{owners[digest]} also has"
                )
            owners[digest] = f"{where} ({name})"
            entries.append((digest, principal))
    parsed = []
    for i, table in enumerate(grants):
        where = f"grant[{i}]"
        _unknown(where, table, _GRANT_FIELDS)
        grant_path = _field(where, table, "path", "a folder or glob (a string)").strip()
        if not grant_path:
            raise AccessFileError(f"{where}.path: expected a folder or glob, got a blank one")
        groups = _field(where, table, "groups", "a list of group names")
        if not any(g.strip() for g in groups):
            raise AccessFileError(f"{where}.groups: expected at least one group, got none")
        parsed.append(Grant(grant_path, frozenset(g.strip() for g in groups if g.strip())))
    return Access(tuple(entries), tuple(parsed))


class AccessControl:
    """The service's current `Access` (from `access_file`, `api_key_file`, or none: keyless;
    both refused), swapped whole by `reload()`. `label` starts its stderr lines."""

    def __init__(
        self,
        access_file: str | os.PathLike | None = None,
        api_key_file: str | os.PathLike | None = None,
        label: str = "attnswitch serve",
    ):
        if access_file is not None and api_key_file is not None:
            raise AccessFileError(
                "access file: expected --access-file or --api-key-file, got both (an access "
                "file holds every key, with its principal)"
            )
        self.access_file = None if access_file is None else Path(access_file)
        self.api_key_file = None if api_key_file is None else Path(api_key_file)
        self.label = label
        # reentrant: a second SIGHUP may arrive while the handler of the first one reloads
        self._lock = threading.RLock()
        self.current = self._load()

    def _load(self) -> Access:
        if self.access_file is not None:
            return load_access(self.access_file)
        if self.api_key_file is not None:
            return Access.from_key_file(self.api_key_file)
        return Access()

    @property
    def keyless(self) -> bool:
        return self.current.keyless

    def reload(self) -> bool:
        """Re-read the file (SIGHUP); on an error keep the current access. One line on
        stderr either way; whether it was reloaded."""
        with self._lock:
            try:
                access = self._load()
            except KeyFileError as exc:
                print(
                    f"{self.label}: access not reloaded, the old one is kept: {exc}",
                    file=sys.stderr,
                    flush=True,
                )
                return False
            self.current = access
        print(
            f"{self.label}: access reloaded: {len(access.principals)} principals, "
            f"{len(access.grants)} grants",
            file=sys.stderr,
            flush=True,
        )
        return True

    def identify(self, request: Request) -> Principal:
        """The request's principal (401 without a valid key), also put on
        `request.state.principal`."""
        principal = self.current.principal(request)
        request.state.principal = principal
        return principal


def principal_of(request: Request) -> Principal:
    """The principal `AccessControl.identify` put on the request."""
    return request.state.principal


def reader_of(request: Request, control: AccessControl) -> Reader | None:
    """The request's `Reader` (None: an admin, or a keyless server's one user)."""
    return control.current.reader(principal_of(request))


def require_admin(request: Request, what: str) -> None:
    """403 `forbidden` unless the request's principal is an admin."""
    principal = principal_of(request)
    if not principal.admin:
        raise ServiceError(
            403,
            f"{what}: expected an admin's key, got the key of {principal.role} {principal.name!r}",
            code="forbidden",
        )
