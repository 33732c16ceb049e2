"""The index's read-only views (`service/overview.py`) on an `Index` of each store: a chunk among
its neighbours at the ends and in the middle of a document, skipped files filtered and
paged, the summary's sizes and counts, and no absolute path in any answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.index import Index
from attnswitch.indexing.store import ChunkRecord
from attnswitch.service import overview
from attnswitch.service.errors import ServiceError

CHUNKS = 7


@pytest.fixture
def store(location, tmp_path: Path):
    """Two documents of 7 chunks, an empty file and a broken PDF (both skipped), in each
    store, opened as an `Index`."""
    root = tmp_path / "docs"
    root.mkdir()
    for name in ("a.txt", "b.txt"):
        (root / name).write_text(f"document {name} " * 20)
    (root / "empty.txt").write_text("")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a PDF body\n")
    rng = np.random.default_rng(3)
    with Index.open_store(location) as store:
        for doc in ingest(root):
            if not doc.ok:
                store.record_skip(doc)
                continue
            chunks = [
                ChunkRecord(f"{doc.source} part {i}", 3, 10 * i, 10 * i + 10) for i in range(CHUNKS)
            ]
            store.write_document(doc, chunks, rng.normal(size=(CHUNKS, 8)))
    with Index.open(location) as index:
        yield index


def shown(path: str) -> str:
    return Path(path).name


@pytest.mark.parametrize(
    "ordinal, around, expected",
    [
        (0, 2, [0, 1, 2]),
        (3, 2, [1, 2, 3, 4, 5]),
        (6, 2, [4, 5, 6]),
        (3, 0, [3]),
        (2, 10, list(range(CHUNKS))),
    ],
)
def test_a_chunk_comes_with_its_neighbours(store, ordinal, around, expected) -> None:
    rows = store.document_chunks(store.status().roots[0], "b.txt")
    context = overview.chunk_context(store, shown, rows[ordinal].id, around)
    assert [c["ordinal"] for c in context["data"]] == expected
    assert [c["text"] for c in context["data"]] == [f"b.txt part {i}" for i in expected]
    assert context["path"] == "b.txt" and context["root"] == "docs"
    assert context["ordinal"] == ordinal and context["chunks_in_document"] == CHUNKS


def test_an_unknown_chunk_is_404(store) -> None:
    with pytest.raises(ServiceError) as refused:
        overview.chunk_context(store, shown, 10**9, 2)
    assert refused.value.status == 404 and refused.value.code == "chunk_not_found"


@pytest.mark.parametrize(
    "match, offset, limit, paths, total",
    [
        ("", 0, 50, ["broken.pdf", "empty.txt"], 2),
        ("PDF", 0, 50, ["broken.pdf"], 1),  # the file's name or its reason, any case
        ("empty", 0, 50, ["empty.txt"], 1),
        ("docs", 1, 1, ["empty.txt"], 2),  # the folder matches; the second page of one
        ("nothing-like-this", 0, 50, [], 0),
    ],
)
def test_skipped_files_filter_and_page(store, match, offset, limit, paths, total) -> None:
    page = overview.skipped_files(store, shown, match, offset, limit)
    assert [row["path"] for row in page["data"]] == paths
    assert page["total"] == total
    assert all(row["reason"] for row in page["data"])


def test_the_summary_counts_and_sizes(store, tmp_path) -> None:
    summary = overview.index_summary(store, shown)
    assert summary["documents"] == 2 and summary["chunks"] == 2 * CHUNKS
    sizes = sum((tmp_path / "docs" / n).stat().st_size for n in ("a.txt", "b.txt"))
    assert summary["bytes"] == sizes
    assert summary["skipped"] == 2 and sum(summary["skipped_by_reason"].values()) == 2
    assert summary["roots"] == ["docs"]
    assert str(tmp_path) not in repr(summary)


@pytest.mark.parametrize(
    "chunking, overlap, shown",
    [
        ("blocks", 32, {"chunking": "blocks", "max_tokens": 254, "overlap": 0}),
        ("windows", 32, {"chunking": "windows", "max_tokens": 254, "overlap": 32}),
        ("windows", 0, {"chunking": "windows", "max_tokens": 254, "overlap": 0}),
    ],
)
def test_the_summary_says_how_documents_are_cut(chunking, overlap, shown) -> None:
    """Blocks share no tokens, whatever the unused overlap option held (the page said
    "overlap 32" of an index of blocks); windows show theirs."""
    from attnswitch.indexing.config import IndexConfig

    config = IndexConfig(
        model=None,
        model_name="m",
        model_fingerprint="f" * 64,
        dim=8,
        pooling="mean",
        normalize=True,
        max_seq_length=256,
        engine="torch",
        precision="fp32",
        max_tokens=254,
        overlap=overlap,
        chunking=chunking,
        embed_headings=True,
    )
    assert overview.chunking(config) == {**shown, "embed_headings": True}
