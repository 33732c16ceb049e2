"""A run's explicit state (`jobs/run_state.py`) and its composition: the counts, the
encode queue with the stored vectors its documents keep, and a `RunJob` given another
`Encoding` than the in-process one (one that encodes elsewhere gets every chunk of a
document, as Ray's actors do)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from attnswitch.documents.chunk import Chunk
from attnswitch.documents.ingest import Document
from attnswitch.indexing.store import SQLiteStore
from attnswitch.indexing.writer import IndexWriter
from attnswitch.jobs.encode_phase import LocalEncoding
from attnswitch.jobs.run import LocalSource, RunJob, RunOptions, drive, run
from attnswitch.jobs.run_state import EncodeQueue, RunCounts, RunTarget
from store_testing import Recording

OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, read_workers=0)
BOILERPLATE = (
    "This message and its attachments are confidential and intended solely for "
    "the addressee named above. If you received it in error, delete it."
)


def chunk(text: str) -> Chunk:
    return Chunk(0, text, 0, len(text), len(text.split()))


def document(source: str) -> Document:
    return Document("r", source, Path("/r") / source, 1, 1, "sha", kind="text", text="t")


def test_counts_add_to_the_kind_named_and_refuse_others() -> None:
    counts = RunCounts()
    counts.add_kind("new")
    counts.add_kind("changed", 2)
    counts.add_kind("new", -1)
    assert (counts.new, counts.changed) == (0, 2)
    with pytest.raises(ValueError, match="kind: expected one of new, changed, got 'moved'"):
        counts.add_kind("moved")


def test_the_queue_is_full_at_chunks_per_call_and_take_empties_it() -> None:
    queue = EncodeQueue(chunks_per_call=3)
    queue.add(document("a"), [chunk("one"), chunk("two")], "new")
    assert not queue.full
    queue.add(document("b"), [chunk("three")], "changed")
    assert queue.full
    taken = queue.take()
    assert [(d.source, len(c), k) for d, c, k in taken] == [("a", 2, "new"), ("b", 1, "changed")]
    assert queue.pending == [] and not queue.full


class Elsewhere(LocalEncoding):
    """An encoding that does not encode here (as Ray's actors): documents go whole."""

    @property
    def encode_here(self) -> None:
        return None


def test_an_encoding_that_encodes_elsewhere_gets_every_chunk(tmp_path: Path, encoder) -> None:
    root = tmp_path / "mail"
    root.mkdir()
    (root / "a.txt").write_text(f"Quarterly figures are attached for review.\n\n{BOILERPLATE}\n")
    with SQLiteStore(tmp_path / "db") as store:
        run(root, store, OPTIONS, get_encoder=lambda: encoder)
        (root / "b.txt").write_text(f"Lunch is on the team today.\n\n{BOILERPLATE}\n")
        here = Recording(encoder)
        target = RunTarget(root, store, IndexWriter(store))
        job = RunJob(target, OPTIONS, LocalSource(), Elsewhere(lambda: here), None)
        summary = drive(job, time.perf_counter())
        # the boilerplate's stored vector is not kept: the encoder got both chunks of b.txt
        assert (summary.new, summary.chunks_encoded, summary.chunks_reused) == (1, 2, 0)
        assert len(here.texts) == 2 and here.texts[0].startswith("Lunch")
        assert summary.chunks_stored == 4 and summary.status == "completed"
        assert job.counts.new == 1 and job.target.run_id == summary.run_id
