"""The numbers the docs quote (defaults, limits, windows) and the error codes they list are
the code's: each is read out of the page's text and compared with the constant the code
uses, so a constant changed without its page (or a page edited alone) fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from attnswitch.indexing import store
from attnswitch.service import batching, limits, schemas
from attnswitch.service.config import ServiceConfig

ROOT = Path(__file__).resolve().parents[1]
SERVICE = (ROOT / "docs" / "service.md").read_text()
SERVICE_SOURCES = ROOT / "src" / "attnswitch" / "service"


WORDS = {"half": 0.5}  # numbers the page writes as words


def quoted(pattern: str, text: str = SERVICE) -> list[float]:
    """Every number the page states where `pattern` (one group: the number, with thousands
    separators allowed, or a word of `WORDS`) matches; at least one."""
    found = [
        WORDS[m] if m in WORDS else float(m.replace(",", "")) for m in re.findall(pattern, text)
    ]
    assert found, f"docs/service.md: expected a sentence matching {pattern!r}"
    return found


def option_default(option: str) -> str:
    """The default column of `option`'s row in the options table."""
    row = re.search(rf"^\| `{re.escape(option)}` \| ([^|]+) \|", SERVICE, re.M)
    assert row, f"docs/service.md: expected a row for {option}"
    return row.group(1).strip()


MIB = 2**20
DEFAULTS = ServiceConfig.__dataclass_fields__


@pytest.mark.parametrize(
    ("option", "field", "unit"),
    [
        ("--max-body-bytes", "max_body_bytes", MIB),
        ("--max-items", "max_items", 1),
        ("--max-queue", "max_queue_items", 1),
        ("--batch-tokens", "batch_tokens", 1),
        ("--max-wait-ms", "max_wait_ms", 1),
        ("--request-timeout", "request_timeout_s", 1),
        ("--drain-timeout", "drain_timeout_s", 1),
        ("--header-timeout", "header_timeout_s", 1),
        ("--body-timeout", "body_timeout_s", 1),
        ("--port", "port", 1),
        ("--query-fill", "query_fill", 1),
    ],
)
def test_option_defaults_are_the_config_defaults(option: str, field: str, unit: int) -> None:
    (number,) = quoted(r"^`?(\d[\d,.]*)", option_default(option))
    assert number * unit == DEFAULTS[field].default, option


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        (r"at the cost measured over the last (\d+) encoder calls", batching.RATE_WINDOW),
        (r"must fit in (half) the time left", batching.ADMIT_MARGIN),
        (
            r"`Retry-After` \(seconds until the work ahead is\s+done, 1 to (\d+)\)",
            batching.MAX_RETRY_AFTER_S,
        ),
        (r"(\d+) characters per token of the", limits.CHARS_PER_TOKEN),
        (r"drops at most (\d+) MiB more of the body", limits.DRAIN_BYTES / MIB),
        (
            r"Bodies: `--max-body-bytes` on the bytes read \((\d+) MiB at most",
            limits.DRAIN_BYTES / MIB,
        ),
        (r"\(at most (\d+)\)", schemas.MAX_INPUT_ITEMS),
        (r"or over (\d+)\)", schemas.MAX_INPUT_ITEMS),
        (r"checked at (\d+) items", schemas.MAX_INPUT_ITEMS),
        (r"Below ([\d,]+) chunks dense search is exact", store.EXACT_BELOW),
        (r"search beam of a large index, 1 to (\d+)", store.MAX_EF_SEARCH),
    ],
)
def test_quoted_numbers_are_the_constants(pattern: str, value: float) -> None:
    assert set(quoted(pattern)) == {value}, pattern


def raised_codes() -> dict[int, set[str]]:
    """status -> the `code=` of every `ServiceError(status, ..., code="...")` in the
    service's source."""
    codes: dict[int, set[str]] = {}
    for path in SERVICE_SOURCES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") == "ServiceError"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                continue
            code = next((k.value for k in node.keywords if k.arg == "code"), None)
            if isinstance(code, ast.Constant):
                codes.setdefault(node.args[0].value, set()).add(code.value)
    return codes


def documented_codes(status: int) -> set[str]:
    row = re.search(rf"^\| {status} \|.*\| ([^|]*) \|$", SERVICE, re.M)
    assert row, f"docs/service.md: expected a row for status {status} in the errors table"
    return set(re.findall(r"`(\w+)`", row.group(1)))


@pytest.mark.parametrize("status", sorted(raised_codes()))
def test_every_error_code_the_service_raises_is_in_the_table(status: int) -> None:
    missing = raised_codes()[status] - documented_codes(status)
    assert not missing, f"docs/service.md, status {status}: expected the codes {missing}"


def test_the_errors_table_is_one_table() -> None:
    """Every status row sits in the one table (none stranded after a paragraph)."""
    rows = re.findall(r"^\| (\d{3}) \|", SERVICE, re.M)
    table = re.search(r"^\| status \| when \| `code` \|\n\|[-|]+\|\n((?:\|.*\|\n)+)", SERVICE, re.M)
    assert table and re.findall(r"^\| (\d{3}) \|", table.group(1), re.M) == rows
