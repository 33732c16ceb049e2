"""`attnswitch search` as a reader sees it: a hybrid result's fused score shown beside its
cosine similarity and keyword score, each with its rank in its own list, the same numbers
that `--json` gives; paths relative to the indexed folder."""

from __future__ import annotations

import json

import pytest
from cli_testing import Indexed, invoke

from attnswitch.indexing.search import DENSE_WEIGHT, where

QUERY = "how do I update rows in a table"


def cells(table: str, bar: str) -> list[list[str]]:
    """The cells of a rich table's lines that start with `bar` (┃: the header, │: rows)."""
    return [
        [c.strip() for c in line.split(bar)[1:-1]]
        for line in table.splitlines()
        if line.startswith(bar)
    ]


@pytest.mark.parametrize("mode", ["hybrid", "dense", "keyword"])
def test_plain_output_shows_the_scores_of_the_json(indexed: Indexed, mode: str) -> None:
    args = ("search", QUERY, "-k", "5", "--mode", mode, "--db", str(indexed.db))
    found = json.loads(invoke(*args, "--json").stdout)["data"]
    assert len(found) == 5
    plain = invoke(*args)
    assert plain.exit_code == 0, plain.output
    (header,) = cells(plain.stdout, "┃")
    shown = {r[0]: dict(zip(header, r)) for r in cells(plain.stdout, "│") if r[0].isdigit()}
    assert list(shown) == [str(h["rank"]) for h in found]
    for h in found:
        row = shown[str(h["rank"])]
        label = where(h["path"], h["location"], h["heading_path"])
        assert row["source"].startswith(f"{label} #{h['ordinal']}"[:40])
        if mode == "hybrid":
            assert header[1:4] == ["fused", "cosine (rank)", "keyword (rank)"]
            assert row["fused"] == f"{h['score']:.4f}"
            assert row["cosine (rank)"] == (
                "-"
                if h["dense_rank"] is None
                else f"{h['dense_similarity']:.3f} (#{h['dense_rank']})"
            )
            assert row["keyword (rank)"] == (
                "-"
                if h["keyword_rank"] is None
                else f"{h['keyword_score']:.3g} (#{h['keyword_rank']})"
            )
        else:
            assert row[{"dense": "cosine", "keyword": "keyword"}[mode]] == f"{h['score']:.3f}"
    if mode == "hybrid":
        assert all(h["dense_rank"] is not None for h in found)  # 5 of 50 candidates
        weights = f"fused: {DENSE_WEIGHT:g} x cosine + {1 - DENSE_WEIGHT:g} x keyword"
        assert weights in " ".join(plain.stdout.split())


GUIDE = (
    "# json\n\nEncoding and decoding of JSON documents.\n\n## Basic Usage\n\n"
    "Call dumps to serialise a Python object as a JSON formatted string.\n\n"
    "## Decoding\n\nCall loads to parse a JSON document into Python objects.\n"
)


@pytest.fixture(scope="module")
def structured(tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    """A Markdown guide with nested headings and a one-page PDF, indexed by `run`."""
    from cli_testing import CORPUS

    base = tmp_path_factory.mktemp("structured")
    folder = base / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text(GUIDE)
    (folder / "release.pdf").write_bytes((CORPUS / "sqlite/copyright-release.pdf").read_bytes())
    result = invoke("run", str(folder), "--db", str(base / "data"), "--no-progress", "--json")
    assert result.exit_code == 0, result.output
    return Indexed(folder, base / "data")


@pytest.mark.parametrize(
    ("query", "path", "heading_path", "location", "label"),
    [
        (
            "serialise a Python object",
            "guide.md",
            ["json", "Basic Usage"],
            {},
            "guide.md · json › Basic Usage",
        ),
        (
            "parse a JSON document",
            "guide.md",
            ["json", "Decoding"],
            {},
            "guide.md · json › Decoding",
        ),
        ("dedicate to the public domain", "release.pdf", [], {"page": 1}, "release.pdf p. 1"),
    ],
)
def test_a_hit_shows_its_heading_path_and_location(
    structured: Indexed, query, path, heading_path, location, label
) -> None:
    args = ("search", query, "-k", "1", "--mode", "keyword", "--db", str(structured.db))
    (hit,) = json.loads(invoke(*args, "--json").stdout)["data"]
    assert (hit["path"], hit["heading_path"], hit["location"]) == (path, heading_path, location)
    plain = invoke(*args)
    assert plain.exit_code == 0, plain.output
    (row,) = [r for r in cells(plain.stdout, "│") if r[0] == "1"]
    assert row[2] == f"{label} #{hit['ordinal']}"


def test_per_document_gives_one_passage_of_each_document(indexed: Indexed) -> None:
    """`--per-document` (issue 53): k distinct documents, each with how many of its other
    passages matched, the same in the table and `--json`; `attnswitch.search` agrees."""
    import attnswitch

    args = ("search", QUERY, "-k", "3", "--mode", "keyword", "--db", str(indexed.db))
    answer = json.loads(invoke(*args, "--per-document", "--json").stdout)
    found = answer["data"]
    assert answer["group"] == "document"
    assert len({h["path"] for h in found}) == len(found) == 3
    assert any(h["more_in_document"] > 0 for h in found)
    chunks = json.loads(invoke(*args, "--json").stdout)["data"]
    assert all(h["more_in_document"] == 0 for h in chunks)
    plain = invoke(*args, "--per-document")
    assert plain.exit_code == 0, plain.output
    from attnswitch.cli.search_command import _more

    # the table wraps its cells: the line each row's source cell gets, checked as the
    # table builds it
    assert [_more(h) for h in found] == [
        f"; {h['more_in_document']} more in this document" if h["more_in_document"] else ""
        for h in found
    ]
    assert "more" in plain.stdout
    hits = attnswitch.search(QUERY, indexed.db, 3, "keyword", group="document")
    assert [(h.path, h.more_in_document) for h in hits] == [
        (h["path"], h["more_in_document"]) for h in found
    ]
