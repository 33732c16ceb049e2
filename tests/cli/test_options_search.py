"""A search's options (`cli/options.py`: `ModeOption`, `with_filter_options`), on a small
typer app of their own: what they parse is what `SearchRequest.of` takes, their help is
the one definition's (`Mode.help`, `FIELD_HELP`), and a bad mode is refused by typer."""

from __future__ import annotations

import json
import re
from types import MappingProxyType

import pytest
import typer
from typer.testing import CliRunner

from attnswitch.cli.options import (
    FilterValues,
    JsonOption,
    ModeOption,
    filter_option_name,
    with_filter_options,
)
from attnswitch.indexing.filters import FIELD_HELP, FIELDS
from attnswitch.indexing.requests import Mode, SearchRequest

app = typer.Typer()


@app.command("search")
@with_filter_options
def search(
    query: str,
    k: int = 5,
    mode: ModeOption = Mode.HYBRID,
    filters: FilterValues = MappingProxyType({}),
    as_json: JsonOption = False,
) -> None:
    """Print the request the options make."""
    request = SearchRequest.of(query, k, mode, **filters)
    print(json.dumps({"filters": dict(filters), "request": request.to_dict(), "json": as_json}))


@app.command("other")
def other() -> None:
    """A second command, so that `search` is named on the command line."""


def run(*args: str):
    return CliRunner(env={"COLUMNS": "200"}).invoke(app, list(args))


def test_the_options_give_the_request() -> None:
    result = run(
        "search",
        "rows",
        "--mode",
        "keyword",
        "--path",
        "reports/",
        "--path",
        "*.md",
        "--type",
        "pdf",
        "--modified-after",
        "2024-05-01",
        "--json",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["json"] is True
    assert out["filters"] == dict(
        zip(FIELDS, [["reports/", "*.md"], ["pdf"], "2024-05-01", None], strict=True)
    )
    request = out["request"]
    assert (request["query"], request["mode"]) == ("rows", Mode.KEYWORD.value)
    assert request["filter"]["path"] == ["reports/", "*.md"]


def test_no_filter_option_is_no_filter() -> None:
    result = run("search", "rows")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["filters"] == dict.fromkeys(FIELDS)
    assert out["request"]["filter"] is None and out["request"]["mode"] == Mode.HYBRID.value


def test_the_help_is_the_one_definitions() -> None:
    result = run("search", "--help")
    assert result.exit_code == 0, result.output
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())  # rich's box left out
    for mode in Mode:
        assert f"{mode.value}: {mode.help}" in text
    for name in FIELDS:
        assert filter_option_name(name) in text
        assert FIELD_HELP[name][1:] in text


def test_an_unknown_mode_is_refused_by_typer() -> None:
    result = run("search", "rows", "--mode", "fuzzy")
    assert result.exit_code == 2
    assert "Invalid value for '--mode'" in result.output


@pytest.mark.parametrize(
    ("argument", "option"),
    [("path", "--path"), ("path[2]", "--path"), ("modified_before", "--modified-before")],
)
def test_an_argument_is_named_as_its_option(argument: str, option: str) -> None:
    assert filter_option_name(argument) == option


def test_a_command_without_filters_or_with_a_field_parameter_is_refused() -> None:
    def bare(query: str) -> None:
        pass

    with pytest.raises(TypeError, match="expected a parameter `filters`"):
        with_filter_options(bare)

    def clash(query: str, path: str = "", filters: FilterValues = MappingProxyType({})) -> None:
        pass

    with pytest.raises(TypeError, match="expected no parameter named as a filter field"):
        with_filter_options(clash)
