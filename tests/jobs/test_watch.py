"""`watch` keeps an index current: a file added, changed, moved and deleted is reflected in
search after the batch it causes, a move without encoding anything, and changes made while
no watcher ran are caught up when it starts again. Each step waits for the watcher's
batches (events), never a fixed sleep, with a generous bound."""

from __future__ import annotations

import functools
import os
import queue
import threading
from pathlib import Path

import pytest

import watch_testing
from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, run
from attnswitch.jobs.watch import watch
from watch_testing import WAIT_S

OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, read_workers=0)


# `watch` on a thread, with this file's options
Watcher = functools.partial(watch_testing.Watcher, options=OPTIONS)


def found(location: Path, word: str) -> set[str]:
    """The sources whose chunks a keyword search for `word` finds (a reader of its own)."""
    with open_store(location) as store:
        hits = store.keyword(word, 100)
        return {c.source for c in store.chunks([cid for cid, _ in hits]).values()}


def test_watch_follows_adds_changes_moves_deletes_and_restarts(
    docs: Path, tmp_path: Path, encoder
) -> None:
    location = tmp_path / "db" / "index.sqlite3"
    watcher = Watcher(docs, location, encoder)
    try:
        watcher.until(lambda: watcher.summaries, "the catch-up run")
        assert watcher.summaries[0].new == 4

        (docs / "notes.txt").write_text("The zebrafinch sings at dawn.\n")
        watcher.until(lambda: found(location, "zebrafinch") == {"notes.txt"}, "an added file")

        (docs / "notes.txt").write_text("The okapi hides in the forest.\n")
        watcher.until(
            lambda: found(location, "okapi") == {"notes.txt"} and not found(location, "zebrafinch"),
            "a changed file",
        )

        (docs / "kept").mkdir()
        seen = len(watcher.summaries)
        os.rename(docs / "notes.txt", docs / "kept" / "okapi.txt")
        watcher.until(lambda: found(location, "okapi") == {"kept/okapi.txt"}, "a moved file")
        after_move = watcher.summaries[seen:]
        assert sum(s.moved for s in after_move) == 1
        assert sum(s.chunks_encoded + s.chunks_quick for s in after_move) == 0

        (docs / "kept" / "okapi.txt").unlink()
        watcher.until(lambda: not found(location, "okapi"), "a deleted file")
    finally:
        watcher.close()

    # changes while nothing watches: caught up when the watcher starts again
    (docs / "later.txt").write_text("A narwhal surfaced near the pier.\n")
    (docs / "postgresql" / "tutorial-start.html").unlink()
    again = Watcher(docs, location, encoder)
    try:
        again.until(lambda: again.summaries, "the catch-up run after a restart")
        assert (again.summaries[0].new, again.summaries[0].deleted) == (1, 1)
        assert found(location, "narwhal") == {"later.txt"}
    finally:
        again.close()


def test_watch_follows_folders_made_after_it_started(docs: Path, tmp_path: Path, encoder) -> None:
    """Each folder is watched alone (not recursively), so a folder made while watching
    must join the watched ones: a file written deep in a new tree at once, and one written
    later into a new, empty folder, are both indexed."""
    location = tmp_path / "db" / "index.sqlite3"
    watcher = Watcher(docs, location, encoder)
    try:
        watcher.until(lambda: watcher.summaries, "the catch-up run")
        (docs / "a" / "b" / "c").mkdir(parents=True)
        (docs / "a" / "b" / "c" / "deep.txt").write_text("The gecko climbs the glass.\n")
        watcher.until(lambda: found(location, "gecko") == {"a/b/c/deep.txt"}, "a deep file")

        seen = len(watcher.summaries)
        (docs / "empty").mkdir()
        watcher.until(lambda: len(watcher.summaries) > seen, "the run a new folder starts")
        (docs / "empty" / "later.txt").write_text("The heron waits in the shallows.\n")
        watcher.until(
            lambda: found(location, "heron") == {"empty/later.txt"},
            "a file written into the new folder",
        )
    finally:
        watcher.close()


