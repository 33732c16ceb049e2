"""The two passes (`jobs/passes.py`, docs/architecture.md "Two passes"), on both stores:
`run --quick` stores every chunk with its quick vector and no full one; a search encodes
its best candidates and keeps their vectors (never encoding them again); the full pass (a
plain run) fills in the rest, giving the vectors one plain run gives; killed with SIGKILL,
it resumes to the same index; filters and `forget` work before it is done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnswitch.cli import app
from attnswitch.indexing.index import Index
from attnswitch.indexing.location import open_store
from attnswitch.indexing.requests import SearchRequest
from attnswitch.indexing.writer import IndexWriter
from attnswitch.jobs import api
from attnswitch.jobs.run import RunOptions, run

OPTIONS = dict(max_tokens=32, overlap=4, chunks_per_call=8)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def vectors_by_chunk(location) -> dict[tuple[str, int], np.ndarray]:
    """(source, ordinal) -> the stored full vector, of every chunk that has one."""
    with open_store(location) as store:
        ids, matrix = store.vectors()
        rows = store.chunks(ids)
    return {(rows[int(i)].source, rows[int(i)].ordinal): matrix[r] for r, i in enumerate(ids)}


def assert_as_one_plain_run(docs: Path, location, tmp_path: Path, encoder) -> None:
    """The full vectors at `location` are those one plain run of `docs` stores (within a
    float16 rounding step of the transformer's own batches)."""
    plain = tmp_path / "plain" / "index.sqlite3"
    plain_run(docs, plain, encoder)
    got, want = vectors_by_chunk(location), vectors_by_chunk(plain)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], atol=2e-3)


def encoder_texts(location, ids) -> list[str]:
    """What the encoder reads for these chunks: the stored prefix and text."""
    with open_store(location) as store:
        found = {
            int(r[0]): (r[1] or "") + r[2]
            for r in store._read(  # a test's look under the store's API
                "SELECT id, prefix, text FROM chunks WHERE id IN ("
                + ", ".join(str(int(i)) for i in ids)
                + ")"
            )
        }
    return [found[int(i)] for i in ids]


def quick_run(docs: Path, location, encoder, **changed):
    options = {**OPTIONS, **changed}
    with open_store(location) as store:
        return run(
            docs,
            store,
            RunOptions.of(quick=True, **options),
            get_encoder=lambda: encoder,
        )


def plain_run(docs: Path, location, encoder):
    with open_store(location) as store:
        return run(docs, store, RunOptions.of(**OPTIONS), get_encoder=lambda: encoder)


def test_the_quick_pass_stores_quick_vectors_only(more_docs: Path, location, encoder) -> None:
    summary = quick_run(more_docs, location, encoder)
    assert summary.status == "completed" and summary.chunks_encoded == 0
    assert summary.chunks_quick == summary.chunks_stored > 0
    assert summary.chunks_unencoded == summary.chunks_stored
    with Index.open(location) as index:
        coverage = index.coverage()
        assert (coverage.quick_fraction, coverage.full_fraction) == (1.0, 0.0)
        assert coverage.unencoded_tokens > 0
        hits = index.searcher().search(SearchRequest.of("release the copyright", 3, "keyword")).hits
        assert hits and hits[0].source == "sqlite/copyright-release.pdf"
    with open_store(location) as store:
        assert store.dim is None  # the store's dimension: its first full vector's
        if isinstance(location, str):  # PostgreSQL typed its column ahead of them
            from attnswitch.indexing.postgres_schema import column_dim

            assert column_dim(store._conn, "embedding") == encoder.dim


def test_a_search_encodes_its_candidates_once_and_keeps_them(
    more_docs: Path, location, encoder
) -> None:
    quick_run(more_docs, location, encoder)
    request = SearchRequest.of("how do I update rows in a table", 5)
    with Index.open(location) as index:
        searcher = index.searcher()
        searcher.fill = 6
        first = searcher.search(request)
        assert first.filled is not None and 0 < first.filled.encoded <= 6
        assert first.filled.written == first.filled.encoded
        assert first.coverage_note and "full pass is not done" in first.coverage_note
        assert first.hits[0].source == "postgresql/tutorial-update.html"
        after = index.coverage().full
        assert after == first.filled.written
        again = searcher.search(request)
        # the first search's candidates have their vectors now: none is encoded again (the
        # budget goes to the next best that lack one)
        assert again.filled is not None
        assert not set(again.filled.encoded_ids) & set(first.filled.encoded_ids)
        assert again.hits[0].chunk_id == first.hits[0].chunk_id
        assert index.coverage().full == after + again.filled.written
    # the vectors a search kept are the transformer's, as a plain run stores them
    with open_store(location) as store:
        ids, kept = store.vectors()
    assert len(ids) == after + again.filled.written
    want = encoder.encode(encoder_texts(location, ids))
    np.testing.assert_allclose(kept, want, atol=2e-3)


