"""A run reads and encodes identical content once, on both stores: a file whose bytes an
indexed document has is copied (found at every path it lives at), a moved file keeps its
chunks under its new path, a file touched without a change is not extracted, and a chunk
text stored anywhere (boilerplate, quoted mail) or repeated within a run is encoded once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from attnswitch.indexing.location import open_store
from attnswitch.jobs import run as run_module
from attnswitch.jobs.run import RunOptions, run
from store_testing import Recording

# One thread reads, in order (`run.read_ahead`), so the spy on `load` sees every read.
OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, read_workers=0)
BOILERPLATE = (
    "This message and its attachments are confidential and intended solely for "
    "the addressee named above. If you received it in error, delete it."
)


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """The sources a run extracts (`ingest.load` calls), in order."""
    seen: list[str] = []
    real = run_module.load

    def load(entry, **kwargs):
        seen.append(entry.source)
        return real(entry, **kwargs)

    monkeypatch.setattr(run_module, "load", load)
    return seen


def sources_with(store, root: Path, word: str) -> set[str]:
    """The sources whose chunks a keyword search for `word` finds."""
    hits = store.keyword(word, 1000)
    return {row.source for row in store.chunks([cid for cid, _ in hits]).values()}


def test_a_copy_is_encoded_once_and_found_at_both_paths(
    docs: Path, encoder, location, loads
) -> None:
    original = docs / "postgresql/tutorial-start.html"
    (docs / "copies").mkdir()
    shutil.copy2(original, docs / "copies" / "start.html")
    recording = Recording(encoder)
    with open_store(location) as store:
        summary = run(docs, store, OPTIONS, get_encoder=lambda: recording)
        assert (summary.new, summary.copied, summary.indexed) == (5, 1, 5)
        assert len(recording.texts) == len(set(recording.texts)) == summary.chunks_encoded
        assert (
            sorted(loads).count("copies/start.html")
            + sorted(loads).count("postgresql/tutorial-start.html")
            == 1
        )
        first = store.document_chunks(docs, "postgresql/tutorial-start.html")
        copy = store.document_chunks(docs, "copies/start.html")
        assert [c.text for c in copy] == [c.text for c in first] and first
        word = max(first[0].text.split(), key=len).strip(".,;:()")
        assert sources_with(store, docs, word) >= {
            "postgresql/tutorial-start.html",
            "copies/start.html",
        }
        # dense search finds the chunk's vector at both paths
        ids, vectors = store.vectors()
        row = {int(i): r for r, i in enumerate(ids)}
        found = store.dense(vectors[[row[first[0].id]]], 2)[0]
        assert {store.chunks([cid])[cid].source for cid, _ in found} == {
            "postgresql/tutorial-start.html",
            "copies/start.html",
        }
        assert store.status().copies == 1


def test_a_moved_file_keeps_its_chunks_without_reading_or_encoding(
    docs: Path, encoder, location, loads
) -> None:
    recording = Recording(encoder)
    with open_store(location) as store:
        run(docs, store, OPTIONS, get_encoder=lambda: recording)
        before = store.document_chunks(docs, "postgresql/tutorial-update.html")
        (docs / "moved").mkdir()
        os.rename(docs / "postgresql/tutorial-update.html", docs / "moved/update.html")
        encoded, loads[:] = len(recording.texts), []
        summary = run(docs, store, OPTIONS, get_encoder=lambda: recording)
        assert (summary.moved, summary.new, summary.deleted, summary.chunks_encoded) == (1, 0, 0, 0)
        assert loads == [] and len(recording.texts) == encoded
        after = store.document_chunks(docs, "moved/update.html")
        assert [(c.id, c.text) for c in after] == [(c.id, c.text) for c in before]
        assert "postgresql/tutorial-update.html" not in store.sources(docs)
        again = run(docs, store, OPTIONS, get_encoder=lambda: recording)
        assert again.unchanged == again.files == 4


def test_a_file_rewritten_with_the_same_bytes_is_not_extracted(
    docs: Path, encoder, location, loads
) -> None:
    with open_store(location) as store:
        run(docs, store, OPTIONS, get_encoder=lambda: encoder)
        path = docs / "postgresql/tutorial-start.html"
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        loads[:] = []
        summary = run(docs, store, OPTIONS, get_encoder=lambda: encoder)
        assert (summary.unchanged, summary.changed, loads) == (4, 0, [])
        # and the next run finds it fresh without hashing it
        assert run(docs, store, OPTIONS, get_encoder=lambda: encoder).unchanged == 4


def test_a_chunk_text_stored_anywhere_or_repeated_is_encoded_once(
    tmp_path: Path, encoder, location
) -> None:
    root = tmp_path / "mail"
    root.mkdir()
    for name, body in (
        ("a.txt", "Quarterly figures are attached for review."),
        ("b.txt", "The meeting moves to Thursday at ten."),
    ):
        (root / name).write_text(f"{body}\n\n{BOILERPLATE}\n")
    recording = Recording(encoder)
    with open_store(location) as store:
        first = run(root, store, OPTIONS, get_encoder=lambda: recording)
        # the boilerplate paragraph of both mails was encoded once in the one call
        assert len(recording.texts) == len(set(recording.texts)) == 3
        assert (first.chunks_encoded, first.chunks_reused, first.chunks_stored) == (3, 1, 4)
        (root / "c.txt").write_text(f"Lunch is on the team today.\n\n{BOILERPLATE}\n")
        second = run(root, store, OPTIONS, get_encoder=lambda: recording)
        assert (second.new, second.chunks_encoded, second.chunks_reused) == (1, 1, 1)
        assert recording.texts[-1].startswith("Lunch")
        assert len(sources_with(store, root, "confidential")) == 3
