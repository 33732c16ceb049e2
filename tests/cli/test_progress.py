"""`attnswitch run`'s progress displays (cli/progress.py), driven with the run's own
`RunProgress` events: plain lines without a terminal, a rich row on one that fits the
terminal's width; both with the share done and the time left of the same work (files,
then the full pass's chunks: cli/pace.py), on a clock the test moves."""

from __future__ import annotations

import io
import re
import time

import pytest

from attnswitch.cli.progress import MEASURING_TEXT, NoProgress, ProgressBar, ProgressLines, pick
from attnswitch.jobs.run import MEASURING, RunProgress

NOTE = (
    "measuring which engine encodes fastest (onnxruntime, openvino, torch, jax) with the "
    "same answers as torch float32, once on this machine (remembered): about 50 s"
)


def _measuring(done: float, total: float, what: str) -> RunProgress:
    return RunProgress(
        stage=MEASURING if done < total else "scanning",
        measure_done=done,
        measure_total=total,
        measure_step=what,
        measure_note=NOTE,
    )


def _encoding() -> RunProgress:
    """A run's state mid-way: more files read than committed."""
    return RunProgress(
        stage="encoding",
        files_total=5678,
        files_done=1000,
        files_read=1234,
        bytes_total=10_000_000,
        bytes_done=2_500_000,
        bytes_read=3_000_000,
        chunks=12_345,
        tokens=1_000_000,
        encode_s=400.0,
    )


def test_without_a_terminal_a_line_comes_at_each_stage_and_every_interval() -> None:
    out = io.StringIO()
    with ProgressLines(out, interval=0.3) as lines:
        lines.update(_measuring(0, 52, "reference: torch float32 vectors"))
        lines.update(_measuring(10, 52, "torch: load and parity check"))  # same stage: quiet
        time.sleep(1.0)  # a long step: the ticker still prints
        lines.update(_measuring(52, 52, "picked openvino, fp32"))
        progress = RunProgress(stage="reading", files_total=4, bytes_total=100, measure_note=NOTE)
        lines.update(progress)
        progress.files_read = 4
        progress.stage, progress.files_done, progress.bytes_done = "done", 4, 100
        lines.update(progress)
    text = out.getvalue()
    assert "\x1b[" not in text  # plain text, no terminal codes
    got = text.splitlines()
    assert got[0] == f"attnswitch run: {NOTE}"  # said once, before the steps
    assert got.count(f"attnswitch run: {NOTE}") == 1
    assert got[1].startswith(
        f"attnswitch run: {MEASURING_TEXT}: reference: torch float32 vectors (0%"
    )
    ticks = [g for g in got if "torch: load and parity check (19%, about" in g]
    assert 2 <= len(ticks) <= 5, got
    assert re.match(r"attnswitch run: reading: files 0/4 done, 0 read .* \(0% of files\)", got[-2])
    assert re.match(r"attnswitch run: done: files 4/4 done, 4 read .* \(100% of files\)", got[-1])


def test_the_display_fits_the_stream_and_the_flags() -> None:
    assert isinstance(pick(None, False, io.StringIO()), ProgressLines)  # piped
    assert isinstance(pick(None, True, io.StringIO()), NoProgress)  # --json keeps quiet
    assert isinstance(pick(True, True, io.StringIO()), ProgressLines)  # unless asked
    assert isinstance(pick(False, False, io.StringIO()), NoProgress)


def test_without_progress_the_run_still_says_before_it_measures() -> None:
    out = io.StringIO()
    with NoProgress(out) as quiet:
        quiet.update(_measuring(0, 52, "reference: torch float32 vectors"))
        quiet.update(_measuring(10, 52, "torch: load and parity check"))
    assert out.getvalue() == f"attnswitch run: {NOTE}\n"


