"""Search filters (`indexing.filters`): values parsed and refused by field name, paths,
kinds, extensions and dates matched as documented, and on both stores a filter applied
inside the query: where every chunk an unfiltered search would return fails the filter and
k chunks pass it, a filtered search returns exactly k of those, in every mode, also when
the dense half answers from an ANN index (SQLite's HNSW graph, pgvector's HNSW index)."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.filters import SearchFilter, relative_paths
from attnswitch.indexing.location import open_store
from attnswitch.indexing.search import search
from attnswitch.indexing.store import ChunkRecord, SQLiteStore, StoreInputError

DIM = 16
NEAR, FAR = 12, 3  # documents near the query (fail the filters) and far from it (pass)
PER_DOC = 20
K = 7
JAN, JUN = dt.datetime(2024, 1, 15, tzinfo=dt.UTC), dt.datetime(2024, 6, 15, tzinfo=dt.UTC)


# -- parsing and matching -----------------------------------------------------------------


def test_no_value_is_no_filter() -> None:
    assert SearchFilter.of() is None
    assert SearchFilter.of(path=[], type=()) is None
    assert SearchFilter.from_mapping({}) is None


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"type": "pdff"}, "type"),
        ({"type": "."}, "type"),
        ({"type": ["pdf", ""]}, "type[1]"),
        ({"path": "  "}, "path"),
        ({"path": ["a", 3]}, "path[1]"),
        ({"modified_after": "last tuesday"}, "modified_after"),
        ({"modified_before": 20240101}, "modified_before"),
        ({"modified_after": "2024-06-01", "modified_before": "2024-01-01"}, "modified_before"),
        ({"modified_after": "2999-01-01"}, "modified_after"),
        ({"type": 5}, "type"),
        ({"path": 5}, "path"),
        ({"path": "[z-a]*"}, "path"),
        ({"path": "#*.md"}, "path"),
        ({"path": ["docs/", "/srv/[abc*"]}, "path[1]"),
        ({"path": "*?" * 513}, "path"),
        ({"path": [f"d{i}/" for i in range(101)]}, "path"),
    ],
)
def test_a_bad_value_is_refused_by_its_field(kwargs, field) -> None:
    with pytest.raises(StoreInputError, match="^" + re.escape(field) + ": expected ") as e:
        SearchFilter.of(**kwargs)
    assert e.value.argument == field


def test_an_unknown_field_of_a_mapping_is_named() -> None:
    with pytest.raises(StoreInputError, match=r"^filter\.kind: expected one of path, type"):
        SearchFilter.from_mapping({"kind": "pdf"})


@pytest.mark.parametrize(
    "value, kinds, extensions",
    [
        ("pdf", {"pdf"}, set()),
        ("PDF", {"pdf"}, set()),
        ("mail", {"eml", "mbox"}, set()),
        ("spreadsheet", {"xlsx", "ods", "xls", "csv"}, set()),
        (".md", set(), {"md"}),
        ("md", set(), {"md"}),
        ("tsv", set(), {"tsv"}),
        (["html", ".rst"], {"html"}, {"rst"}),
    ],
)
def test_types_are_kinds_groups_or_extensions(value, kinds, extensions) -> None:
    where = SearchFilter.of(type=value)
    assert (set(where.kinds), set(where.extensions)) == (kinds, extensions)


@pytest.mark.parametrize(
    "pattern, source, passes",
    [
        ("reports", "reports/q1.pdf", True),
        ("reports/", "reports/q1.pdf", True),
        ("reports", "reports-old/q1.pdf", False),
        ("reports/q1.pdf", "reports/q1.pdf", True),
        ("*.pdf", "a/b/c.pdf", True),
        ("*.pdf", "a/b/c.pdfx", False),
        ("docs/**/*.md", "docs/x/y/z.md", True),
        ("docs/**/*.md", "other/docs/z.md", False),
        ("/srv/drive/*.md", "top.md", True),
        ("/srv/drive/*.md", "a/deep.md", False),
        ("/srv/drive/reports", "reports/q1.pdf", True),
        ("/srv/other", "reports/q1.pdf", False),
        # the path as hits show it: the folder's name (or more of the folders above) first
        ("drive/reports", "reports/q1.pdf", True),
        ("drive/reports/q1.pdf", "reports/q1.pdf", True),
        ("drive", "reports/q1.pdf", True),
        ("srv/drive/reports/", "reports/q1.pdf", True),
        ("drive/reports/*.pdf", "reports/q1.pdf", True),
        ("drive/*.md", "top.md", True),
        ("drive/*.md", "a/deep.md", False),
        ("rive/reports", "reports/q1.pdf", False),
        ("other/reports", "reports/q1.pdf", False),
        ("drive/reports", "drive-reports/q1.pdf", False),
        ("drive/other", "reports/q1.pdf", False),
    ],
)
def test_paths_are_prefixes_or_gitignore_globs(pattern, source, passes) -> None:
    where = SearchFilter.of(path=pattern)
    assert where.matches("/srv/drive", source, "pdf") is passes


def test_relative_paths_run_from_the_folder_and_each_folder_above() -> None:
    assert relative_paths("/srv/team/drive", "Scans/a.pdf") == (
        "Scans/a.pdf",
        "drive/Scans/a.pdf",
        "team/drive/Scans/a.pdf",
        "srv/team/drive/Scans/a.pdf",
    )
    assert relative_paths("/", "a.txt") == ("a.txt",)


def test_dates_are_inclusive_and_utc_unless_they_say() -> None:
    where = SearchFilter.of(modified_after="2024-01-15", modified_before="2024-06-15T00:00")
    assert where.after_ns == int(JAN.replace(hour=0).timestamp()) * 10**9
    assert where.before_ns == int(JUN.replace(hour=0).timestamp()) * 10**9
    shifted = SearchFilter.of(modified_after="2024-01-15T02:00+02:00")
    assert shifted.after_ns == where.after_ns
    assert SearchFilter.of(modified_after=dt.date(2024, 1, 15)).after_ns == where.after_ns


# -- on both stores: the filter is inside the query -----------------------------------------


def _set_mtime(path: Path, when: dt.datetime) -> None:
    os.utime(path, ns=(int(when.timestamp()) * 10**9,) * 2)


@pytest.fixture
def drive(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """`near/` (Markdown, January): documents whose chunks are the closest to the query
    and say its word most often; `far/` (text, June): documents that only mention it."""
    root = tmp_path / "drive"
    for i in range(NEAR):
        path = root / "near" / f"n{i:02}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# near {i}\n\nvacuum vacuum vacuum notes {i}\n")
        _set_mtime(path, JAN)
    for i in range(FAR):
        path = root / "far" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"far notes {i} that mention vacuum once\n")
        _set_mtime(path, JUN)
    query = np.zeros(DIM, np.float32)
    query[0] = 1.0
    return root, query


def _fill(store, root: Path, query: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    run = store.begin_run(root)
    for doc in ingest(root):
        near = doc.source.startswith("near/")
        noise = rng.normal(scale=0.1 if near else 1.0, size=(PER_DOC, DIM))
        vectors = (query * (3.0 if near else -1.0) + noise).astype(np.float32)
        word = "vacuum vacuum vacuum" if near else "vacuum"
        chunks = [ChunkRecord(f"{doc.source} part {i} {word}", 4, i, i + 1) for i in range(PER_DOC)]
        store.write_document(doc, chunks, vectors)
    store.finish_run(run)


def _open(location, tmp_path: Path):
    """The store at `location`; SQLite with a low exact-search threshold, so the dense
    half answers from the HNSW graph."""
    if isinstance(location, Path):
        return SQLiteStore(location, exact_below=50)
    return open_store(location)


FILTERS = [
    {"path": "far"},
    {"path": "*.txt"},
    {"type": "text"},
    {"type": ".txt"},
    {"modified_after": "2024-06-01"},
    {"modified_before": "2024-12-31", "path": "far/"},
    {"path": "drive/far"},  # as hits show it, the folder's name first
    {"path": "drive/far/*.txt"},
]


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
@pytest.mark.parametrize(
    "values", FILTERS, ids=lambda v: ",".join(f"{k}={w}" for k, w in v.items())
)
def test_a_filtered_search_returns_k_hits_that_pass(
    location, tmp_path, drive, mode, values
) -> None:
    root, query = drive
    where = SearchFilter.of(**values)
    with _open(location, tmp_path) as store:
        _fill(store, root, query)
        unfiltered = search(store, query, K, text="vacuum", mode=mode)
        assert unfiltered and all(h.path.startswith("near/") for h in unfiltered)
        hits = search(store, query, K, text="vacuum", mode=mode, where=where)
        assert len(hits) == K, [h.path for h in hits]
        assert all(h.path.startswith("far/") for h in hits), [h.path for h in hits]
        assert len({h.chunk_id for h in hits}) == K


def test_the_filtered_dense_half_is_the_exact_top_k_of_what_passes(
    location, tmp_path, drive
) -> None:
    """From the ANN index too: the k nearest of the chunks that pass, as an exact search
    of only those finds them (random vectors, well separated: no tie)."""
    root, query = drive
    where = SearchFilter.of(path="far")
    with _open(location, tmp_path) as store:
        _fill(store, root, query)
        ids, matrix = store.vectors()
        allowed = {c for d in store.allowed_documents(where) for c in _chunk_ids_of(store, d)}
        keep = np.array([i in allowed for i in ids])
        scores = matrix[keep] @ query
        want = [int(i) for i in ids[keep][np.argsort(-scores)][:K]]
        got = [cid for cid, _ in store.dense(query[None, :], K, where=where)[0]]
        assert got == want


def _chunk_ids_of(store, doc_id: int) -> list[int]:
    mark = store._mark
    return [
        int(r[0]) for r in store._read(f"SELECT id FROM chunks WHERE doc_id = {mark}", (doc_id,))
    ]


def test_a_filter_that_keeps_nothing_returns_nothing(location, tmp_path, drive) -> None:
    root, query = drive
    with _open(location, tmp_path) as store:
        _fill(store, root, query)
        for mode in ("dense", "keyword", "hybrid"):
            where = SearchFilter.of(type="pdf")
            assert search(store, query, K, text="vacuum", mode=mode, where=where) == []
            assert store.allowed_documents(where) == []
