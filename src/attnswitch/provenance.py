"""The one key of everything stored about a measurement (docs/architecture.md, "One
provenance key"): attention verdicts, engine plans and parity checks, precision picks,
exported and calibrated models, and an index's config fingerprints are all stored under
`provenance_key` of their *subject*, the JSON object of what was measured, on which
machine or device, with which library versions and build revisions. A leaf module (the
standard library only), so the index's cold search path can use it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def provenance_key(subject: Mapping[str, Any], length: int = 24, prefix: str = "") -> str:
    """The key of what is stored about `subject` (JSON-able: what was measured, where, with
    what): `prefix` and the first `length` hex digits of the SHA-256 of `subject` as sorted
    JSON. Any change of any field gives another key: nothing stored under the old one is
    found again, which is how a stored measurement goes stale."""
    text = json.dumps(subject, sort_keys=True)
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:length]


def subject_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The fields of `new` that differ from `old`, nested ones dotted, as "field: old ->
    new" ("engines.openvino.openvino: 2025.4.0 -> 2026.4.1"), sorted."""
    changes = []
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name), new.get(name)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            changes.extend(f"{name}.{change}" for change in subject_changes(a, b))
        elif a != b:
            changes.append(
                f"{name}: {'(none)' if a is None else a} -> {'(none)' if b is None else b}"
            )
    return changes
