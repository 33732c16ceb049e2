"""`forget` during a running `watch`, on both stores: the forgotten folder stays out of the
index through the batches that follow (the stored rules hold it, and watch's own rule
options, applied once, do not undo it), and `unforget` brings it back with the next batch.
Each step waits for the watcher's batches (events), never a fixed sleep."""

from __future__ import annotations

import functools
from pathlib import Path

import watch_testing
from attnswitch.documents.rules import RulesChange, meta_key, stored_rules
from attnswitch.indexing.forget import forget, unforget
from attnswitch.indexing.location import open_store
from attnswitch.indexing.records import root_key
from attnswitch.jobs.run import RunOptions

# the watcher is given a rule of its own: it adds to the stored rules once
OPTIONS = RunOptions.of(
    max_tokens=32,
    overlap=4,
    chunks_per_call=8,
    read_workers=0,
    rules=RulesChange(exclude=("*.tmp",)),
)


# `watch` on a thread, with this file's options
Watcher = functools.partial(watch_testing.Watcher, options=OPTIONS)


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
