"""Reading in worker processes (`jobs.read_pool`): documents come as they finish, a file
that kills its worker or runs out of time is skipped and the rest are read, the files in
flight are bounded, a run stores what a run reading on one thread stores, starts no worker
when nothing is to read, and a stopped run leaves no worker behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import psutil
import pytest

from attnswitch.documents.ingest import Skip, load, scan
from attnswitch.indexing.store import DB_NAME, SQLiteStore
from attnswitch.jobs import read_pool
from attnswitch.jobs.options import ReadOptions
from attnswitch.jobs.read_pool import (
    default_read_workers,
    ocr_pages_per_worker,
    read_in_pool,
    usable_cpus,
)
from attnswitch.jobs.run import RunOptions, run
from corpus_testing import copy_corpus
from heap_arenas import glibc_only
from read_pool_loaders import (
    arenas_load,
    crashing_load,
    logging_load,
    ocr_workers_load,
    pid_load,
    stalling_load,
    warning_load,
)
from tesseract_starts import TesseractStarts

FIXTURES = Path(__file__).resolve().parents[1] / "documents" / "readers" / "fixtures"
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="needs Tesseract (Debian: tesseract-ocr)"
)
MIB = ReadOptions(max_bytes=2**20)  # reads files of up to 1 MiB
OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, embed_headings=False)


@pytest.fixture(autouse=True)
def _ocr_not_cached(cache_dir: Path) -> None:
    """Each test starts with an empty cache: several need a scan's OCR to take its seconds
    (a text kept by another test's read of the same scan would come back at once)."""


def text_files(root: Path, names: list[str], size: int = 40) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / name).write_text(f"The file {name}. " + "word " * ((size - 20) // 5))
    return root


def workers_of_pools(parent: psutil.Process | None = None) -> list[psutil.Process]:
    """Live reading workers of `parent` (default: this process): its spawned children."""
    out = []
    for child in (parent or psutil.Process()).children():
        try:
            if (
                "multiprocessing.spawn" in " ".join(child.cmdline())
                and child.status() != psutil.STATUS_ZOMBIE
            ):
                out.append(child)
        except psutil.NoSuchProcess:
            pass
    return out


@needs_tesseract
def test_a_slow_file_does_not_hold_up_the_others(tmp_path: Path) -> None:
    root = text_files(tmp_path / "docs", [f"note-{i}.txt" for i in range(5)])
    shutil.copy(FIXTURES / "scan.pdf", root / "a-scan.pdf")  # first in order; OCR: seconds
    entries = scan(root)
    assert entries[0].source == "a-scan.pdf"
    docs = list(read_in_pool(entries, MIB, workers=2))
    assert [d.source for d in docs][-1] == "a-scan.pdf"
    assert sorted(d.source for d in docs) == sorted(e.source for e in entries)
    assert {d.source: d.text for d in docs} == {
        e.source: load(e, max_bytes=2**20).text for e in entries
    }


def test_a_file_that_kills_its_worker_is_skipped_and_the_others_are_read(tmp_path: Path) -> None:
    root = text_files(tmp_path / "docs", ["crash.txt"] + [f"note-{i}.txt" for i in range(6)])
    docs = {d.source: d for d in read_in_pool(scan(root), MIB, workers=2, load_file=crashing_load)}
    assert docs["crash.txt"].skip is Skip.CRASHED
    assert docs["crash.txt"].reason == "extraction crashed: the worker died of SIGSEGV"
    assert all(docs[f"note-{i}.txt"].ok for i in range(6))
    assert len(docs) == 7


@needs_tesseract
def test_a_file_over_the_timeout_is_skipped_and_the_others_are_read(tmp_path: Path) -> None:
    root = text_files(tmp_path / "docs", [f"note-{i}.txt" for i in range(3)])
    shutil.copy(FIXTURES / "scan.tif", root / "scan.tif")  # OCR: more than 0.3 s
    docs = {
        d.source: d
        for d in read_in_pool(
            scan(root), ReadOptions(max_bytes=2**20, read_timeout_s=0.3), workers=2
        )
    }
    assert docs["scan.tif"].reason == "extraction timed out: more than 0.3 s"
    assert all(docs[f"note-{i}.txt"].ok for i in range(3))


def test_a_file_over_the_timeout_is_read_once_and_the_files_in_flight_with_it_are_read(
    tmp_path: Path,
) -> None:
    """One worker, the stuck file first, the others waiting behind it in flight: the
    timeout breaks the pool and fails them all; the stuck file is skipped without a
    second try (its own deadline ended it) and the others are read, once each."""
    root = text_files(tmp_path / "docs", ["a-stall.txt"] + [f"note-{i}.txt" for i in range(3)])
    docs = {
        d.source: d
        for d in read_in_pool(
            scan(root),
            ReadOptions(max_bytes=2**20, read_timeout_s=1),
            workers=1,
            depth=8,
            load_file=stalling_load,
        )
    }
    assert docs["a-stall.txt"].reason == "extraction timed out: more than 1 s"
    assert all(docs[f"note-{i}.txt"].ok for i in range(3)) and len(docs) == 4
    started = (tmp_path / "started.log").read_text().splitlines()
    assert sorted(started) == sorted(docs)


@needs_tesseract
@pytest.mark.parametrize("depth", [1, 8])
def test_a_worker_killed_from_outside_skips_its_file_alone(
    tmp_path: Path, depth: int, monkeypatch
) -> None:
    """An OOM kill, as the kernel does it: alone in flight (depth 1), the file is skipped
    and the pool replaced for the rest; with others in flight, each is read again alone,
    and the file, harmless alone, is read. The worker is killed once its Tesseract has
    started (an event: `TesseractStarts`)."""
    root = text_files(tmp_path / "docs", [f"note-{i}.txt" for i in range(3)])
    shutil.copy(FIXTURES / "scan.pdf", root / "a-scan.pdf")  # first: the worker OCRs it
    docs: list = []
    with TesseractStarts(tmp_path / "bin") as starts:
        monkeypatch.setenv("PATH", starts.path)  # the workers spawned below inherit it
        stream = read_in_pool(scan(root), MIB, workers=1, depth=depth)
        reader = threading.Thread(target=lambda: docs.extend(stream))
        reader.start()
        _, worker = starts.next(timeout=60)
        psutil.Process(worker).kill()
        reader.join(timeout=120)
    assert not reader.is_alive()
    by_source = {d.source: d for d in docs}
    assert sorted(by_source) == ["a-scan.pdf", "note-0.txt", "note-1.txt", "note-2.txt"]
    assert all(by_source[f"note-{i}.txt"].ok for i in range(3))
    if depth == 1:
        assert by_source["a-scan.pdf"].reason == (
            "extraction crashed: the worker died of SIGKILL (killed: out of memory?)"
        )
    else:
        assert by_source["a-scan.pdf"].ok


@glibc_only
def test_a_workers_threads_share_one_arena(tmp_path: Path) -> None:
    root = text_files(tmp_path / "docs", ["note.txt"])
    docs = list(read_in_pool(scan(root), MIB, workers=1, load_file=arenas_load))
    assert docs[0].ok
    assert (tmp_path / "arenas.log").read_text().split() == ["1"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_is_replaced_after_its_files(tmp_path: Path, monkeypatch, workers: int) -> None:
    # Python 3.11-3.13's own executor can stop replacing workers here and wait forever.
    monkeypatch.setattr(read_pool, "FILES_PER_WORKER", 3)
    names = [f"note-{i:02d}.txt" for i in range(20)]
    root = text_files(tmp_path / "docs", names)
    docs = list(read_in_pool(scan(root), MIB, workers=workers, load_file=pid_load))
    assert sorted(d.source for d in docs) == names
    assert all(d.ok for d in docs)
    files_by_worker = Counter((tmp_path / "pids.log").read_text().split())
    assert sum(files_by_worker.values()) == 20
    assert max(files_by_worker.values()) <= 3
    assert not workers_of_pools()


def _until(condition, what: str, timeout_s: float = 60) -> None:
    """Wait for `condition()` to hold (polled), failing with `what` after `timeout_s`."""
    event = threading.Event()
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        event.wait(0.05)


@pytest.mark.parametrize("depth", [1, 2])
def test_a_worker_that_dies_between_two_waits_loses_only_its_file(
    tmp_path: Path, depth: int
) -> None:
    """The worker is killed (as an OOM kill would) while the consumer holds the first
    document, and the pool knows it is broken before the next file is submitted. Depth 1:
    the worker was idle, nothing was in flight, so every file is read. Depth 2: it was
    reading b-stall.txt, alone in flight, which is skipped; the rest are read."""
    names = ["a-note.txt", "b-stall.txt" if depth == 2 else "b-note.txt", "c-note.txt"]
    root = text_files(tmp_path / "docs", [*names, "d-note.txt"])
    stream = read_in_pool(scan(root), MIB, workers=1, depth=depth, load_file=stalling_load)
    first = next(stream)
    assert first.source == "a-note.txt" and first.ok
    started = tmp_path / "started.log"
    _until(lambda: started.read_text().split()[-1] == names[depth - 1], "the worker's file")
    (worker,) = workers_of_pools()
    worker.kill()
    # the executor reaps its dead worker after it has failed the futures in flight
    _until(lambda: not psutil.pid_exists(worker.pid), "the pool to see its worker die")
    docs = {d.source: d for d in stream}
    assert sorted(docs) == [
        "b-stall.txt" if depth == 2 else "b-note.txt",
        "c-note.txt",
        "d-note.txt",
    ]
    if depth == 2:
        assert docs["b-stall.txt"].reason == (
            "extraction crashed: the worker died of SIGKILL (killed: out of memory?)"
        )
    assert all(d.ok for source, d in docs.items() if "stall" not in source)


@pytest.mark.parametrize("depth,bytes_in_flight,bound", [(3, 2**20, 3), (8, 250, 2), (8, 10, 1)])
def test_the_files_in_flight_are_bounded(
    tmp_path: Path, depth: int, bytes_in_flight: int, bound: int
) -> None:
    """Files of 100 bytes: at most `depth` files are in flight, and as many as fit in
    `bytes_in_flight` (one always goes, even a larger one). The workers note each file
    they start, and this consumer each document it takes, in one log (appends of a line
    are atomic), so every prefix of it shows the files in flight then: started, not yet
    taken. The pool submits more only when the consumer asks for the next document, so
    the count never passes the bound, however fast or slow either side runs."""
    root = text_files(tmp_path / "docs", [f"note-{i:02}.txt" for i in range(12)], size=100)
    log = tmp_path / "started.log"
    for doc in read_in_pool(
        scan(root),
        MIB,
        workers=2,
        depth=depth,
        bytes_in_flight=bytes_in_flight,
        load_file=logging_load,
    ):
        with open(log, "a") as out:
            out.write(f"taken:{doc.source}\n")
    lines = log.read_text().split()
    in_flight, most = 0, 0
    for line in lines:
        in_flight += -1 if line.startswith("taken:") else 1
        most = max(most, in_flight)
    assert 1 <= most <= bound, lines
    assert len(lines) == 24 and in_flight == 0


def test_what_a_worker_logs_and_warns_is_logged_and_warned_here(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = text_files(tmp_path / "docs", ["note.txt"])
    with pytest.warns(FutureWarning, match="somelib: deprecated in note.txt"):
        docs = list(read_in_pool(scan(root), MIB, workers=1, load_file=warning_load))
    assert docs[0].ok
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("somelib", "somelib: odd bytes in note.txt")
    ]


def test_the_pool_stores_what_one_thread_stores_and_a_rerun_starts_no_worker(
    tmp_path: Path, encoder
) -> None:
    root = copy_corpus(
        tmp_path / "mixed", ("postgresql/tutorial-start.html", "sqlite/copyright-release.pdf")
    )
    for name in (
        "json-types.docx",
        "json-types.xlsx",
        "json-types.csv",
        "anyhow.rtf",
        "anyhow-encrypted.docx",
        "anyhow-drm.epub",
    ):
        shutil.copy(FIXTURES / name, root / name)
    workers_seen: list[int] = []
    stores = {}
    for workers in (2, 0):
        stores[workers] = SQLiteStore(tmp_path / f"db-{workers}")
        summary = run(
            root,
            stores[workers],
            OPTIONS.replace(read_workers=workers, chunks_per_call=1, max_tokens=254),
            get_encoder=lambda: encoder,
            on_progress=lambda p: workers_seen.append(len(workers_of_pools())),
        )
        assert summary.status == "completed" and summary.skipped == 2
    rows, vectors = {}, {}
    for workers, store in stores.items():
        with store:
            docs = {}
            for e in scan(root):
                row = store.lookup(root, e.source)
                docs[e.source] = (row.status, row.sha256, row.reason, row.n_chunks)
            rows[workers] = docs
            ids, matrix = store.vectors()
            chunks = store.chunks(ids)
            order = sorted(
                range(len(ids)),
                key=lambda r: (chunks[int(ids[r])].source, chunks[int(ids[r])].ordinal),
            )
            vectors[workers] = ([chunks[int(ids[r])].text for r in order], matrix[order])
    assert rows[2] == rows[0]
    assert vectors[2][0] == vectors[0][0]
    # one encode call per document (chunks_per_call=1): the same batches in either order
    np.testing.assert_array_equal(vectors[2][1], vectors[0][1])
    # a re-run over unchanged files (skipped files are read again: remove them) starts no
    # worker and loads no model
    assert max(workers_seen) >= 1  # the pool was there while the first run read
    workers_seen.clear()
    for name in ("anyhow-encrypted.docx", "anyhow-drm.epub"):
        (root / name).unlink()
    with SQLiteStore(tmp_path / "db-2") as store:
        again = run(
            root,
            store,
            OPTIONS.replace(read_workers=2, chunks_per_call=1, max_tokens=254),
            get_encoder=lambda: pytest.fail("a re-run loaded the model"),
            on_progress=lambda p: workers_seen.append(len(workers_of_pools())),
        )
    assert (again.unchanged, again.deleted, again.chunks_encoded) == (6, 2, 0)
    assert workers_seen and max(workers_seen) == 0


@needs_tesseract
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_run_leaves_no_worker_behind(
    tmp_path: Path, how: int, static_model_cached: None
) -> None:
    root = tmp_path / "scans"
    root.mkdir()
    for i in range(6):  # each seconds of OCR: the workers are busy when the run is stopped
        shutil.copy(FIXTURES / "scan.tif", root / f"scan-{i}.tif")
    db = tmp_path / "db"
    mark = {"ATTNSWITCH_TEST_RUN": str(tmp_path)}  # inherited by every process of the run
    with TesseractStarts(tmp_path / "bin") as starts:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "attnswitch.cli",
                "run",
                str(root),
                "--db",
                str(db),
                "--read-workers",
                "2",
                "--no-progress",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **mark, "PATH": starts.path},
        )
        try:
            # a worker of the run runs Tesseract (a hang detector; the quick model is
            # cached already: `static_model_cached`)
            _, worker = starts.next(timeout=300)
        except TimeoutError:
            proc.kill()
            pytest.fail(f"the run never reached OCR: {proc.communicate()[1]}")
    assert psutil.Process(worker).parent().pid == proc.pid
    proc.send_signal(how)
    out, err = proc.communicate(timeout=120)  # a hang detector, not a measure
    if how == signal.SIGINT:
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "interrupted" in json.loads(out)["error"]
    else:
        assert proc.returncode == -how
    # the workers go with the run: each one left is waited for (a hang detector again)
    _, alive = psutil.wait_procs(processes_marked(mark), timeout=60)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
    assert (db / DB_NAME).exists()
    # stopped, not finished: the run did not go on to read every scan first
    with SQLiteStore(db) as store:
        assert store.status().documents < 6


def processes_marked(mark: dict[str, str]) -> list[psutil.Process]:
    """Live processes (not tesseract: it ends at its own page limit) whose environment
    holds `mark`."""
    ((key, value),) = mark.items()
    found = []
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            if (
                p.name() != "tesseract"
                and p.status() != psutil.STATUS_ZOMBIE
                and p.environ().get(key) == value
            ):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


@pytest.mark.parametrize(
    "workers,cpus,pages", [(1, 1, 1), (1, 2, 2), (2, 2, 1), (3, 2, 1), (2, 8, 4), (8, 16, 2)]
)
def test_the_workers_share_the_cpus_for_ocr(workers: int, cpus: int, pages: int) -> None:
    """A worker recognises its share of the CPUs' worth of scanned pages at once, at least
    one: two workers on two CPUs run two Tesseracts, not four."""
    assert ocr_pages_per_worker(workers, cpus) == pages


def test_each_worker_is_told_its_share_of_ocr(tmp_path: Path) -> None:
    root = text_files(tmp_path / "docs", [f"note-{i}.txt" for i in range(4)])
    docs = list(read_in_pool(scan(root), MIB, workers=2, load_file=ocr_workers_load))
    assert [d.ok for d in docs] == [True] * 4
    told = (tmp_path / "ocr_workers.log").read_text().split()
    assert told == [str(ocr_pages_per_worker(2, usable_cpus()))] * 4


def test_the_default_workers_leave_half_the_cpus_to_the_encoder() -> None:
    assert [default_read_workers(n) for n in (1, 2, 3, 4, 8, 16, 64)] == [1, 1, 1, 2, 4, 8, 8]
    assert default_read_workers() >= 1
