"""How `attnswitch run` shows its progress on stderr (`pipeline.run.RunProgress` events).

- `ProgressBar` (a terminal): rich bars, one for the run (files, chunks, tokens/s, ETA by
  bytes read), and, on the first run on a machine, one above it for "measuring engines on
  this machine (once, about a minute)" with its steps;
- `ProgressLines` (no terminal: a pipe, a log file, CI): one plain line whenever the stage
  changes, and one every `interval` seconds between, so a log shows the run is alive;
- `NoProgress`: nothing (`--no-progress`, and `--json` unless `--progress` is given).

Each has `show(line)`, the way a message reaches the user without breaking the display
(printed above the bars, or as a line of its own).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

MEASURING_TEXT = "measuring engines on this machine (once, about a minute)"
LINE_INTERVAL_S = 5.0


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def run_detail(p: Any) -> str:
    """The run's counters in words: files, chunks, tokens/s."""
    rate = f"{_num(p.tokens_per_s)} tok/s" if p.tokens else "- tok/s"
    return f"files {p.files_done}/{p.files_total}  chunks {p.chunks:,}  {rate}"


def measure_detail(p: Any) -> str:
    return f"step {min(p.measure_done + 1, p.measure_total)} of {p.measure_total}: {p.measure_step}"


def pick(enabled: bool | None, as_json: bool, stream: TextIO | None = None) -> Any:
    """The display for `--progress/--no-progress` (None: unset) and `--json`: a bar on a
    terminal, lines elsewhere; nothing with --no-progress, or with --json unless asked."""
    stream = stream or sys.stderr
    if enabled is False or (enabled is None and as_json):
        return NoProgress(stream)
    return ProgressBar() if stream.isatty() else ProgressLines(stream)


class NoProgress:
    """No display; messages still reach stderr, one line each."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, p: Any) -> None:
        pass

    def show(self, line: str) -> None:
        print(f"attnswitch run: {line}", file=self.stream, flush=True)


class ProgressBar:
    """rich bars on stderr (or `console`, a rich Console): the run's, and the engines'
    measurement when one runs."""

    def __init__(self, console: Any = None) -> None:
        self._console = console
        self._bar: Any = None
        self._run: Any = None
        self._measure: Any = None

    def __enter__(self) -> ProgressBar:
        from rich.progress import (BarColumn, Progress, TaskProgressColumn, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        from attnswitch.cli.output import rich_console

        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
            TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=self._console or rich_console(stderr=True),
            transient=False,
        )
        self._bar.start()
        self._run = self._bar.add_task("starting", total=None, detail="", visible=False)
        return self

    def update(self, p: Any) -> None:
        if p.measure_total:
            if self._measure is None:
                self._measure = self._bar.add_task(MEASURING_TEXT, total=p.measure_total,
                                                   detail="")
            # a step lasts seconds: drawn now, not at the next refresh
            self._bar.update(self._measure, total=p.measure_total, completed=p.measure_done,
                             detail=measure_detail(p) if p.measure_done < p.measure_total
                             else p.measure_step, refresh=True)
            if p.measure_done < p.measure_total:
                return
        self._bar.update(  # the stage padded, so that the bar does not move as it changes
            self._run, description=f"{p.stage:<13}", total=max(p.bytes_total, 1),
            completed=p.bytes_done if p.bytes_total else 1, detail=run_detail(p),
            visible=True)

    def show(self, line: str) -> None:
        self._bar.console.print(line, markup=False, highlight=False)

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()


class ProgressLines:
    """Plain lines on `stream`: at each change of stage, and every `interval` seconds
    between (from a background thread, so a long step still shows the run is alive)."""

    def __init__(self, stream: TextIO, interval: float = LINE_INTERVAL_S):
        self.stream, self.interval = stream, interval
        self._lock = threading.Lock()
        self._last: Any = None
        self._stage: str | None = None
        self._printed = 0.0
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="attnswitch-progress",
                                        daemon=True)

    def __enter__(self) -> ProgressLines:
        self._ticker.start()
        return self

    def line(self, p: Any) -> str:
        """One line for the state `p`."""
        elapsed = f"{time.monotonic() - self._started:.0f} s"
        if p.measure_total and p.measure_done < p.measure_total:
            return f"attnswitch run: {MEASURING_TEXT}: {measure_detail(p)}, {elapsed}"
        share = f" ({p.bytes_done / p.bytes_total:.0%} of bytes)" if p.bytes_total else ""
        return f"attnswitch run: {p.stage}: {run_detail(p)}{share}, {elapsed}"

    def update(self, p: Any) -> None:
        stage = "measuring" if p.measure_total and p.measure_done < p.measure_total else p.stage
        with self._lock:
            self._last = p
            if stage != self._stage:
                self._stage = stage
                self._print(self.line(p))

    def _tick(self) -> None:
        while not self._stop.wait(min(self.interval, 1.0)):
            with self._lock:
                if self._last is not None and time.monotonic() - self._printed >= self.interval:
                    self._print(self.line(self._last))

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)
        self._printed = time.monotonic()

    def show(self, line: str) -> None:
        with self._lock:
            print(f"attnswitch run: {line}", file=self.stream, flush=True)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._ticker.join()
