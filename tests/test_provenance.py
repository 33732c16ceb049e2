"""One provenance key for everything stored about a measurement, and tables that say why
a stored entry went stale."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from attnswitch.kernels.cache import JsonTable
from attnswitch.provenance import provenance_key, subject_changes

SRC = Path(__file__).resolve().parents[1] / "src" / "attnswitch"


def test_the_key_is_the_subject_s_and_changes_with_any_field() -> None:
    subject = {"machine": "cpu", "engines": {"openvino": {"openvino": "2025.4"}}}
    assert provenance_key(subject) == provenance_key(dict(reversed(subject.items())))
    assert len(provenance_key(subject)) == 24 and len(provenance_key(subject, 16)) == 16
    assert provenance_key(subject, prefix="parity-").startswith("parity-")
    moved = {**subject, "engines": {"openvino": {"openvino": "2026.4"}}}
    assert provenance_key(moved) != provenance_key(subject)


def test_the_key_is_what_index_fingerprints_were_before_it() -> None:
    """Index config fingerprints are stored in every index: the one key gives the values
    the hand-built ones gave (sha256 of the sorted JSON, 16 hex digits), so no stored
    index goes stale by this change."""
    import hashlib
    import json

    fields = {"model_fingerprint": "ab12", "pooling": "mean", "precision": "fp32"}
    legacy = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    assert provenance_key(fields, 16) == legacy


def test_changes_are_named_field_by_field() -> None:
    old = {"attnswitch": "0.9", "engines": {"onnx": {"onnxruntime": "1.20"}}, "x": 1}
    new = {"attnswitch": "0.10", "engines": {"onnx": {"onnxruntime": "1.22"}}, "y": 2}
    assert subject_changes(old, new) == [
        "attnswitch: 0.9 -> 0.10",
        "engines.onnx.onnxruntime: 1.20 -> 1.22",
        "x: 1 -> (none)",
        "y: (none) -> 2",
    ]


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> JsonTable:
    monkeypatch.setenv("ATTNSWITCH_CACHE_DIR", str(tmp_path))
    return JsonTable("measurements-test.json")


def test_a_table_entry_is_found_by_its_subject_and_keeps_it(table: JsonTable) -> None:
    subject = {"machine": "m", "model": "a", "versions": {"torch": "2.13"}}
    key = table.record(subject, {"when": "2026-12-01 10:00", "rows": [1, 2]})
    assert key == provenance_key(subject)
    assert table.fresh(subject)["rows"] == [1, 2]
    assert table.fresh(subject)["subject"] == subject
    assert table.fresh({**subject, "model": "b"}) is None


def test_a_stale_entry_says_what_changed_since(table: JsonTable) -> None:
    before = {"machine": "m", "model": "a", "versions": {"torch": "2.12", "nncf": "3.0"}}
    table.record(before, {"when": "2026-11-01 10:00"})
    newer = {**before, "versions": {"torch": "2.13", "nncf": "3.0"}}
    table.record(newer, {"when": "2026-11-20 10:00"})
    now = {**before, "versions": {"torch": "2.13", "nncf": "3.1"}}
    assert table.why_stale(now, ("machine", "model")) == "stale: versions.nncf: 3.0 -> 3.1"
    # another model, or another kind of entry (other fields), was never measured: no reason
    assert table.why_stale({**now, "model": "z"}, ("machine", "model")) is None
    assert table.why_stale({"machine": "m", "model": "a"}, ("machine", "model")) is None


def test_no_other_module_builds_a_key_of_its_own() -> None:
    """A stored measurement's key is `provenance_key`: no module hashes a JSON dump of
    its own (`hashlib.sha256(json.dumps(...))`, the shape of every builder this
    replaced)."""
    builders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "provenance.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "sha256"
                and "json.dumps" in ast.unparse(node)
            ):
                builders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert builders == []