@pytest.mark.parametrize("front", ["python", "cli"])
@pytest.mark.parametrize("fill", [0, 3])
def test_a_search_encodes_at_most_the_fill_its_caller_gives(
    more_docs: Path, location, encoder, front: str, fill: int
) -> None:
    """`attnswitch.search(fill=N)` and `attnswitch search --fill N`: N chunks encoded and
    kept at most (0: none; the question's candidates lacking a full vector are more than 3)."""
    quick_run(more_docs, location, encoder)
    query = "how do I update rows in a table"
    if front == "python":
        hits = api.search(query, db=str(location), k=5, fill=fill)
        assert hits[0].path == "postgresql/tutorial-update.html"
    else:
        done = invoke("search", query, "--db", str(location), "--fill", str(fill), "--json")
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout)["data"][0]["source"] == "postgresql/tutorial-update.html"
    api.open_indexes.close()
    with Index.open(location) as index:
        assert index.coverage().full == fill


def test_quick_then_full_gives_the_vectors_of_one_plain_run(
    more_docs: Path, location, tmp_path: Path, encoder
) -> None:
    quick_run(more_docs, location, encoder)
    summary = plain_run(more_docs, location, encoder)
    assert summary.unchanged == 6 and summary.chunks_filled == summary.chunks_stored
    assert summary.chunks_unencoded == 0
    assert_as_one_plain_run(more_docs, location, tmp_path, encoder)
    with Index.open(location) as index:
        assert index.coverage().full_fraction == 1.0
        result = index.searcher().search(SearchRequest.of("how do I update rows in a table", 3))
        assert result.filled is None and result.coverage_note is None


def test_filters_and_forget_before_the_full_pass(more_docs: Path, location, encoder) -> None:
    quick_run(more_docs, location, encoder)
    request = SearchRequest.of("lists and loops", 5, path="python-tutorial/")
    with Index.open(location) as index:
        result = index.searcher().search(request)
        assert result.hits and {h.source.split("/")[0] for h in result.hits} == {"python-tutorial"}
    with open_store(location) as store, IndexWriter(store) as writer:
        gone = writer.forget(more_docs.resolve(), "postgresql")
    assert gone == 4
    summary = plain_run(more_docs, location, encoder)  # the folder comes back: read again
    assert summary.new == 4 and summary.chunks_unencoded == 0


def test_fill_writes_only_where_a_chunk_has_no_vector_and_the_same_text(
    docs: Path, location, encoder
) -> None:
    quick_run(docs, location, encoder)
    with open_store(location) as store:
        (first, second, *_) = store.unencoded(10)
        vectors = encoder.encode([first.encoder_text, second.encoder_text])
        assert (
            store.fill_vectors([first.id, second.id], [first.vector_key, "another text"], vectors)
            == 1
        )
        assert store.fill_vectors([first.id], [first.vector_key], vectors[:1]) == 0  # has one
        assert {u.id for u in store.unencoded_among([first.id, second.id])} == {second.id}


FULL_PASS = """
import sys
from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, run

def said(progress):
    print("progress", flush=True)

with open_store(sys.argv[2]) as store:
    run(sys.argv[1], store, RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=4),
        on_progress=said)
"""


# A quick pass that stops, once its first document is committed, in its progress callback
# (reading stdin, which the test never writes): killed there, it is killed mid-pass.
QUICK_PASS = """
import sys
from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, run

def said(progress):
    if progress.chunks > 0:
        print("committed", flush=True)
        sys.stdin.readline()

with open_store(sys.argv[2]) as store:
    run(sys.argv[1], store, RunOptions.of(quick=True, max_tokens=32, overlap=4,
        chunks_per_call=8), on_progress=said)
"""


@pytest.mark.slow
def test_a_quick_pass_killed_with_sigkill_resumes_to_the_same_index(
    more_docs: Path, location, tmp_path: Path, encoder
) -> None:
    total = sum(1 for p in more_docs.rglob("*") if p.is_file())
    proc = subprocess.Popen(
        [sys.executable, "-c", QUICK_PASS, str(more_docs), str(location)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.stdout.readline() == "committed\n", proc.stderr.read()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with open_store(location) as store:
        at_kill = store.root_counts(more_docs)[0]
        assert store.unencoded_count() > 0 and store.coverage().full == 0
    assert 0 < at_kill < total, (at_kill, total)
    summary = plain_run(more_docs, location, encoder)
    assert summary.status == "completed"
    assert (summary.new, summary.unchanged) == (total - at_kill, at_kill)
    assert summary.chunks_unencoded == 0
    assert_as_one_plain_run(more_docs, location, tmp_path, encoder)


def test_a_full_pass_killed_with_sigkill_resumes_to_the_same_index(
    more_docs: Path, location, tmp_path: Path, encoder
) -> None:
    quick_run(more_docs, location, encoder, chunks_per_call=4)
    with open_store(location) as store:
        before = store.unencoded_count()
    proc = subprocess.Popen(
        [sys.executable, "-c", FULL_PASS, str(more_docs), str(location)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    with open_store(location) as store:
        for line in proc.stdout:  # each progress line: the child committed a call
            if line.startswith("progress") and store.unencoded_count() < before:
                break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with open_store(location) as store:
        at_kill = store.unencoded_count()
    assert 0 < at_kill < before, (at_kill, before)
    summary = plain_run(more_docs, location, encoder)
    assert summary.status == "completed" and summary.chunks_unencoded == 0
    assert summary.chunks_filled == at_kill
    assert_as_one_plain_run(more_docs, location, tmp_path, encoder)
