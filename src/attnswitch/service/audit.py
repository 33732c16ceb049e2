"""One audit line per search: who searched, when, how, and how many results came back.

Lines go to the logger `attnswitch.audit` (level INFO; a host process may route it where it
likes) and, with `serve --audit-log FILE`, are appended to FILE, one JSON object a line:

    {"event": "search", "time": "2026-12-05T13:20:30.123Z", "principal": "alice",
     "role": "reader", "route": "/v1/search", "query_sha256": "9f86d0...", "query_chars": 14,
     "k": 10, "mode": "hybrid", "filter": true, "returned": 10}

The query itself is not written, only its SHA-256 and its length: queries name what people
look for (a colleague, an illness, a dismissal), and the audit file is read by other people
than the asker. The digest still answers "did anyone search for X" (hash X and look for
it). `filter`: whether the search was restricted to what the principal may read (a reader);
no line holds a result, and none counts results held back (that would take a second,
unfiltered search).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from attnswitch.errors import ConfigError

log = logging.getLogger("attnswitch.audit")


def open_audit_log(path: str | os.PathLike | None) -> None:
    """Append the audit lines to `path` as well (None: the logger only, at the level the
    host process gives it: off unless INFO is enabled for `attnswitch.audit`)."""
    if path is None:
        return
    log.setLevel(logging.INFO)
    target = str(Path(path).resolve())
    if any(getattr(h, "baseFilename", None) == target for h in log.handlers):
        return
    try:
        handler = logging.FileHandler(target, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"audit_log: expected a file that can be appended to, got {str(path)!r} ({exc})"
        ) from None
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)


def search_line(
    principal: Any, route: str, query: str, k: int, mode: str, filtered: bool, returned: int
) -> dict[str, Any]:
    """The audit record of one search (see the module doc)."""
    now = time.time()
    return {
        "event": "search",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        + f".{int(now % 1 * 1000):03d}Z",
        "principal": principal.name,
        "role": principal.role,
        "route": route,
        "query_sha256": hashlib.sha256(query.encode("utf-8", "surrogateescape")).hexdigest(),
        "query_chars": len(query),
        "k": k,
        "mode": mode,
        "filter": filtered,
        "returned": returned,
    }


def audit_search(
    principal: Any, route: str, query: str, k: int, mode: str, filtered: bool, returned: int
) -> None:
    """Write one search's line (when the logger is on)."""
    if log.isEnabledFor(logging.INFO):
        line = search_line(principal, route, query, k, mode, filtered, returned)
        log.info(json.dumps(line, sort_keys=False))
