"""Loaders that tests/jobs/test_read_pool.py hands to the reading pool's workers, which
import them by name (the workers get the test process's sys.path). Kept apart from the test
module, which imports `conftest`: in a worker, `conftest` may name another folder's
conftest.py, the first on sys.path. Each wraps the real `ingest.load`."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from attnswitch.documents.ingest import load


def crashing_load(entry, **kw):
    """A reader that dies of SIGSEGV on files named crash*, as a C library would."""
    if entry.source.startswith("crash"):
        os.kill(os.getpid(), signal.SIGSEGV)
    return load(entry, **kw)


def logging_load(entry, **kw):
    """`load`, noting each file started in `started.log` beside the root."""
    _note_started(entry)
    return load(entry, **kw)


def stalling_load(entry, **kw):
    """`logging_load`; a file whose name has "stall" in it never finishes (its deadline
    ends the worker), as a reader stuck in a C library would."""
    if "stall" in entry.source:
        _note_started(entry)
        while True:
            signal.pause()
    return logging_load(entry, **kw)


def _note_started(entry) -> None:
    with open(Path(entry.root).parent / "started.log", "a") as log:
        log.write(entry.source + "\n")


def warning_load(entry, **kw):
    """`load`, after a library's log record and warning."""
    import logging
    import warnings

    logging.getLogger("somelib").warning("somelib: odd bytes in %s", entry.source)
    warnings.warn(f"somelib: deprecated in {entry.source}", FutureWarning)  # noqa: B028
    return load(entry, **kw)


def ocr_workers_load(entry, **kw):
    """`load`, noting the scanned pages it may recognise at once (`ocr_workers`) in
    `ocr_workers.log` beside the root."""
    with open(Path(entry.root).parent / "ocr_workers.log", "a") as log:
        log.write(f"{kw['ocr_workers']}\n")
    return load(entry, **kw)


def arenas_load(entry, **kw):
    """`load`, noting the C heap's arenas after four threads of this worker allocated at
    once (`heap_arenas.arenas_after_threads`) in `arenas.log` beside the root."""
    from heap_arenas import arenas_after_threads

    with open(Path(entry.root).parent / "arenas.log", "a") as log:
        log.write(f"{arenas_after_threads()}\n")
    return load(entry, **kw)


def pid_load(entry, **kw):
    """`load`, noting the worker's process id in `pids.log` beside the root."""
    with open(Path(entry.root).parent / "pids.log", "a") as log:
        log.write(f"{os.getpid()}\n")
    return load(entry, **kw)