def test_watch_fills_in_the_full_pass_between_changes(
    docs: Path, tmp_path: Path, encoder, location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `run --quick`, `watch` encodes the chunks left without a full vector between
    batches, in slices, and a change made meanwhile is indexed (issue 52): at the end the
    index holds the vectors one plain run gives, on both stores. Slices of one encode call
    each (`FILL_SLICE_S` 0), so the change is made while chunks are still left."""
    from test_passes import assert_as_one_plain_run

    monkeypatch.setattr("attnswitch.jobs.watch.FILL_SLICE_S", 0.0)

    with open_store(location) as store:
        quick = run(
            docs,
            store,
            RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, quick=True),
            get_encoder=lambda: encoder,
        )
    assert quick.chunks_unencoded == quick.chunks_stored > 0
    events: queue.Queue = queue.Queue()
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            with open_store(location) as store:
                watch(
                    docs,
                    store,
                    OPTIONS,
                    get_encoder=lambda: encoder,
                    stop_event=stop,
                    debounce_ms=300,
                    on_batch=lambda summary, _: events.put(("batch", summary)),
                    on_fill=lambda counts, left: events.put(("fill", left)),
                )
        except BaseException as exc:
            errors.append(exc)
        finally:
            events.put(("ended", None))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def next_event(what: str):
        try:
            kind, value = events.get(timeout=WAIT_S)
        except queue.Empty:
            pytest.fail(f"not seen within {WAIT_S} s: {what}")
        assert kind != "ended", errors
        return kind, value

    try:
        kind, summary = next_event("the catch-up run")
        assert kind == "batch" and summary.unchanged == 4 and summary.new == 0
        kind, left = next_event("a slice of the full pass")
        assert kind == "fill" and left > 0  # the change below comes during the fill
        (docs / "heron.txt").write_text("A grey heron waits in the shallows for fish.\n")
        seen_batch = False
        while not (seen_batch and kind == "fill" and left == 0):
            kind, value = next_event("the change, then every vector")
            if kind == "batch":
                seen_batch = True
                assert value.new == 1
                assert found(location, "heron") == {"heron.txt"}
            else:
                left = value
    finally:
        stop.set()
        thread.join(WAIT_S)
    assert not thread.is_alive() and not errors
    with open_store(location) as store:
        assert store.unencoded_count() == 0
    assert_as_one_plain_run(docs, location, tmp_path, encoder)


def test_a_change_is_searchable_when_its_own_document_is_written(
    docs: Path, tmp_path: Path, encoder, location
) -> None:
    """Each document of a batch is committed as it is written, not at the end of the batch
    (issue 53, point 3): with two files changed in one batch, the watcher is held in its
    progress callback right after the first document is committed, and a search from
    another connection finds that file (and not yet the other) before the batch has ended;
    on both stores."""
    words = {"axolotl.txt": "axolotl", "quokka.txt": "quokka"}
    armed, held, go_on = threading.Event(), threading.Event(), threading.Event()
    batches: queue.Queue = queue.Queue()
    stop = threading.Event()
    errors: list[BaseException] = []

    def progressed(p) -> None:
        # the first document of the batch committed: hold the watcher until looked at
        if armed.is_set() and not held.is_set() and p.chunks > 0:
            held.set()
            go_on.wait(WAIT_S)

    def target() -> None:
        try:
            with open_store(location) as store:
                watch(
                    docs,
                    store,
                    OPTIONS,
                    get_encoder=lambda: encoder,
                    stop_event=stop,
                    debounce_ms=300,
                    on_batch=lambda summary, _: batches.put(summary),
                    on_progress=progressed,
                )
        except BaseException as exc:
            errors.append(exc)
        finally:
            batches.put(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        catch_up = batches.get(timeout=WAIT_S)
        assert catch_up is not None, errors
        armed.set()
        for name, word in words.items():
            (docs / name).write_text(f"The {word} lives far from here.\n")
        assert held.wait(WAIT_S), "no document of the batch committed"
        assert batches.empty()  # the batch has not ended: its watcher is held
        seen = {name for name, word in words.items() if found(location, word) == {name}}
        assert len(seen) == 1, seen  # the first document written, alone
        go_on.set()
        done = batches.get(timeout=WAIT_S)
        assert done is not None, errors
        seen_after = {name for name, word in words.items() if found(location, word) == {name}}
        if done.new < 2:  # the second file came in a batch of its own
            done = batches.get(timeout=WAIT_S)
            assert done is not None, errors
            seen_after = {n for n, w in words.items() if found(location, w) == {n}}
        assert seen_after == set(words)
    finally:
        go_on.set()
        stop.set()
        thread.join(WAIT_S)
    assert not thread.is_alive() and not errors
