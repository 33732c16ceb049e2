"""`attnswitch watch` as a user runs it: a real process that says what it watches, indexes
the folder, prints one JSON line per batch, fills in the full vectors between batches,
follows a file added to it, and ends cleanly (exit 0) on SIGTERM; one that another run's
lock and its folder deleted make wait (one line each), never exit; and the text it prints
on a terminal's stdout."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_testing import CORPUS, FAST, SMALL

from attnswitch.indexing.location import open_store
from store_testing import hold_run_lock_until_stdin_closes

WAIT_S = 300  # a cold process loads the model first


def test_watch_indexes_follows_and_stops_on_sigterm(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    for source in SMALL[:2]:
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, folder / source)
    line = watch_line(str(folder), str(tmp_path / "data"), "--json")
    proc = subprocess.Popen(
        line, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        lines = Lines(proc)
        start = lines.next("the start line")
        assert start["status"] == "watching" and start["folder"] == str(folder)
        assert start["rules"] == {"include": [], "exclude": [], "gitignore": False}
        first = lines.batch("the catch-up run")
        assert (first["new"], first["status"], first["chunks_unencoded"]) == (
            2,
            "completed",
            first["chunks_stored"],
        )  # the quick pass: searchable, the full vectors to come
        assert lines.until_filled("the full pass after the catch-up")["left"] == 0
        assert coverage(tmp_path / "data").full_fraction == 1.0
        (folder / "added.txt").write_text("A kingfisher dives for minnows.\n")
        batch = lines.batch("the added file")
        assert (batch["new"], batch["unchanged"]) == (1, 2)
        assert lines.until_filled("the added file's vectors")["left"] == 0
        assert coverage(tmp_path / "data").full_fraction == 1.0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def coverage(db: Path):
    with open_store(db) as store:
        return store.coverage()


def watch_line(folder, data, *options: str) -> list[str]:
    """`attnswitch watch FOLDER --db DATA` in a fresh process, with short batches, no reader
    processes and small chunks (`FAST`'s --max-tokens and --overlap), then `options`."""
    return [
        sys.executable,
        "-m",
        "attnswitch.cli",
        "watch",
        str(folder),
        "--db",
        str(data),
        "--debounce-ms",
        "200",
        "--read-workers",
        "0",
        *FAST[:4],
        *options,
    ]


class Lines:
    """The JSON lines a process prints, read on a thread of their own so that each wait
    for one is bounded."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines = proc, queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, what: str) -> dict:
        try:
            line = self.lines.get(timeout=WAIT_S)
        except queue.Empty:
            pytest.fail(f"no line within {WAIT_S} s: {what}")
        if line is None:
            self.proc.wait(WAIT_S)
            pytest.fail(
                f"watch ended (exit {self.proc.returncode}) before {what}: "
                f"{self.proc.stderr.read()}"
            )
        try:
            return json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line, waiting for {what}: {line!r}")

    def until_waiting(self, what: str) -> tuple[dict, list[dict]]:
        """The next `waiting` line, and the batches printed before it."""
        batches = []
        while (line := self.next(what)).get("status") != "waiting":
            if line.get("status") != "filling":
                batches.append(line)
        return line, batches

    def batch(self, what: str) -> dict:
        """The next batch's run summary (the full pass's lines skipped)."""
        while (line := self.next(what)).get("status") == "filling":
            pass
        return line

    def until_filled(self, what: str) -> dict:
        """The next line of the full pass with no chunk left."""
        while (line := self.next(what)).get("status") != "filling" or line["left"]:
            assert line.get("status") == "filling", f"a batch, waiting for {what}: {line}"
        return line


def found(db: Path, word: str) -> set[str]:
    with open_store(db) as store:
        hits = store.keyword(word, 100)
        return {c.source for c in store.chunks([cid for cid, _ in hits]).values()}


@pytest.mark.slow
def test_watch_waits_for_another_run_and_for_its_folder(tmp_path: Path) -> None:
    folder, data = tmp_path / "docs", tmp_path / "data"
    for source in SMALL[:2]:
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, folder / source)
    line = watch_line(str(folder), str(data), "--json")
    proc = subprocess.Popen(
        line, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    holder = None
    try:
        lines = Lines(proc)
        assert lines.next("the start line")["status"] == "watching"
        assert lines.batch("the first run")["new"] == 2
        lines.until_filled("the full pass, before another run takes the lock")
        # another run of the same index holds its lock: one line, and the change waits
        holder = hold_run_lock_until_stdin_closes(data)
        (folder / "capybara.txt").write_text("The capybara bathes in the warm pond.\n")
        waiting, _ = lines.until_waiting("the wait for the other run")
        assert (waiting["waiting_for"], waiting["message"]) == (
            "lock",
            "waiting for another run of this index to finish ...",
        )
        holder.stdin.close()
        assert holder.wait(WAIT_S) == 0
        batch = lines.batch("the change, once the other run ended")
        assert (batch["status"], batch["new"]) == ("completed", 1)
        assert found(data, "capybara") == {"capybara.txt"}
        # the folder deleted: one line; made again, its file is indexed
        shutil.rmtree(folder)
        waiting, before = lines.until_waiting("the wait for the folder")
        assert waiting["waiting_for"] == "root" and str(folder) in waiting["message"]
        (folder / "later").mkdir(parents=True)
        (folder / "later" / "ocelot.txt").write_text("The ocelot hunts at dusk.\n")
        batches = before
        while sum(b["deleted"] for b in batches) < 3 or not found(data, "ocelot"):
            batches.append(lines.batch("the file of the folder made again"))
        assert sum(b["deleted"] for b in batches) == 3
        assert all(b["status"] == "completed" for b in batches)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        for p in (holder, proc):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_watch_says_what_it_watches_each_batch_and_the_full_pass(tmp_path: Path) -> None:
    """Without --json: a start line with the folder, the index and the rules in effect,
    a line per batch, and the full pass's lines between batches (issue 53, point 3)."""
    folder = tmp_path / "docs"
    for source in SMALL[:2]:
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, folder / source)
    (folder / ".gitignore").write_text("scratch/\n")
    line = watch_line(
        str(folder),
        str(tmp_path / "data"),
        "--exclude",
        "*.log",
        "--gitignore",
        "--log",
        str(tmp_path / "watch.log"),
    )
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.Popen(
        line, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        lines = TextLines(proc)
        start = lines.next("the start line")
        assert f"watching {folder} (" in start and str(tmp_path / "data") in start
        assert "rules: exclude *.log; .gitignore/.ignore honoured" in start
        batch = lines.next("the catch-up run")
        assert "2 new, 0 changed" in batch and "searchable now" in batch
        filled = lines.until("full vectors: every chunk has one", "the full pass")
        assert "filled in by this watch" in filled
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT_S) == 0, proc.stderr.read()
        logged = (tmp_path / "watch.log").read_text().splitlines()
        assert f"watch start: folder={folder} " in logged[0]
        assert "rules='exclude *.log; .gitignore/.ignore honoured'" in logged[0]
        assert any("watch batch: changes=0 new=2 changed=0 " in line for line in logged)
        assert "watch fill: " in logged[-1] and " left=0 " in logged[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class TextLines(Lines):
    """The text lines a process prints (see `Lines`)."""

    def next(self, what: str) -> str:  # type: ignore[override]
        try:
            line = self.lines.get(timeout=WAIT_S)
        except queue.Empty:
            pytest.fail(f"no line within {WAIT_S} s: {what}")
        if line is None:
            self.proc.wait(WAIT_S)
            pytest.fail(f"watch ended before {what}: {self.proc.stderr.read()}")
        return line

    def until(self, text: str, what: str) -> str:
        while text not in (line := self.next(what)):
            pass
        return line
