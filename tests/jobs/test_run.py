"""The pipeline run on real documents, the real model and a real SQLite store: what it
stores, that re-runs are no-ops, that changed, deleted and bad files are handled, and that
a document whose encoding fails is recorded and retried."""

from __future__ import annotations

import gc
import mmap
import os
import shutil
import sqlite3
import time
import weakref
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.chunk import chunk_document
from attnswitch.documents.ingest import Skip, ingest
from attnswitch.indexing.config import IndexMismatchError, chunk_tokenizer
from attnswitch.indexing.sqlite_file import DB_NAME
from attnswitch.indexing.store import SQLiteStore
from attnswitch.jobs import encode as encode_module
from attnswitch.jobs import run as run_module
from attnswitch.jobs.options import ReadOptions
from attnswitch.jobs.run import MAX_FAILURES_IN_ROW, RunOptions, run
from attnswitch.observe.memwatch import MemoryGrowthWarning
from store_testing import Recording
from vector_rule import assert_within_rule, oracle

# Short chunks keep encoding cheap; the chunking code is the same at any size.
OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8)


def state(store: SQLiteStore, root: Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """source -> (chunk texts in order, their stored vectors) for every indexed document."""
    ids, matrix = store.vectors()
    row_of = {int(i): r for r, i in enumerate(ids)}
    out = {}
    for source in sorted(store.sources(root)):
        chunks = store.document_chunks(root, source)
        if chunks:
            out[source] = ([c.text for c in chunks], matrix[[row_of[c.id] for c in chunks]])
    return out


class Counting:
    """Hands out the shared encoder and counts how often the run asked for it."""

    def __init__(self, encoder):
        self.encoder, self.calls = encoder, 0

    def __call__(self):
        self.calls += 1
        return self.encoder


def test_run_stores_chunks_and_their_own_vectors(docs: Path, tmp_path: Path, encoder) -> None:
    with SQLiteStore(tmp_path / "db") as store:
        summary = run(docs, store, OPTIONS, get_encoder=Counting(encoder))
        stored = state(store, docs)
    tok = chunk_tokenizer(encoder.spec)
    defaults = RunOptions()
    cut = {
        d.source: chunk_document(
            d.text,
            d.blocks,
            tok,
            chunking=defaults.chunk.chunking,
            max_tokens=32,
            embed_headings=defaults.chunk.embed_headings,
        )
        for d in ingest(docs)
    }
    expected = {source: [c.text for c in chunks] for source, chunks in cut.items()}
    assert {s: texts for s, (texts, _) in stored.items()} == expected
    assert summary.status == "completed"
    assert (summary.new, summary.indexed, summary.skipped) == (len(expected), len(expected), 0)
    assert summary.chunks_encoded == summary.chunks_stored == sum(map(len, expected.values()))
    # Several documents share each encode call: every vector must be its own chunk's.
    texts = [t for texts, _ in stored.values() for t in texts]
    vectors = np.concatenate([v for _, v in stored.values()])
    # each vector is of the text the encoder read: the heading path, then the chunk's text
    read = [c.encoder_text for chunks in cut.values() for c in chunks]
    assert len(read) == len(texts)
    assert any(r != t for r, t in zip(read, texts)) == defaults.chunk.embed_headings
    # (stored in float16: each element within half a float16 step, 2^-11 of itself)
    np.testing.assert_allclose(vectors, encoder.encode(read), rtol=2.0**-11, atol=2e-5)
    assert summary.backends and summary.engine == encoder.engine
    assert summary.tokens_per_s > 0 and summary.cost["usd_per_million_tokens"] > 0


def test_rerun_on_unchanged_files_encodes_nothing(docs: Path, tmp_path: Path, encoder) -> None:
    with SQLiteStore(tmp_path / "db") as store:
        run(docs, store, OPTIONS, get_encoder=Counting(encoder))
        before = state(store, docs)
        ids_before = store.vectors()[0]
        again = Counting(encoder)
        summary = run(docs, store, OPTIONS, get_encoder=again)
        assert (summary.chunks_encoded, summary.unchanged, summary.new) == (0, 4, 0)
        assert again.calls == 0  # not even the model was loaded
        # A new mtime with the same bytes: read and hashed again, still not encoded.
        os.utime(docs / "postgresql" / "tutorial-start.html", ns=(1, 1))
        summary = run(docs, store, OPTIONS, get_encoder=again)
        assert (summary.chunks_encoded, summary.unchanged, again.calls) == (0, 4, 0)
        assert np.array_equal(store.vectors()[0], ids_before)
        after = state(store, docs)
    assert after.keys() == before.keys()
    for source, (texts, vectors) in before.items():
        assert after[source][0] == texts and np.array_equal(after[source][1], vectors)


def test_changed_new_and_deleted_files(docs: Path, tmp_path: Path, encoder) -> None:
    with SQLiteStore(tmp_path / "db") as store:
        run(docs, store, OPTIONS, get_encoder=Counting(encoder))
        untouched = store.document_chunks(docs, "postgresql/tutorial-advanced.html")
        changed = docs / "postgresql" / "tutorial-update.html"
        changed.write_text(
            "<html><body><p>Rewritten: the UPDATE command changes rows.</p></body></html>"
        )
        (docs / "postgresql" / "tutorial-conclusion.html").unlink()
        (docs / "new.md").write_text("# New\n\nA note about vacuum and analyze.\n")
        summary = run(docs, store, OPTIONS, get_encoder=Counting(encoder))
        assert (summary.new, summary.changed, summary.deleted, summary.unchanged) == (1, 1, 1, 2)
        assert store.lookup(docs, "postgresql/tutorial-conclusion.html") is None
        rows = store.document_chunks(docs, "postgresql/tutorial-update.html")
        assert [r.text for r in rows] == ["Rewritten: the UPDATE command changes rows."]
        assert store.document_chunks(docs, "postgresql/tutorial-advanced.html") == untouched
        assert summary.chunks_encoded == 1 + len(store.document_chunks(docs, "new.md"))
        # A file that turns bad loses its chunks and is recorded as skipped.
        changed.write_bytes(b"")
        summary = run(docs, store, OPTIONS, get_encoder=Counting(encoder))
        assert summary.skipped_files == [
            {"source": "postgresql/tutorial-update.html", "reason": "empty: 0 bytes"}
        ]
        assert store.document_chunks(docs, "postgresql/tutorial-update.html") == []
        total = sum(len(store.document_chunks(docs, s)) for s in store.sources(docs))
        assert store.status().chunks == total == summary.chunks_stored


def test_other_chunking_reencodes_everything(docs: Path, tmp_path: Path, encoder) -> None:
    with SQLiteStore(tmp_path / "db") as store:
        first = run(docs, store, OPTIONS, get_encoder=Counting(encoder))
        second = run(docs, store, OPTIONS.replace(max_tokens=48), get_encoder=Counting(encoder))
        assert (second.changed, second.unchanged) == (4, 0)
        assert second.config != first.config
        assert second.chunks_stored == store.status().chunks < first.chunks_stored


def _bad_inputs(root: Path) -> dict[str, str]:
    """One file of each bad kind; returns source -> the skip category expected."""
    root.mkdir()
    (root / "good.txt").write_text("Vacuum reclaims storage occupied by dead tuples.\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "blank.md").write_text("   \n\n  \t\n")
    (root / "binary.txt").write_bytes(bytes(range(256)) * 40)
    (root / "corrupt.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage\n")
    (root / "huge.txt").write_text("word " * 50_000)  # 250 kB, over the limit set below
    (root / "dangling.md").symlink_to(root / "missing-target.md")
    (root / "picture.gif").write_bytes(b"GIF89a\x01\x00\x01\x00")  # images read: PNG, JPEG, TIFF
    expected = {
        "empty.txt": Skip.EMPTY,
        "blank.md": Skip.EMPTY,
        "binary.txt": Skip.BINARY,
        "corrupt.pdf": Skip.CORRUPT_PDF,
        "huge.txt": Skip.TOO_LARGE,
        "dangling.md": Skip.UNREADABLE,
        "picture.gif": Skip.BINARY,
    }
    if os.geteuid() != 0:  # root reads any file whatever its mode
        (root / "locked.txt").write_text("secret")
        (root / "locked.txt").chmod(0)
        expected["locked.txt"] = Skip.UNREADABLE
    # Not UTF-8: decoded with a detected charset, indexed, and noted.
    latin = "Café crème, déjà vu, élève, garçon, où, très bien.\n"
    (root / "latin1.txt").write_bytes(latin.encode("cp1252"))
    return {k: v.value for k, v in expected.items()}


def test_bad_input_is_recorded_and_the_run_goes_on(tmp_path: Path, encoder) -> None:
    root = tmp_path / "bad"
    expected = _bad_inputs(root)
    options = OPTIONS.replace(max_bytes=100_000)
    with SQLiteStore(tmp_path / "db") as store:
        summary = run(root, store, options, get_encoder=Counting(encoder))
        assert summary.status == "completed"
        got = {f["source"]: f["reason"].split(":")[0] for f in summary.skipped_files}
        assert got == expected
        assert summary.skipped_by_reason == {
            k: list(expected.values()).count(k) for k in set(expected.values())
        }
        assert summary.indexed == 2 and summary.new == 2
        assert [n["source"] for n in summary.notes] == ["latin1.txt"]
        assert "cp1252" in summary.notes[0]["note"]
        latin = store.document_chunks(root, "latin1.txt")
        assert latin[0].text.startswith("Café crème")
        status = store.status()
        assert {s for _, s, _ in status.skipped_files} == set(expected)
        # Skips are re-checked each run (a fixed file gets indexed) and stay recorded.
        again = run(root, store, options, get_encoder=Counting(encoder))
        assert (again.skipped, again.chunks_encoded) == (len(expected), 0)
        (root / "empty.txt").write_text("Now it has text about autovacuum.\n")
        fixed = run(root, store, options, get_encoder=Counting(encoder))
        assert (fixed.changed, fixed.skipped, fixed.chunks_encoded) == (1, len(expected) - 1, 1)


class FailsOn:
    """The real encoder, except that texts containing `marker` fail to encode (a stand-in
    for a device error on one document: no real input makes the engine fail)."""

    def __init__(self, encoder, marker: str):
        self.encoder, self.marker = encoder, marker
        self.engine, self.device = encoder.engine, getattr(encoder, "device", None)

    def encode(self, texts, **kw):
        if any(self.marker in t for t in texts):
            raise RuntimeError(f"injected failure on {self.marker!r}")
        return self.encoder.encode(texts, **kw)


def test_a_chunk_that_fails_to_encode_stays_searchable_and_is_retried(
    docs: Path, tmp_path: Path, encoder
) -> None:
    """The full pass tries a failed call one text at a time; a text the encoder fails on
    alone keeps its words and quick vector, and the next run encodes it. Texts failing one
    after another are the encoder's fault: the run stops (docs/architecture.md, "Two
    passes")."""
    with SQLiteStore(tmp_path / "db") as store:
        summary = run(docs, store, OPTIONS, get_encoder=lambda: FailsOn(encoder, "UPDATE"))
        refused = chunks_with(tmp_path / "db" / DB_NAME, "UPDATE")
        assert summary.status == "completed" and summary.indexed == 4
        assert 0 < len(refused) < MAX_FAILURES_IN_ROW
        assert summary.chunks_unencoded == len(refused)
        assert summary.chunks_filled == summary.chunks_stored - len(refused)
        hits = store.keyword("UPDATE", 5)  # still found by its words
        assert hits and all("UPDATE" in store.chunks([i])[i].text for i, _ in hits)
        retry = run(docs, store, OPTIONS, get_encoder=lambda: encoder)
        assert (retry.unchanged, retry.indexed, retry.chunks_unencoded) == (4, 4, 0)
        assert retry.chunks_encoded + retry.chunks_reused == len(refused)
        # Texts failing one after another: the fault is not theirs, the run stops.
        for i, page in enumerate(sorted((docs / "postgresql").iterdir())):
            page.write_text(f"<p>UPDATE number {i}</p>")
        with pytest.raises(RuntimeError, match="injected failure"):
            run(docs, store, OPTIONS, get_encoder=lambda: FailsOn(encoder, "UPDATE"))
        assert store.runs(limit=1)[0].status == "failed"
        assert store.unencoded_count() >= MAX_FAILURES_IN_ROW


def chunks_with(db: Path, marker: str) -> list[str]:
    """The texts of the chunks stored in the SQLite index `db` that contain `marker`."""
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT text FROM chunks WHERE instr(text, ?) > 0", (marker,))
        return [text for (text,) in rows]


class Leaky:
    """The real encoder, keeping 8 MiB more memory after each call (a stand-in for a leak)."""

    def __init__(self, encoder):
        self.encoder, self.kept = encoder, []
        self.engine, self.device = encoder.engine, getattr(encoder, "device", None)

    def encode(self, texts, **kw):
        # A fresh anonymous mapping, touched: heap memory freed by earlier tests in this
        # process would otherwise absorb the "leak" and leave RSS flat.
        block = np.frombuffer(mmap.mmap(-1, 8 * 2**20), np.uint8)
        block[:] = 1
        self.kept.append(block)
        return self.encoder.encode(texts, **kw)


def test_the_memory_watchdog_judges_the_run(
    docs: Path, tmp_path: Path, encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short warm-up, so that a few documents give enough encode calls to judge.
    monkeypatch.setattr(encode_module, "WATCH_WARMUP_CALLS", 1)
    monkeypatch.setattr(encode_module, "WATCH_MIN_CALLS", 8)
    small_calls = OPTIONS.replace(chunks_per_call=1)  # one encode call a chunk
    with SQLiteStore(tmp_path / "steady") as store:
        steady = run(docs, store, small_calls, get_encoder=Counting(encoder))
    assert steady.memory["source"] == "rss" and steady.memory["samples"] >= 8
    assert not steady.memory["growing"] and "steady" in steady.memory["reason"]
    with SQLiteStore(tmp_path / "leaky") as store, pytest.warns(MemoryGrowthWarning):
        leaky = run(docs, store, small_calls, get_encoder=lambda: Leaky(encoder))
    assert leaky.memory["growing"] and "growing" in leaky.memory["reason"]


def test_a_store_of_another_model_is_refused(docs: Path, tmp_path: Path, encoder) -> None:
    other = tmp_path / "other-model"
    shutil.copytree(encoder.spec.path, other, ignore=shutil.ignore_patterns("*.safetensors"))
    (other / "model.safetensors").symlink_to(encoder.spec.path / "model.safetensors")
    config = (other / "config.json").read_text()
    (other / "config.json").write_text(
        config.replace('"hidden_act"', '"note": "other",\n  "hidden_act"')
    )
    with SQLiteStore(tmp_path / "db") as store:
        run(docs, store, OPTIONS, get_encoder=Counting(encoder))
        runs = len(store.runs())
        with pytest.raises(IndexMismatchError, match="use another --db"):
            run(
                docs,
                store,
                OPTIONS.replace(model=str(other)),
                get_encoder=Counting(encoder),
            )
        assert len(store.runs()) == runs  # refused before starting a run


def test_packed_batches_store_the_same_vectors(docs: Path, tmp_path: Path, encoder) -> None:
    # the stored text is what the encoder read (no heading path before it), so the oracle
    # encodes the same texts; the layout, not the headings, is what this test is about
    options = OPTIONS.replace(embed_headings=False)
    with SQLiteStore(tmp_path / "padded") as padded, SQLiteStore(tmp_path / "packed") as packed:
        run(docs, padded, options, get_encoder=Counting(encoder))
        summary = run(docs, packed, options.replace(layout="packed"))
        assert summary.layout == "packed" and summary.backends
        a, b = state(padded, docs), state(packed, docs)
    assert {s: t for s, (t, _) in a.items()} == {s: t for s, (t, _) in b.items()}
    texts = [t for source in sorted(a) for t in a[source][0]]
    ref, naive = oracle(encoder.spec.path, texts)
    for name, stored in (("padded", a), ("packed", b)):
        got = np.concatenate([stored[source][1] for source in sorted(stored)])
        assert_within_rule(got, ref, naive, name, stored=True)


def test_bad_options_are_refused() -> None:
    for kw, match in (
        ({"chunks_per_call": 0}, "chunks_per_call"),
        ({"chunking": "pages"}, "chunking: expected one of blocks, windows"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"hourly_usd": -1.0}, "hourly_usd"),
        ({"precision": "fp16"}, "precision"),
        ({"layout": "ragged"}, "layout"),
    ):
        with pytest.raises(ValueError, match=match):
            RunOptions.of(**kw)


def test_read_ahead_keeps_order_and_reads_at_most_depth_ahead(tmp_path, monkeypatch):
    from attnswitch.documents.ingest import scan

    for i in range(12):
        (tmp_path / f"doc{i:02d}.txt").write_text(f"document number {i}\n")
    entries = sorted(scan(tmp_path), key=lambda e: e.source)
    started: list[str] = []
    real_load = run_module.load

    def counting_load(entry, **kwargs):
        started.append(entry.source)
        return real_load(entry, **kwargs)

    monkeypatch.setattr(run_module, "load", counting_load)
    docs = run_module.read_ahead(entries, ReadOptions(max_bytes=2**20), depth=3)
    taken = [next(docs).source for _ in range(2)]
    assert taken == [e.source for e in entries[:2]]
    docs.close()
    assert len(started) <= 2 + 3  # the two taken and at most three ahead
    everything = [
        d.source for d in run_module.read_ahead(entries, ReadOptions(max_bytes=2**20), depth=3)
    ]
    assert everything == [e.source for e in entries]
    assert all(
        d.text.startswith("document number")
        for d in run_module.read_ahead(entries, ReadOptions(max_bytes=2**20), depth=3)
    )


class ListingWatched(run_module.LocalSource):
    """The run's own source, keeping weak references to the entries it lists; once it has
    given the run every document, it counts how many of them the run still holds."""

    def __init__(self) -> None:
        self.listed: list[weakref.ref] = []
        self.held_at_end: int | None = None

    def listing(self, target, read):
        entries = super().listing(target, read)
        self.listed = [weakref.ref(e) for e in entries]
        return entries

    def documents(self, request):
        yield from super().documents(request)
        gc.collect()
        self.held_at_end = sum(ref() is not None for ref in self.listed)


@pytest.mark.parametrize("read_workers", [0, 1], ids=["thread", "worker-process"])
@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_a_run_lets_go_of_each_listed_file_once_it_is_read(
    tmp_path: Path, encoder, read_workers: int, quick: bool
) -> None:
    # The listing is O(files) (about 680 bytes a file): a run holds only the files still
    # to read.
    root = tmp_path / "root"
    root.mkdir()
    for i in range(30):
        (root / f"doc{i:02d}.txt").write_text(f"Document number {i} of the listing.\n")
    options = RunOptions.of(
        max_tokens=32, overlap=4, chunks_per_call=8, read_workers=read_workers, quick=quick
    )
    source = ListingWatched()
    with SQLiteStore(tmp_path / "db") as store:
        job = run_module.local_job(root, store, options, lambda: encoder)
        job.source = source
        summary = run_module.drive(job, time.perf_counter())
    assert (summary.files, summary.indexed, summary.new) == (30, 30, 30)
    assert len(source.listed) == 30
    assert source.held_at_end == 0


@pytest.mark.parametrize("forced", ["bf16", "fp32"])
def test_the_index_records_the_precision_auto_resolved_to(
    docs: Path, tmp_path: Path, monkeypatch, forced
) -> None:
    from attnswitch.engines import ENV_PRECISION, get_engine, runtime
    from attnswitch.indexing.config import stored_config

    monkeypatch.setenv(ENV_PRECISION, forced)  # what "auto" stands for, without measuring
    assert OPTIONS.encode.precision == "auto"
    with SQLiteStore(tmp_path / "db") as store:
        summary = run(docs, store, OPTIONS)
        stored = stored_config(store)
    assert summary.precision == stored.precision == forced
    assert summary.precision_reason == f"forced by ${ENV_PRECISION}"
    # a query encodes with the index's precision, whatever "auto" would pick now
    monkeypatch.setenv(ENV_PRECISION, "fp32" if forced == "bf16" else "bf16")
    runtime.current().reset(encoders=False)  # the environment is read again
    assert get_engine(stored.model, stored.engine, stored.precision).precision == forced


def test_a_changed_document_encodes_only_its_changed_chunks(tmp_path: Path, encoder) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    sections = {
        "Install": "Run pip install to get the package and its extras.",
        "Usage": "Call dumps to serialise an object as a string.",
        "Limits": "Documents larger than the limit are skipped with a reason.",
    }
    page = "# Guide\n\n" + "".join(f"## {h}\n\n{t}\n\n" for h, t in sections.items())
    (root / "guide.md").write_text(page)
    with SQLiteStore(tmp_path / "db") as store:
        run(root, store, OPTIONS, get_encoder=lambda: encoder)
        before = state(store, root)["guide.md"]
        (root / "guide.md").write_text(page.replace("as a string", "as a JSON string"))
        recording = Recording(encoder)
        summary = run(root, store, OPTIONS, get_encoder=lambda: recording)
        after = state(store, root)["guide.md"]
    # three chunks: "Guide" and "Install" (headings in a row stay together), Usage, Limits
    assert summary.changed == 1 and summary.chunks_reused == 2
    prefix = "Guide › Usage\n\n" if RunOptions().chunk.embed_headings else ""
    assert recording.texts == [
        prefix + "Usage\n\nCall dumps to serialise an object as a JSON string."
    ]
    assert len(before[0]) == len(after[0]) == 3
    for i in (0, 2):
        assert after[0][i] == before[0][i]
        assert after[1][i].tobytes() == before[1][i].tobytes()
    assert after[1][1].tobytes() != before[1][1].tobytes()


def test_the_summary_accounts_for_every_second_of_the_wall_time(
    docs: Path, tmp_path: Path, encoder
) -> None:
    """`time_parts` names where the wall time went, each part timed on its own, and adds up
    to the wall time with `other` the rest; tokens/s are over the encoder's time."""
    from attnswitch.jobs.phases import PARTS

    with SQLiteStore(tmp_path / "db") as store:
        s = run(docs, store, OPTIONS, get_encoder=Counting(encoder))
    parts = s.time_parts
    assert tuple(parts) == (*PARTS, "other")
    assert all(v >= 0 for v in parts.values()), parts
    assert sum(parts.values()) == pytest.approx(s.wall_s, abs=1e-9)
    assert parts["encode"] == s.encode_s > 0 and parts["load"] == s.load_s
    assert parts["measure"] == s.measure_s
    for name in ("read", "chunk", "store", "scan"):  # this run did each of them
        assert parts[name] > 0, name
    assert s.tokens_per_s == pytest.approx(s.tokens_encoded / s.encode_s)
    assert s.chunks_per_s == pytest.approx(s.chunks_encoded / s.encode_s)
    # a re-run reads and encodes nothing: those parts are 0, the sum still the wall
    with SQLiteStore(tmp_path / "db") as store:
        again = run(docs, store, OPTIONS, get_encoder=Counting(encoder))
    assert again.time_parts["encode"] == again.time_parts["read"] == 0.0
    assert sum(again.time_parts.values()) == pytest.approx(again.wall_s, abs=1e-9)
    assert again.tokens_per_s is None
