"""A run's share done and time left (cli/pace.py), fed the run's own `RunProgress` states
on a clock the test moves (no sleeps): the share counts files, then the full pass's
chunks, never says 100% before all is done, and the time left moves steadily through a
folder of quick files and slow ones."""

from __future__ import annotations

import random

import pytest

from attnswitch.cli.pace import MIN_SPAN_S, Pace, Work, clock_text, percent_text, work
from attnswitch.jobs.run import RunProgress


class Clock:
    """A time source the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "done, total, text",
    [(0, 345, "0%"), (323, 345, "93%"), (344, 345, "99%"), (345, 345, "100%"), (0, 0, "100%")],
)
def test_the_share_is_rounded_down(done: int, total: int, text: str) -> None:
    assert percent_text(done, total) == text


@pytest.mark.parametrize(
    "seconds, text", [(None, "-:--"), (0, "0:00"), (6.2, "0:07"), (725, "12:05"), (3723, "1:02:03")]
)
def test_the_time_left_reads_as_a_clock(seconds: float | None, text: str) -> None:
    assert clock_text(seconds) == text


def test_the_share_counts_files_not_bytes() -> None:
    """The newcomer's run: 323 of 345 files committed, and every byte of those still to
    read in the 22 left (files whose size the listing gave as 0): 93%, and time left."""
    clock = Clock()
    pace = Pace(clock)
    p = RunProgress(stage="reading", files_total=345, bytes_total=1_000_000)
    pace.observe(p)
    clock.now += 323.0
    p.files_done, p.bytes_done = 323, 1_000_000
    assert pace.observe(p) == Work("files", 323, 345)
    assert percent_text(p.files_done, p.files_total) == "93%" and pace.fraction < 0.94
    assert pace.left_s() == pytest.approx(22.0)  # a file a second


def test_the_full_pass_counts_chunks() -> None:
    clock = Clock()
    pace = Pace(clock)
    p = RunProgress(stage="reading", files_total=10, files_done=10, files_read=10)
    pace.observe(p)
    p.stage, p.fill_total, p.fill_done = "encoding", 2000, 0
    assert pace.observe(p) == Work("chunks", 0, 2000)  # a new stage: its own rate
    assert pace.left_s() is None and pace.rate() is None
    clock.now += 10.0
    p.fill_done = 500
    pace.observe(p)
    assert pace.rate() == pytest.approx(50.0) and pace.left_s() == pytest.approx(30.0)
    assert pace.fraction == 0.25
    p.fill_done = 2000
    pace.observe(p)
    assert pace.left_s() == 0.0 and pace.fraction == 1.0


def test_files_found_unchanged_make_no_rate() -> None:
    """Files counted done at once when the folder is listed are not work done per second."""
    clock = Clock()
    pace = Pace(clock)
    pace.observe(RunProgress(stage="scanning"))
    clock.now += 0.5
    p = RunProgress(stage="reading", files_total=100, files_done=90, files_read=90)
    pace.observe(p)
    clock.now += MIN_SPAN_S / 2
    assert pace.rate() is None and pace.left_s() is None  # too soon to say
    clock.now += 10.0 - MIN_SPAN_S / 2
    p.files_done = 95
    pace.observe(p)
    assert pace.rate() == pytest.approx(0.5) and pace.left_s() == pytest.approx(10.0)


def test_a_long_file_makes_the_time_left_grow_while_it_is_read() -> None:
    clock = Clock()
    pace = Pace(clock)
    p = RunProgress(stage="reading", files_total=20)
    pace.observe(p)
    for _ in range(10):
        clock.now += 1.0
        p.files_done += 1
        pace.observe(p)
    before = pace.left_s()
    assert before == pytest.approx(10.0)
    clock.now += 10.0  # a scan being read: nothing committed
    assert pace.left_s() == pytest.approx(20.0)  # half the rate, read without an event


def test_the_time_left_moves_steadily_through_quick_and_slow_files() -> None:
    """345 files of 0.2-2 s, six of 40 s among them (scans), committed one after another;
    the time left, read every second after the first half-minute: it changes by at most
    10% from one second to the next and is within a factor of 2 of the truth once a
    minute has passed (a rate over the last file, or the last minute, jumped by 100x)."""
    rng = random.Random(5)
    costs = [rng.uniform(0.2, 2.0) for _ in range(345)]
    for i in (40, 41, 150, 151, 152, 300):
        costs[i] = 40.0
    ends, t = [], 0.0
    for cost in costs:
        t += cost
        ends.append(t)
    clock = Clock()
    start = clock.now
    pace = Pace(clock)
    p = RunProgress(stage="reading", files_total=len(costs))
    pace.observe(p)
    seen: list[tuple[float, float, float]] = []  # (seconds in, time left shown, truth)
    for second in range(1, int(t)):
        clock.now = start + second
        while p.files_done < len(ends) and ends[p.files_done] <= second:
            p.files_done += 1
            pace.observe(p)
        left = pace.left_s()
        if left is None:  # not known before MIN_SPAN_S
            assert second < MIN_SPAN_S
            continue
        seen.append((second, left, t - second))
    steps = [
        max(a, b) / min(a, b)
        for (s, a, truth), (_, b, _) in zip(seen, seen[1:])
        if s > 30 and truth > 30
    ]
    assert max(steps) < 1.1, max(steps)
    off = [
        max(shown, truth) / min(shown, truth) for s, shown, truth in seen if s > 60 and truth > 30
    ]
    assert max(off) < 2.0, max(off)


def test_work_is_the_full_pass_once_it_has_begun() -> None:
    p = RunProgress(files_total=4, files_done=4)
    assert work(p) == Work("files", 4, 4)
    p.fill_total, p.fill_done = 9, 3
    assert work(p) == Work("chunks", 3, 9)
