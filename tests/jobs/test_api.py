"""The Python calls `attnswitch.index` and `attnswitch.search` (`jobs/api.py`) on a real
folder with the real model: they index and find what `attnswitch run` and `attnswitch
search --json` do, in the same hit shape, with the same filters as the CLI's options; a
bad argument raises an error naming it, before any model loads; and `import attnswitch`
imports no part of the document engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import attnswitch
from attnswitch.cli.pipeline import app
from attnswitch.errors import ConfigError
from attnswitch.indexing.store import StoreInputError
from corpus_testing import copy_corpus

PAGES = (
    "postgresql/tutorial-update.html",
    "postgresql/tutorial-delete.html",
    "python-tutorial/appetite.rst.txt",
    "python-tutorial/interpreter.rst.txt",
)
QUERY = "how do I update rows in a table"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[Path, Path]:
    root = copy_corpus(tmp_path_factory.mktemp("api") / "docs", PAGES)
    db = root.parent / "index"
    summary = attnswitch.index(root, db, max_tokens=64, overlap=8, read_workers=0)
    assert summary.status == "completed" and summary.indexed == len(PAGES)
    return root, db


def cli_json(*args: str) -> dict:
    done = CliRunner(env={"COLUMNS": "200"}).invoke(
        app(), [*args, "--json"], catch_exceptions=False
    )
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


@pytest.mark.parametrize("mode", ["hybrid", "dense", "keyword"])
def test_search_gives_the_cli_s_hits(indexed, mode) -> None:
    root, db = indexed
    hits = attnswitch.search(QUERY, db=db, k=4, mode=mode)
    assert "postgresql/tutorial-update.html" in [h.path for h in hits]
    cli = cli_json("search", QUERY, "-k", "4", "--mode", mode, "--db", str(db))["data"]
    assert [h.to_dict() for h in hits] == cli


@pytest.mark.parametrize(
    "filters, options, kept",
    [
        ({"type": "html"}, ["--type", "html"], {"postgresql"}),
        ({"path": "python-tutorial/"}, ["--path", "python-tutorial/"], {"python-tutorial"}),
        # with the indexed folder's name first, as the page and the service show a path
        (
            {"path": "docs/python-tutorial/"},
            ["--path", "docs/python-tutorial/"],
            {"python-tutorial"},
        ),
        (
            {"path": ["*.txt"], "type": "text"},
            ["--path", "*.txt", "--type", "text"],
            {"python-tutorial"},
        ),
        (
            {"modified_after": "2000-01-01"},
            ["--modified-after", "2000-01-01"],
            {"postgresql", "python-tutorial"},
        ),
    ],
)
def test_filters_are_the_cli_s_options(indexed, filters, options, kept) -> None:
    root, db = indexed
    hits = attnswitch.search(QUERY, db=db, k=3, **filters)
    assert len(hits) == 3 and {h.path.split("/")[0] for h in hits} <= kept
    cli = cli_json("search", QUERY, "-k", "3", "--db", str(db), *options)
    assert [h.to_dict() for h in hits] == cli["data"]
    assert cli["filter"]["documents"] is None  # hits were found


def test_a_filter_that_keeps_nothing_says_so(indexed) -> None:
    root, db = indexed
    assert attnswitch.search(QUERY, db=db, type="pdf") == []
    cli = cli_json("search", QUERY, "--db", str(db), "--type", "pdf")
    assert cli["data"] == [] and cli["filter"]["documents"] == 0
    plain = CliRunner(env={"COLUMNS": "200"}).invoke(
        app(), ["search", QUERY, "--db", str(db), "--type", "pdf"], catch_exceptions=False
    )
    assert plain.exit_code == 0 and "no document passes the filter (--type pdf)" in plain.stdout


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"query": ""}, "query"),
        ({"query": None}, "query"),
        ({"k": 0}, "k"),
        ({"mode": "fuzzy"}, "mode"),
        ({"type": "pdff"}, "type"),
        ({"modified_before": "tomorrow"}, "modified_before"),
        ({"path": ""}, "path"),
    ],
)
def test_a_bad_argument_is_named(indexed, kwargs, argument) -> None:
    root, db = indexed
    call = {"query": QUERY, "db": db, **kwargs}
    with pytest.raises(StoreInputError, match=rf"^{argument}: expected ") as error:
        attnswitch.search(**call)
    assert error.value.argument == argument


def test_a_missing_index_and_a_missing_folder_are_named(tmp_path) -> None:
    with pytest.raises(StoreInputError, match=r"^db: expected an index made by"):
        attnswitch.search(QUERY, db=tmp_path / "none")
    with pytest.raises(StoreInputError, match=r"^folder: expected a folder to index"):
        attnswitch.index(tmp_path / "none", tmp_path / "db")
    with pytest.raises(StoreInputError, match=r"^options: expected fields of RunOptions"):
        attnswitch.index(tmp_path, tmp_path / "db", max_tokenz=3)


def test_the_cli_names_a_bad_filter_by_its_option(indexed) -> None:
    root, db = indexed
    done = CliRunner(env={"COLUMNS": "200"}).invoke(
        app(), ["search", QUERY, "--db", str(db), "--modified-after", "soon"]
    )
    assert done.exit_code == 2
    assert "--modified-after: expected an ISO 8601 date" in done.output


def test_importing_attnswitch_imports_no_document_engine() -> None:
    """No module of the document engine or the index is loaded by `import attnswitch`."""
    code = (
        "import sys, attnswitch; print(sorted(m for m in sys.modules if m.startswith("
        "('attnswitch.documents', 'attnswitch.indexing', 'attnswitch.jobs'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_python_calls_keep_their_names_once_the_stores_are_loaded() -> None:
    """`attnswitch.index` is the function, before and after a module of the index package
    (`attnswitch.indexing.store`) is imported."""
    code = (
        "import attnswitch; before = attnswitch.index; import attnswitch.indexing.store; "
        "print(callable(before), attnswitch.index is before)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_index_rules_add_up_as_the_cli_s(tmp_path: Path) -> None:
    """`include`/`exclude`/`gitignore` change the stored rules as `run`'s options do: an
    exclude given later keeps the stored gitignore rule; `clear_rules` drops them."""
    root = tmp_path / "drive"
    for name, text in {
        ".gitignore": "private/\n",
        "private/salaries.txt": "secret salary table",
        "wiki/home.txt": "the wiki home page",
        "notes.txt": "notes on the lighthouse budget",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    db = tmp_path / "index"
    options = {"max_tokens": 64, "overlap": 8, "read_workers": 0}
    assert attnswitch.index(root, db, gitignore=True, **options).indexed == 2
    later = attnswitch.index(root, db, exclude=["wiki/"], **options)
    assert (later.new, later.deleted, later.indexed) == (0, 1, 1)
    cleared = attnswitch.index(root, db, clear_rules=True, **options)
    assert (cleared.new, cleared.indexed) == (2, 3)
    with pytest.raises(ConfigError, match="exclude: expected a list of glob patterns"):
        attnswitch.index(root, db, exclude="wiki/", **options)
