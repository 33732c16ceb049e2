"""`attnswitch run`'s progress displays (cli/progress.py), driven with the run's own
`RunProgress` events: plain lines without a terminal, rich bars on one."""

from __future__ import annotations

import io
import re
import time

from attnswitch.cli.progress import (MEASURING_TEXT, NoProgress, ProgressBar, ProgressLines,
                                     pick)
from attnswitch.pipeline.run import MEASURING, RunProgress


def _measuring(done: int, total: int, what: str) -> RunProgress:
    return RunProgress(stage=MEASURING if done < total else "scanning", measure_done=done,
                       measure_total=total, measure_step=what)


def test_without_a_terminal_a_line_comes_at_each_stage_and_every_interval() -> None:
    out = io.StringIO()
    with ProgressLines(out, interval=0.3) as lines:
        lines.update(_measuring(0, 5, "reference: torch float32 vectors"))
        lines.update(_measuring(1, 5, "torch: load and parity check"))  # same stage: quiet
        time.sleep(1.0)  # a long step: the ticker still prints
        lines.update(_measuring(5, 5, "picked openvino"))
        progress = RunProgress(stage="reading", files_total=4, bytes_total=100)
        lines.update(progress)
        progress.stage, progress.files_done, progress.bytes_done = "done", 4, 100
        lines.update(progress)
    text = out.getvalue()
    assert "\x1b[" not in text  # plain text, no terminal codes
    got = text.splitlines()
    assert got[0].startswith(f"attnswitch run: {MEASURING_TEXT}: step 1 of 5: reference")
    ticks = [g for g in got if "step 2 of 5: torch: load and parity check" in g]
    assert 2 <= len(ticks) <= 5, got
    assert re.match(r"attnswitch run: reading: files 0/4 .* \(0% of bytes\)", got[-2])
    assert re.match(r"attnswitch run: done: files 4/4 .* \(100% of bytes\)", got[-1])


def test_the_display_fits_the_stream_and_the_flags() -> None:
    assert isinstance(pick(None, False, io.StringIO()), ProgressLines)  # piped
    assert isinstance(pick(None, True, io.StringIO()), NoProgress)  # --json keeps quiet
    assert isinstance(pick(True, True, io.StringIO()), ProgressLines)  # unless asked
    assert isinstance(pick(False, False, io.StringIO()), NoProgress)


def test_a_terminal_shows_the_measurement_as_its_own_bar_then_the_run() -> None:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    with ProgressBar(console) as bar:
        bar.update(_measuring(0, 4, "reference: torch float32 vectors"))
        bar.update(_measuring(2, 4, "openvino: load and parity check"))
        bar.update(_measuring(4, 4, "picked openvino"))
        bar.update(RunProgress(stage="encoding", files_total=3, files_done=1, bytes_total=30,
                               bytes_done=10, chunks=7))
        bar.show("warning: a message for the user")
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert MEASURING_TEXT in screen
    assert "step 3 of 4: openvino: load and parity check" in screen
    assert "picked openvino" in screen
    assert "encoding" in screen and "files 1/3" in screen and "chunks 7" in screen
    assert "warning: a message for the user" in screen
    assert "starting" not in screen  # the run's bar appears with its first stage
