"""`watch` on a thread of its own for tests: its batches' summaries in a queue, waited on
with a bound (a loaded CI machine), its error raised where a test waits."""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path

import pytest

from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, RunSummary
from attnswitch.jobs.watch import watch

WAIT_S = 120  # the most one change may take to show (a loaded CI machine)


class Watcher:
    """`watch(root, ..., options)` on its own thread (and store connection) with a small
    debounce and `encoder`, its batches in a queue."""

    def __init__(self, root: Path, location, encoder, options: RunOptions):
        self.batches: queue.Queue[RunSummary | None] = queue.Queue()
        self.summaries: list[RunSummary] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

        def target() -> None:
            try:
                with open_store(location) as store:
                    watch(
                        root,
                        store,
                        options,
                        get_encoder=lambda: encoder,
                        stop_event=self.stop,
                        debounce_ms=300,
                        on_batch=lambda summary, _: self.batches.put(summary),
                    )
            except BaseException as exc:  # shown by the test waiting on it
                self.error = exc
                self.batches.put(None)

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def until(self, done, what: str) -> None:
        """Take batches until `done()` holds (checked after each)."""
        deadline = time.monotonic() + WAIT_S
        while not done():
            left = deadline - time.monotonic()
            try:
                summary = self.batches.get(timeout=max(left, 0.01))
            except queue.Empty:
                pytest.fail(f"not seen within {WAIT_S} s: {what}")
            if summary is None:
                raise AssertionError("the watcher failed") from self.error
            self.summaries.append(summary)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive() and self.error is None