class Clock:
    """The time source of rich and of the run's pace, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _screen(width: int, *states: RunProgress) -> list[str]:
    """The lines a terminal `width` columns wide shows: the bar's row for each state (each
    given twice, two seconds apart, the second time 100 files and 2 MB further), and what
    was printed above it."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, record=True, force_terminal=False)
    clock = Clock()
    with ProgressBar(console, clock) as bar:
        for state in states:
            bar.update(state)
            clock.now += 2.0
            state.bytes_done += 2_000_000
            if state.files_total:
                state.files_done += 100
            bar.update(state)
            console.print(bar.renderable())
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [60, 80, 120])
def test_a_terminal_row_fits_its_width_and_keeps_its_counters(width: int) -> None:
    lines = _screen(
        width,
        _measuring(10, 52, "fp32 engines: onnxruntime: timing round 2 of 3"),
        _measuring(52, 52, "picked openvino, fp32"),
        _encoding(),
    )
    assert lines and all(len(line) <= width for line in lines), [
        (len(line), line) for line in lines if len(line) > width
    ]
    text = "\n".join(lines)
    assert "measuring which engine encodes fastest" in text  # the note, wrapped to fit
    # the step, cut short where room ends
    assert any(
        line.startswith(MEASURING_TEXT) and "fp32 engines: onnx" in line for line in lines
    ), lines
    assert f"{MEASURING_TEXT}: picked openvino, fp32 (" in text
    row = next(line for line in lines if line.startswith("encoding"))
    assert "1100/5678 done, 1234 read" in row
    assert "1.0 MB/s" in row, row  # two megabytes committed in two seconds
    assert "1:32" in row, row  # the time left: 4,578 files at 50 files/s, rounded up
    if width >= 80:
        assert "files 1100/5678 done, 1234 read" in row and " 19% " in row, row
    if width >= 120:
        assert "chunks 12,345" in row and "2,500 tok/s" in row


@pytest.mark.parametrize("width", [80, 120])
def test_the_share_and_the_time_left_count_the_same_work(width: int) -> None:
    """At 323 of 345 files, with every counted byte committed, the row says 93% and the
    time left of 22 files; in the full pass, the share and time left of its chunks."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, record=True, force_terminal=False)
    clock = Clock()
    p = RunProgress(stage="reading", files_total=345, bytes_total=9_000_000)
    with ProgressBar(console, clock) as bar:
        bar.update(p)
        clock.now += 323.0
        p.files_done, p.files_read, p.bytes_done = 323, 330, 9_000_000
        bar.update(p)
        console.print(bar.renderable())
        reading = console.export_text().splitlines()[-1]
        assert " 93% " in reading and "100%" not in reading, reading
        assert "0:22" in reading, reading  # 22 files at a file a second
        p.files_done = p.files_read = 345
        p.searchable_s, p.stage, p.fill_total = 330.0, "encoding", 3000
        bar.update(p)
        clock.now += 60.0
        p.fill_done = 1000
        bar.update(p)
        console.print(bar.renderable())
        full = console.export_text().splitlines()[-1]
    assert "full vectors 1,000/3,000" in full and " 33% " in full, full
    assert "2:00" in full and "17 chunks/s" in full, full  # 2,000 chunks at 16.7/s


def test_lines_say_the_share_and_the_time_left_of_the_same_work() -> None:
    clock = Clock()
    lines = ProgressLines(io.StringIO(), clock=clock)  # not entered: no ticker
    p = RunProgress(stage="reading", files_total=345, bytes_total=9_000_000)
    lines.update(p)
    clock.now += 323.0
    p.files_done, p.files_read, p.bytes_done = 323, 330, 9_000_000
    lines.update(p)
    assert lines.line(p).endswith("(93% of files, about 0:22 left), 323 s")
    p.files_done = 345
    p.stage, p.fill_total, p.fill_done = "encoding", 3000, 0
    lines.update(p)
    clock.now += 60.0
    p.fill_done = 1000
    lines.update(p)
    text = lines.line(p)
    assert text.startswith("attnswitch run: encoding: full vectors 1,000/3,000  chunks"), text
    assert text.endswith("(33% of chunks, about 2:00 left), 383 s"), text


def test_a_terminal_shows_the_measurement_then_the_run_and_messages_above() -> None:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    with ProgressBar(console) as bar:
        bar.update(_measuring(0, 52, "reference: torch float32 vectors"))
        bar.update(_measuring(16, 52, "openvino: load and parity check"))
        bar.update(_measuring(52, 52, "picked openvino, fp32"))
        bar.update(
            RunProgress(
                stage="encoding",
                files_total=3,
                files_done=1,
                files_read=2,
                bytes_total=30,
                bytes_done=10,
                chunks=7,
            )
        )
        bar.show("warning: a message for the user")
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert screen.count(NOTE) == 1
    assert "openvino: load and parity check" in screen
    assert f"{MEASURING_TEXT}: picked openvino, fp32" in screen
    assert "encoding" in screen and "files 1/3 done, 2 read" in screen and "chunks 7" in screen
    assert "warning: a message for the user" in screen
    assert "starting" not in screen  # the run's row appears with its first stage
