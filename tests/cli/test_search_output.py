"""`attnswitch search` as a reader sees it: a hybrid result's fused score shown beside its
cosine similarity and keyword score, each with its rank in its own list, the same numbers
that `--json` gives; paths relative to the indexed folder."""

from __future__ import annotations

import json
import re

import pytest

from cli_testing import Indexed, invoke

QUERY = "how do I update rows in a table"


def cells(table: str, bar: str) -> list[list[str]]:
    """The cells of a rich table's lines that start with `bar` (┃: the header, │: rows)."""
    return [[c.strip() for c in line.split(bar)[1:-1]]
            for line in table.splitlines() if line.startswith(bar)]


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
        assert row["source"].startswith(f"{h['path']} #{h['ordinal']}")
        if mode == "hybrid":
            assert header[1:4] == ["fused", "cosine (rank)", "keyword (rank)"]
            assert row["fused"] == f"{h['score']:.4f}"
            assert row["cosine (rank)"] == (
                "-" if h["dense_rank"] is None else
                f"{h['dense_similarity']:.3f} (#{h['dense_rank']})")
            assert row["keyword (rank)"] == (
                "-" if h["keyword_rank"] is None else
                f"{h['keyword_score']:.3g} (#{h['keyword_rank']})")
        else:
            assert row[{"dense": "cosine", "keyword": "keyword"}[mode]] == f"{h['score']:.3f}"
    if mode == "hybrid":
        assert all(h["dense_rank"] is not None for h in found)  # 5 of 50 candidates
        assert re.search(r"fused: reciprocal rank fusion", " ".join(plain.stdout.split()))
