"""An access file for tests (`serve` and `mcp --access-file`): the reader "alice" and the
admin "root", the admin's key stored as its digest, as a real file would keep it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def access_text(
    reader_key: str,
    admin_key: str,
    groups: Iterable[str] = ("staff",),
    grants: Iterable[tuple[str, Iterable[str]]] = (),
) -> str:
    """The TOML of an access file: "alice" (a reader in `groups`, with `reader_key`),
    "root" (an admin, `admin_key` as its SHA-256 digest), then a `[[grant]]` per (path,
    groups) of `grants`."""
    listed = lambda names: ", ".join(f'"{n}"' for n in names)  # noqa: E731
    text = f"""
[[principal]]
name = "alice"
groups = [{listed(groups)}]
role = "reader"
keys = ["{reader_key}"]

[[principal]]
name = "root"
role = "admin"
keys = ["sha256:{hashlib.sha256(admin_key.encode()).hexdigest()}"]
"""
    for path, names in grants:
        text += f'\n[[grant]]\npath = "{path}"\ngroups = [{listed(names)}]\n'
    return text
