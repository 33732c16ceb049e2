"""How `attnswitch run` shows its progress on stderr (`jobs.run.RunProgress` events).

- `ProgressBar` (a terminal): one rich progress row, laid out by rich for the terminal's
  width (`columns_for`: from 60 columns up nothing is cut, narrower terminals drop the bar
  first): while engines are measured, the step and its ETA; then the run's stage, files
  committed and files read of the total (in the full pass, chunks given their full
  vector), MB/s committed (chunks/s in the full pass) and the time left, and, where there
  is room, chunks and tokens/s;
- `ProgressLines` (no terminal: a pipe, a log file, CI): one plain line whenever the stage
  changes, and one every `interval` seconds between, so a log shows the run is alive;
- `NoProgress`: no progress (`--no-progress`, and `--json` unless `--progress` is given).

The bar, the percentage and the time left of a run count the same work (`cli/pace.py`):
files, then the full pass's chunks; the percentage is rounded down (100% only when all is
done) and the time left is at the rate over the last minute or more, not the last file's.

All three print what the run says before it measures or checks an engine
(`RunProgress.measure_note`: what for, about how long), once, on a line of its own. Each has
`show(line)`, the way a message reaches the user without breaking the display (printed above
the bar, or as a line of its own).
"""

from __future__ import annotations

import copy
import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from attnswitch.cli.pace import Pace, clock_text, percent_text, work

MEASURING_TEXT = "measuring"
LINE_INTERVAL_S = 5.0
# terminal widths from which the run's row gets the bar, then the bar and the details
WITH_BAR, WIDE = 80, 120


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def files_text(p: Any) -> str:
    """Files committed and read of the total: "3/86 done, 5 read"."""
    return f"{p.files_done}/{p.files_total} done, {p.files_read} read"


def counters_text(p: Any, wide: bool = True) -> str:
    """What the run has done of its current pass (`pace.work`): files ("files 3/86 done,
    5 read"), or in the full pass chunks given their full vector ("full vectors
    1,200/2,928"); `wide`: with the unit's name first."""
    w = work(p)
    if w.unit == "chunks":
        return ("full vectors " if wide else "vectors ") + f"{w.done:,}/{w.total:,}"
    return ("files " if wide else "") + files_text(p)


def run_detail(p: Any) -> str:
    """The run's counters in words: files (or the full pass's vectors), chunks, tokens/s."""
    rate = f"{_num(p.tokens_per_s)} tok/s" if p.tokens else "- tok/s"
    return f"{counters_text(p)}  chunks {p.chunks:,}  {rate}"


def _measuring(p: Any) -> bool:
    return bool(p.measure_total) and p.measure_done < p.measure_total


def _left_s(p: Any, elapsed: float) -> float | None:
    """Seconds of measuring left at the pace so far (None before any step ended)."""
    if p.measure_done <= 0:
        return None
    return max(0.0, (p.measure_total - p.measure_done) * elapsed / p.measure_done)


def pick(enabled: bool | None, as_json: bool, stream: TextIO | None = None) -> Any:
    """The display for `--progress/--no-progress` (None: unset) and `--json`: a bar on a
    terminal, lines elsewhere; no progress with --no-progress, or with --json unless asked."""
    stream = stream or sys.stderr
    if enabled is False or (enabled is None and as_json):
        return NoProgress(stream)
    return ProgressBar() if stream.isatty() else ProgressLines(stream)


class _Notes:
    """Prints each new `measure_note` of the run once, through `show`."""

    def __init__(self) -> None:
        self._said = ""

    def note(self, p: Any, show: Any) -> None:
        if p.measure_note and p.measure_note != self._said:
            self._said = p.measure_note
            show(p.measure_note)


class NoProgress(_Notes):
    """No progress; messages (and what the run says before it measures) still reach
    stderr, one line each."""

    def __init__(self, stream: TextIO):
        super().__init__()
        self.stream = stream

    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, p: Any) -> None:
        self.note(p, self.show)

    def show(self, line: str) -> None:
        print(f"attnswitch run: {line}", file=self.stream, flush=True)


