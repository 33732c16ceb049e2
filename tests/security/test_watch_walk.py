"""`watch` under attack (issue 50, defects 3, 7 and 10): it walks exactly as `run` walks,
so a link to `/`, a link out of the root and a moved-in folder holding links back up are
never watched (checked in the kernel's own list of this process's inotify watches, on
Linux) and start no endless runs; changes to files the rules leave out start no run;
another process holding the store's run lock, and the root deleted or replaced by a link,
make it wait (one line each, through `on_wait`), never exit, then catch up.

Through the real `watch` on its own thread with a real store (both stores where the store
matters: the run lock), real folders and real processes; each step waits on the watcher's
own callbacks with a bounded timeout."""

from __future__ import annotations

import os
import queue
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from attnswitch.documents.rules import FileRules
from attnswitch.documents.walked import walked_folders
from attnswitch.indexing.location import open_store
from attnswitch.jobs.run import RunOptions, RunSummary
from attnswitch.jobs.watch import LOCK_LINE, ROOT_POLL_S, WAIT_LOCK, WAIT_ROOT, watch
from store_testing import hold_run_lock_until_stdin_closes

pytestmark = pytest.mark.xdist_group("security")
OPTIONS = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, read_workers=0)
WAIT_S = 120  # the most one step may take to show (a loaded CI machine)


class Watcher:
    """`watch` on its own thread (and store connection): its runs and its waits, in the
    order they came, through a queue."""

    def __init__(self, root: Path, location: Any, encoder: Any, options: RunOptions = OPTIONS):
        self.events: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        self.runs: list[tuple[RunSummary, set]] = []
        self.waits: list[tuple[str, str]] = []
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
                        on_batch=lambda s, changes: self.events.put(("run", s, changes)),
                        on_wait=lambda reason, line: self.events.put(("wait", reason, line)),
                    )
            except BaseException as exc:  # shown by the test waiting on it
                self.error = exc
            finally:
                self.events.put(("ended", None, None))

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def until(self, done, what: str) -> None:
        """Take the watcher's events until `done()` holds (checked after each)."""
        deadline = time.monotonic() + WAIT_S
        while not done():
            try:
                kind, a, b = self.events.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"not seen within {WAIT_S} s: {what}")
            if kind == "ended":
                raise AssertionError(f"the watcher ended, waiting for {what}") from self.error
            if kind == "run":
                assert a.status == "completed", a
                self.runs.append((a, b))
            else:
                self.waits.append((a, b))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive() and self.error is None, self.error


def found(location: Any, word: str) -> set[str]:
    """The sources whose chunks a keyword search for `word` finds (a reader of its own)."""
    with open_store(location) as store:
        hits = store.keyword(word, 100)
        return {c.source for c in store.chunks([cid for cid, _ in hits]).values()}


def inotify_watches() -> set[tuple[int, int, int]] | None:
    """(major, minor, inode) of every folder this process's inotify instances watch, from
    the kernel's own list (/proc/self/fdinfo); None where there is none to read (not
    Linux, or watchfiles polling)."""
    if not Path("/proc/self/fdinfo").is_dir():
        return None
    watched: set[tuple[int, int, int]] = set()
    seen = False
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        seen = True
        for line in info.splitlines():
            if line.startswith("inotify wd:"):
                fields = dict(f.split(":", 1) for f in line.split()[1:] if ":" in f)
                sdev = int(fields["sdev"], 16)  # the kernel's dev_t: major << 20 | minor
                watched.add((sdev >> 20, sdev & 0xFFFFF, int(fields["ino"], 16)))
    return watched if seen else None


def identity(path: Path) -> tuple[int, int, int]:
    st = os.stat(path, follow_symlinks=False)
    return os.major(st.st_dev), os.minor(st.st_dev), st.st_ino


def assert_watches_exactly(folders: list[Path]) -> None:
    """The kernel watches exactly `folders` for this process (where it can be read)."""
    watched = inotify_watches()
    if watched is not None:
        assert watched == {identity(f) for f in folders}


def test_watch_never_follows_a_link_to_the_filesystem_root(tmp_path: Path, encoder) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("The quokka smiles on Rottnest Island.\n")
    (root / "sub" / "more.txt").write_text("The tapir swims across the river.\n")
    (root / "slash").symlink_to("/", target_is_directory=True)
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.txt").write_text("The secret jackalope lives outside.\n")
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / "home").symlink_to("..", target_is_directory=True)
    # what watchfiles is given: the folders the run's walk enters, nothing through a link
    assert [f.path for f in walked_folders(root)] == [root, root / "sub"]

    location = tmp_path / "db" / "index.sqlite3"
    watcher = Watcher(root, location, encoder)
    try:
        watcher.until(lambda: watcher.runs, "the catch-up run")
        first = watcher.runs[0][0]
        assert (first.new, first.indexed) == (2, 2)
        assert found(location, "quokka") == {"notes.txt"}
        assert not found(location, "jackalope")
        assert_watches_exactly([root, root / "sub"])
    finally:
        watcher.close()


