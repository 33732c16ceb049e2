"""What `attnswitch watch` prints: a start line (the folder, the index, the rules in effect),
one line per batch (files and chunks), the full pass's progress between batches, and the
run's progress display on batches that take long (`BatchProgress`).

Lines go to stdout, each with the time; the progress display to stderr (a bar on a
terminal, plain lines elsewhere: `cli/progress.py`). With `--json`, every line is a JSON
object instead (`{"status": ...}`) and no progress is shown. With `--log FILE`, the same
events are appended to FILE as one `key=value` line each (`log_to`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attnswitch.cli import progress
from attnswitch.documents.rules import describe

# A batch shows the run's progress display once it has taken this many seconds: a change
# of a few files ends before, and prints its one line alone.
LONG_BATCH_S = 2.0
# Seconds between two lines about the full pass (its first and last slice always print).
FILL_LINE_S = 60.0


def stamped(line: str) -> str:
    return f"{time.strftime('%H:%M:%S')} {line}"


def start_line(folder: str, index: str, rules: Any, folders: int) -> str:
    """The line `watch` starts with."""
    return stamped(
        f"watching {folder} ({folders:,} folder{'s' if folders != 1 else ''}) into {index}; "
        f"rules: {describe(rules)}; Ctrl-C to stop"
    )


def batch_line(s: Any) -> str:
    """One batch's line, from its run's summary (`jobs.summary.RunSummary`)."""
    chunks = s.chunks_quick + s.chunks_encoded
    return stamped(
        f"{s.new} new, {s.changed} changed, {s.moved} moved, {s.deleted} deleted, "
        f"{s.copied} copies, {s.skipped} skipped in {s.wall_s:,.1f} s: searchable now; "
        f"{chunks:,} chunks written ({s.chunks_reused:,} kept a stored vector); "
        f"{s.indexed:,} documents indexed"
    )


def duration(seconds: float) -> str:
    """`seconds` for a person: "45 s", "12 min", "3 h 05 min"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


def fill_line(counts: Any, left: int) -> str:
    """The full pass's progress (`jobs.passes.FullPassCounts` of this watch so far, and
    the chunks still without a full vector): "N of M" chunks, and an ETA at the rate this
    watch has filled them (over its filling time, not the batches' or the idle time)."""
    done = counts.encoded + counts.reused
    if left == 0:
        took = f" in {duration(counts.seconds)}" if counts.seconds else ""
        return stamped(
            f"full vectors: every chunk has one ({done:,} filled in by this watch{took})"
        )
    total = done + left
    refused = f", {counts.refused:,} refused by the encoder" if counts.refused else ""
    eta = ""
    if done and counts.seconds > 0:
        rate = done / counts.seconds
        eta = f", about {duration(left / rate)} left at {rate:,.1f} chunks/s"
    return stamped(
        f"filling in full vectors between changes: {done:,} of {total:,} chunks "
        f"({done / total:.0%}){eta}{refused}"
    )


class FillLines:
    """Prints `fill_line` for the first slice, then at most every `FILL_LINE_S` seconds,
    and when none is left."""

    def __init__(self, echo: Any):
        self.echo = echo
        self._printed: float | None = None

    def __call__(self, counts: Any, left: int) -> None:
        now = time.monotonic()
        if left == 0 or self._printed is None or now - self._printed >= FILL_LINE_S:
            self.echo(fill_line(counts, left))
            self._printed = None if left == 0 else now


class BatchProgress:
    """The run's progress display for a batch that lasts more than `LONG_BATCH_S` seconds
    (`progress.pick`, on stderr), opened at the first event past that and closed by
    `end()` when the batch's line prints."""

    def __init__(self, as_json: bool):
        self.as_json = as_json
        self._display: Any = None
        self._run: int | None = None  # id of the run's progress object

    def __call__(self, p: Any) -> None:
        if self.as_json:
            return
        if id(p) != self._run:  # another batch's run
            self.end()
            self._run = id(p)
        if self._display is None:
            if time.perf_counter() - p.started < LONG_BATCH_S:
                return
            self._display = progress.pick(None, False, sys.stderr).__enter__()
        self._display.update(p)

    def end(self) -> None:
        if self._display is not None:
            display, self._display = self._display, None
            display.__exit__(None, None, None)


@contextlib.contextmanager
def log_to(path: Path | None, logger: logging.Logger) -> Iterator[None]:
    """While inside, `logger`'s INFO records (watch's start, batch and fill lines: one
    `key=value` line each) are appended to `path` with their time; nothing when None."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.setLevel(logging.INFO)
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        handler.close()