def columns_for(width: int) -> list[Any]:
    """rich progress columns for a terminal `width` columns wide. Every row names its
    stage, its counters (files; for a measurement, the step), its rate and the time left;
    from `WITH_BAR` columns a bar and a percentage, from `WIDE` chunks and tokens/s too.
    The `info` column takes what room is left and ends in an ellipsis where there is none.
    A run's row reads its percentage, rate and time left from its `Pace` (the task's
    field `pace`); a measurement's, from rich's count of its steps."""
    from rich.progress import BarColumn, TextColumn
    from rich.table import Column

    stage = TextColumn("{task.description}", table_column=Column(width=13, no_wrap=True))
    counters = TextColumn("{task.fields[counters]}", table_column=Column(no_wrap=True))
    info = TextColumn(
        "{task.fields[info]}",
        style="dim",
        table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
    )
    rate_column, share, left = _rich_classes()[0]
    if width < WITH_BAR:
        return [stage, counters, info, rate_column(), left()]
    bar = BarColumn(bar_width=16 if width >= WIDE else 10)
    return [stage, bar, share(), counters, info, rate_column(), left()]


@functools.cache
def _rich_classes() -> tuple[tuple[type, type, type], type]:
    """((Rate, Share, Left), Layout): the rich subclasses, made on first use so that
    importing this module (as `attnswitch search` does) imports no rich.progress."""
    from rich.filesize import decimal
    from rich.progress import Progress, ProgressColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        """A run's rate over its pace's window: MB/s committed while files are the work,
        chunks/s in the full pass; blank for a measurement, and until a rate is known."""

        def render(self, task: Any) -> Any:
            pace = task.fields.get("pace")
            if pace is None:
                return Text("")
            if pace.work.unit == "files":
                per_s = pace.bytes_rate()
                return Text("" if per_s is None else f"{decimal(int(per_s))}/s")
            per_s = pace.rate()
            return Text("" if per_s is None else f"{per_s:,.0f} {pace.work.unit}/s")

    class Share(ProgressColumn):
        """The share done, rounded down (`pace.percent_text`)."""

        def render(self, task: Any) -> Any:
            pace = task.fields.get("pace")
            done, total = (
                (pace.work.done, pace.work.total)
                if pace is not None
                else (task.completed, task.total or 0)
            )
            return Text(f"{percent_text(done, total):>4}", style="progress.percentage")

    class Left(ProgressColumn):
        """The time left: a run's at its pace (`Pace.left_s`), a measurement's at rich's
        estimate of its steps; "-:--" until known."""

        def render(self, task: Any) -> Any:
            pace = task.fields.get("pace")
            left = pace.left_s() if pace is not None else task.time_remaining
            return Text(clock_text(left), style="progress.remaining")

    class Layout(Progress):
        """rich's Progress with its columns chosen for the console's width at each refresh
        (`columns_for`), so that a terminal resized mid-run gets a layout that fits it."""

        def __init__(self, *, console: Any, **options: Any) -> None:
            self._width_of = console  # `Progress.console` exists once its Live does
            super().__init__(console=console, **options)

        def make_tasks_table(self, tasks: Any) -> Any:
            self.columns = tuple(columns_for(self._width_of.width))
            return super().make_tasks_table(tasks)

    return (Rate, Share, Left), Layout


class ProgressBar(_Notes):
    """A rich progress row on stderr (or `console`, a rich Console): a measurement's while
    one runs, then the run's (see the module doc). `clock`: the time source of rich and
    of the run's `Pace` (tests)."""

    def __init__(self, console: Any = None, clock: Callable[[], float] | None = None) -> None:
        super().__init__()
        self._console, self._clock = console, clock
        self._pace = Pace(clock or time.monotonic)
        self._bar: Any = None
        self._run: Any = None
        self._measure: Any = None
        self._width: int | None = None

    def __enter__(self) -> ProgressBar:
        from attnswitch.cli.output import rich_console

        console = self._console or rich_console(stderr=True)
        self._bar = _rich_classes()[1](
            console=console,
            transient=False,
            expand=True,
            **({"get_time": self._clock} if self._clock else {}),
        )
        self._bar.start()
        self._run = self._bar.add_task(
            "starting", total=None, counters="", info="", pace=self._pace, visible=False
        )
        return self

    def renderable(self) -> Any:
        """What the bar draws now (for tests and screenshots)."""
        return self._bar.get_renderable()

    def update(self, p: Any) -> None:
        self.note(p, self.show)
        if p.measure_total:
            self._update_measure(p)
            if _measuring(p):
                return
        if p.stage == "scanning" and not p.files_total:
            return  # nothing to count yet (the engine is being chosen)
        width = self._bar.console.width
        info = (
            f"chunks {p.chunks:,}  {_num(p.tokens_per_s) if p.tokens else '-'} tok/s"
            if width >= WIDE
            else ""
        )
        w = self._pace.observe(p)
        self._bar.update(
            self._run,
            description=p.stage,
            total=max(w.total, 1),
            completed=w.done if w.total else 1,
            counters=counters_text(p, wide=width >= WITH_BAR),
            info=info,
            visible=True,
        )

    def _update_measure(self, p: Any) -> None:
        if self._measure is None:
            self._measure = self._bar.add_task(
                MEASURING_TEXT, total=p.measure_total, counters="", info="", pace=None
            )
        task = self._measure
        if _measuring(p):  # a step lasts seconds: drawn now, not at the next refresh
            self._bar.update(
                task,
                total=p.measure_total,
                completed=p.measure_done,
                info=p.measure_step,
                visible=True,
                refresh=True,
            )
            return
        if self._bar.tasks[task].visible:
            elapsed = self._bar.tasks[task].elapsed or 0.0
            self._bar.update(task, visible=False)
            self.show(f"{MEASURING_TEXT}: {p.measure_step} ({elapsed:.0f} s)")

    def show(self, line: str) -> None:
        self._bar.console.print(line, markup=False, highlight=False)

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()