def test_a_moved_in_folder_linking_back_up_starts_no_endless_runs(tmp_path: Path, encoder) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("The quokka smiles on Rottnest Island.\n")
    staging = tmp_path / "staging" / "moved"
    staging.mkdir(parents=True)
    (staging / "doc.txt").write_text("The axolotl regrows its limbs.\n")
    (staging / "up").symlink_to("..", target_is_directory=True)  # the root, once moved in
    (staging / "upup").symlink_to("../..", target_is_directory=True)  # the store's folder
    location = tmp_path / "db" / "index.sqlite3"  # beside the root, where upup leads
    watcher = Watcher(root, location, encoder)
    try:
        watcher.until(lambda: watcher.runs, "the catch-up run")
        os.rename(staging, root / "moved")
        watcher.until(
            lambda: found(location, "axolotl") == {"moved/doc.txt"}, "the moved-in folder indexed"
        )
        assert_watches_exactly([root, root / "moved"])
        # settled: each new file now costs its own run, and nothing else starts one
        for word in ("pangolin", "wombat"):
            seen = len(watcher.runs)
            (root / f"{word}.txt").write_text(f"The {word} forages at night.\n")
            watcher.until(
                lambda: len(watcher.runs) > seen and found(location, word) == {f"{word}.txt"},
                f"{word}.txt",
            )
            assert len(watcher.runs) - seen == 1, watcher.runs[seen:]
            assert {p for _, p in watcher.runs[-1][1]} == {str(root / f"{word}.txt")}
    finally:
        watcher.close()
    changed = {Path(p) for _, changes in watcher.runs for _, p in changes}
    assert all(
        p.is_relative_to(root) and "up" not in p.parts and "upup" not in p.parts for p in changed
    ), changed
    assert len(watcher.runs) <= 5, [s.new for s, _ in watcher.runs]


def test_changes_the_rules_leave_out_start_no_run(tmp_path: Path, encoder) -> None:
    root = tmp_path / "root"
    for folder in ("build", "scratch", "kept"):
        (root / folder).mkdir(parents=True)
    (root / "notes.txt").write_text("The quokka smiles on Rottnest Island.\n")
    (root / ".gitignore").write_text("scratch/\n")
    rules = FileRules(exclude=("*.log", "build/"), gitignore=True)
    assert [f.path for f in walked_folders(root, rules=rules)] == [root, root / "kept"]
    location = tmp_path / "db" / "index.sqlite3"
    watcher = Watcher(root, location, encoder, OPTIONS.replace(rules=rules))
    try:
        watcher.until(lambda: watcher.runs, "the catch-up run")
        assert_watches_exactly([root, root / "kept"])
        (root / "debug.log").write_text("The narwhal log line.\n")
        (root / "build" / "out.txt").write_text("The narwhal build output.\n")
        (root / "scratch" / "tmp.txt").write_text("The narwhal scratch file.\n")
        (root / "kept" / "marker.txt").write_text("The pangolin forages at night.\n")
        watcher.until(
            lambda: len(watcher.runs) > 1 and found(location, "pangolin") == {"kept/marker.txt"},
            "the marker indexed",
        )
        assert len(watcher.runs) == 2
        assert {p for _, p in watcher.runs[1][1]} == {str(root / "kept" / "marker.txt")}
        assert not found(location, "narwhal")
    finally:
        watcher.close()


def test_watch_waits_for_another_runs_lock_then_catches_up(
    location: Any, tmp_path: Path, docs: Path, encoder
) -> None:
    watcher = Watcher(docs, location, encoder)
    holder = None
    try:
        watcher.until(lambda: watcher.runs, "the catch-up run")
        holder = hold_run_lock_until_stdin_closes(location)
        (docs / "capybara.txt").write_text("The capybara bathes in the warm pond.\n")
        watcher.until(lambda: watcher.waits, "the wait for the other run")
        assert watcher.waits == [(WAIT_LOCK, LOCK_LINE)]
        assert watcher.thread.is_alive() and not found(location, "capybara")
        holder.stdin.close()  # the other run ends: its lock is dropped
        assert holder.wait(WAIT_S) == 0
        watcher.until(
            lambda: found(location, "capybara") == {"capybara.txt"},
            "the change indexed once the lock is free",
        )
        assert watcher.thread.is_alive() and len(watcher.waits) == 1
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
            holder.wait()
        watcher.close()


def test_watch_outlives_its_root_deleted_or_replaced_by_a_link(
    tmp_path: Path, docs: Path, encoder
) -> None:
    location = tmp_path / "db" / "index.sqlite3"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "lure.txt").write_text("The jackalope lures watchers away.\n")
    watcher = Watcher(docs, location, encoder)
    try:
        watcher.until(lambda: watcher.runs, "the catch-up run")
        indexed = watcher.runs[0][0].indexed
        shutil.rmtree(docs)
        watcher.until(lambda: watcher.waits, "the wait for the root")
        assert len(watcher.waits) == 1 and watcher.waits[0][0] == WAIT_ROOT
        assert str(docs) in watcher.waits[0][1] and "\n" not in watcher.waits[0][1]
        # a link where the root was is not the root: nothing runs while it is there
        docs.symlink_to(elsewhere, target_is_directory=True)
        with pytest.raises(queue.Empty):
            watcher.events.get(timeout=4 * ROOT_POLL_S)
        docs.unlink()
        (docs / "later").mkdir(parents=True)
        (docs / "later" / "ocelot.txt").write_text("The ocelot hunts at dusk.\n")
        watcher.until(
            lambda: (
                found(location, "ocelot") == {"later/ocelot.txt"}
                and sum(s.deleted for s, _ in watcher.runs) == indexed
            ),
            "a file of the recreated root indexed, the old ones deleted",
        )
        assert watcher.thread.is_alive() and len(watcher.waits) == 1
        assert not found(location, "jackalope")
        (docs / "later" / "okapi.txt").write_text("The okapi hides in the forest.\n")
        watcher.until(
            lambda: found(location, "okapi") == {"later/okapi.txt"},
            "a change in the recreated root's new folder",
        )
    finally:
        watcher.close()
