"""`forget` during a running `watch`, on both stores: the forgotten folder stays out of the
index through the batches that follow (the stored rules hold it, and watch's own rule
options, applied once, do not undo it), and `unforget` brings it back with the next batch.
Each step waits for the watcher's batches (events), never a fixed sleep."""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path

import pytest

from attnswitch.documents.rules import RulesChange, meta_key, stored_rules
from attnswitch.indexing.forget import forget, unforget
from attnswitch.indexing.location import open_store
from attnswitch.indexing.records import root_key
from attnswitch.jobs.run import RunOptions, RunSummary
from attnswitch.jobs.watch import watch

# the watcher is given a rule of its own: it adds to the stored rules once
OPTIONS = RunOptions.of(
    max_tokens=32,
    overlap=4,
    chunks_per_call=8,
    read_workers=0,
    rules=RulesChange(exclude=("*.tmp",)),
)
WAIT_S = 120  # the most one change may take to show (a loaded CI machine)


class Watcher:
    """`watch` on its own thread (and store connection), its batches in a queue."""

    def __init__(self, root: Path, location, encoder):
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
                        OPTIONS,
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


def sources(location) -> set[str]:
    with open_store(location) as store:
        return {s for root in store.roots() for s in store.sources(root)}


def test_forget_during_watch_is_not_undone(docs: Path, encoder, location) -> None:
    watcher = Watcher(docs, location, encoder)
    try:
        watcher.until(lambda: watcher.summaries, "the catch-up run")
        assert len([s for s in sources(location) if s.startswith("postgresql/")]) == 4

        with open_store(location) as store:
            done = forget(docs / "postgresql", store)
            assert done.documents == 4 and done.recorded == (root_key(docs),)
            kept = stored_rules(store, root_key(docs))
            assert (kept.exclude, kept.forgotten) == (("*.tmp",), ("postgresql",))

        # an unrelated edit, then one inside the forgotten folder: neither brings it back
        (docs / "notes.txt").write_text("The zebrafinch sings at dawn.\n")
        watcher.until(lambda: "notes.txt" in sources(location), "an unrelated edit")
        (docs / "postgresql" / "tutorial-start.html").write_text("<p>an okapi</p>\n")
        (docs / "second.txt").write_text("A narwhal surfaced near the pier.\n")
        watcher.until(lambda: "second.txt" in sources(location), "a second edit")
        assert sources(location) == {"notes.txt", "second.txt"}
        assert all(s.new <= 1 and s.chunks_encoded < 10 for s in watcher.summaries[1:])

        with open_store(location) as store:
            assert unforget(docs / "postgresql", store).taken_back == {
                root_key(docs): ("postgresql",)
            }
            assert "postgresql" not in (store.meta(meta_key(root_key(docs))) or "")
        (docs / "third.txt").write_text("A heron waits by the reeds.\n")
        watcher.until(
            lambda: len([s for s in sources(location) if s.startswith("postgresql/")]) == 4,
            "the unforgotten folder back",
        )
    finally:
        watcher.close()