class ProgressLines(_Notes):
    """Plain lines on `stream`: at each change of stage, and every `interval` seconds
    between (from a background thread, so a long step still shows the run is alive).
    `clock`: the time source of the lines' seconds and of the run's `Pace` (tests)."""

    def __init__(
        self,
        stream: TextIO,
        interval: float = LINE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__()
        self.stream, self.interval, self.clock = stream, interval, clock
        self._pace = Pace(clock)
        self._lock = threading.Lock()
        self._last: Any = None
        self._stage: str | None = None
        self._printed = 0.0
        self._started = clock()
        self._measure_started: float | None = None
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="attnswitch-progress", daemon=True)

    def __enter__(self) -> ProgressLines:
        self._ticker.start()
        return self

    def line(self, p: Any) -> str:
        """One line for the state `p` (its share done and time left: of the state last
        given to `update`)."""
        now = self.clock()
        elapsed = f"{now - self._started:.0f} s"
        if _measuring(p):
            spent = now - (self._measure_started or now)
            left = _left_s(p, spent)
            eta = "" if left is None else f", about {left:.0f} s left"
            return (
                f"attnswitch run: {MEASURING_TEXT}: {p.measure_step} "
                f"({p.measure_done / p.measure_total:.0%}{eta}), {elapsed}"
            )
        w, left = self._pace.work, self._pace.left_s()
        share = percent_text(w.done, w.total) + f" of {w.unit}"
        if left is not None and w.done < w.total:
            share += f", about {clock_text(left)} left"
        return f"attnswitch run: {p.stage}: {run_detail(p)} ({share}), {elapsed}"

    def update(self, p: Any) -> None:
        stage = MEASURING_TEXT if _measuring(p) else p.stage
        with self._lock:
            self.note(p, self._show_locked)
            if stage == MEASURING_TEXT and self._measure_started is None:
                self._measure_started = self.clock()
            if stage == "scanning" and not p.files_total:
                return  # nothing to count yet (the engine is being chosen)
            previous = self._last
            if previous is not None and work(previous).unit != work(p).unit:
                # the quick pass ended between two lines: its end, before the full pass's
                self._print(self._pass_done(previous))
            if stage != MEASURING_TEXT:
                self._pace.observe(p)
            self._last = copy.copy(p)  # the run updates its state in place
            if stage != self._stage:
                self._stage = stage
                self._print(self.line(p))

    def _pass_done(self, p: Any) -> str:
        """The line of a pass that has ended (its last state `p`): "done", all of its work."""
        return (
            f"attnswitch run: done: {run_detail(p)} (100% of {work(p).unit}), "
            f"{self.clock() - self._started:.0f} s"
        )

    def _tick(self) -> None:
        while not self._stop.wait(min(self.interval, 1.0)):
            with self._lock:
                if self._last is not None and time.monotonic() - self._printed >= self.interval:
                    self._print(self.line(self._last))

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)
        self._printed = time.monotonic()

    def _show_locked(self, line: str) -> None:
        print(f"attnswitch run: {line}", file=self.stream, flush=True)

    def show(self, line: str) -> None:
        with self._lock:
            self._show_locked(line)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._ticker.join()
