"""A row of a CSV file is found by its own values (issue 53): each row is a chunk of its
own, written as "header: value" pairs, so a keyword query for one row's values ranks that
row's chunk first, holding that row alone and naming its line, in a real index built and
searched by `attnswitch.index` and `attnswitch.search`, on both stores."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest

import attnswitch
from attnswitch.documents.readers.blocks import Location

FIRST = ("Alice", "Bruno", "Chloe", "David", "Emma", "Farid", "Gita", "Hugo", "Ines", "Jonas")
LAST = ("Martin", "Bernard", "Dubois", "Thomas", "Robert", "Petit", "Durand", "Leroy")
CITIES = ("Lyon", "Paris", "Lille", "Nantes", "Nice", "Rennes", "Brest", "Dijon")
DEPARTMENTS = ("sales", "finance", "support", "research", "legal", "operations")
HEADER = ("id", "name", "city", "department", "salary", "start_date")


def staff_rows(n: int = 500) -> list[tuple[str, ...]]:
    """`n` rows of a staff list whose names, cities and departments repeat (the values of
    one row are shared with many others, one at a time)."""
    pick = random.Random(7)
    return [
        (
            f"E{1000 + i}",
            f"{pick.choice(FIRST)} {pick.choice(LAST)}",
            pick.choice(CITIES),
            pick.choice(DEPARTMENTS),
            str(pick.randint(30_000, 90_000)),
            f"2020-{pick.randint(1, 12):02d}-{pick.randint(1, 28):02d}",
        )
        for i in range(n)
    ]


@pytest.fixture
def indexed(location, tmp_path: Path) -> tuple[str, list[tuple[str, ...]]]:
    root = tmp_path / "sheets"
    root.mkdir()
    rows = staff_rows()
    with open(root / "staff.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        writer.writerows(rows)
    (root / "notes.md").write_text("# Notes\n\nAlice from Lyon works in sales; Hugo in Paris.\n")
    summary = attnswitch.index(root, str(location), read_workers=0)
    assert summary.status == "completed" and summary.indexed == 2
    return str(location), rows


def test_a_keyword_query_for_one_row_s_values_finds_that_row_alone(indexed) -> None:
    db, rows = indexed
    for i in (3, 41, 250, 499):
        row = rows[i]
        hits = attnswitch.search(f"{row[1]} {row[2]} {row[4]}", db=db, k=5, mode="keyword")
        assert hits and hits[0].path.endswith("staff.csv"), [h.text for h in hits]
        record = " | ".join(f"{h}: {v}" for h, v in zip(HEADER, row, strict=True))
        assert hits[0].text == record
        assert Location.from_dict(hits[0].location).rows == (i + 2, i + 2)  # line 1: header
