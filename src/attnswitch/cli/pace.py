"""How far a run is and how long it has left, as its progress displays show it: one unit
of work for the share done, the bar and the time left, so that they agree.

- `work(p)`: what the run is working through, from its `jobs.run.RunProgress`: the files
  to read and write (a plain run's quick pass, a one-pass run), then, once the full pass
  has begun, the chunks that get their full vector. Bytes are not the unit: a folder's
  files differ in size by orders of magnitude and in cost per byte (a scanned page, a
  compressed text), and a run that counted bytes said 100% at 323 of 345 files.
- `percent_text`: the share done, rounded down, so that 100% means all of it.
- `Pace`: the rate of that work over the current stage so far (the run's average), on its
  `clock`, and the seconds left at it. The average, not the last file's rate nor one over
  the last minute: a folder has files that take a second and scans that take a minute,
  and a rate over a short span made the time left jump (00:13, 06:45, 10:40); on a
  simulated folder of 345 files with six 40-second files among 0.2-2 s ones
  (tests/cli/test_pace.py), a 60-second window was off by up to 48 times and changed by up
  to 2 times from one second to the next, the average by 1.9 and 1.06 times. None is
  known until some work was done over `MIN_SPAN_S`. Fed events as they come (`observe`),
  read at any time (`left_s`): while a long file is read the time left grows, as it does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MIN_SPAN_S = 2.0  # no rate (nor time left) before a stage is this many seconds old


@dataclass(frozen=True)
class Work:
    """`done` of `total` `unit` ("files", "chunks") of the run's current pass."""

    unit: str
    done: int
    total: int


def work(p: Any) -> Work:
    """What the run `p` (a `RunProgress`) is working through now: the full pass's chunks
    once it has begun (`fill_total`), else the files."""
    if p.fill_total:
        return Work("chunks", p.fill_done, p.fill_total)
    return Work("files", p.files_done, p.files_total)


def percent_text(done: float, total: float) -> str:
    """`done` of `total` as a whole percentage rounded down ("99%" at 344 of 345; "100%"
    only when all is done, or there is nothing to do)."""
    if done >= total:
        return "100%"
    return f"{math.floor(100 * max(done, 0) / total)}%"


def clock_text(seconds: float | None) -> str:
    """Seconds as a clock: "0:07", "12:05", "1:02:03"; "-:--" when unknown."""
    if seconds is None:
        return "-:--"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Pace:
    """The run's pace on `clock` (seconds; `time.monotonic` by default): `observe` each
    state of the run, then read `fraction`, `left_s`, `rate` and `bytes_rate`.

    A change of unit (the full pass begins) or of the total (the folder was listed), or
    fewer done than before (another run), starts a new stage, whose rate is counted from
    its first state (so files found unchanged at the start, counted done at once, make no
    rate)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.work = Work("files", 0, 0)
        self._first: tuple[float, int, int] | None = None  # (time, done, bytes done)
        self._bytes = 0

    def observe(self, p: Any) -> Work:
        """Record the state `p` (a `RunProgress`) now; returns its `work`."""
        current = work(p)
        if (
            self._first is None
            or (current.unit, current.total) != (self.work.unit, self.work.total)
            or current.done < self.work.done
        ):
            self._first = (self.clock(), current.done, p.bytes_done)
        self.work, self._bytes = current, p.bytes_done
        return current

    @property
    def fraction(self) -> float:
        """The share of the current stage's work done, 0 to 1 (1: nothing to do)."""
        w = self.work
        return min(1.0, w.done / w.total) if w.total > 0 else 1.0

    def _per_s(self, now_value: int, index: int) -> float | None:
        """The stage's average rate of a count now at `now_value` (`index`: its place in
        the first state); None before a span of MIN_SPAN_S."""
        if self._first is None:
            return None
        span = self.clock() - self._first[0]
        if span < MIN_SPAN_S:
            return None
        return (now_value - self._first[index]) / span

    def rate(self) -> float | None:
        """Units of work done per second so far in this stage (None: not known yet)."""
        return self._per_s(self.work.done, 1)

    def bytes_rate(self) -> float | None:
        """Bytes committed per second so far in this stage (None: not known yet)."""
        return self._per_s(self._bytes, 2)

    def left_s(self) -> float | None:
        """Seconds until the current stage's work is done at `rate`: 0 when it is done,
        None while no rate is known or nothing was done yet."""
        w = self.work
        if w.done >= w.total:
            return 0.0
        rate = self.rate()
        if not rate or rate <= 0:
            return None
        return (w.total - w.done) / rate
