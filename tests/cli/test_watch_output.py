"""What `watch` says about the full pass between changes: "N of M chunks" with an ETA at
the rate it has filled them, and a closing line; and its log file (`log_to`)."""

from __future__ import annotations

import logging
from pathlib import Path

from attnswitch.cli.watch_output import duration, fill_line, log_to
from attnswitch.jobs.passes import FullPassCounts


def test_the_fill_line_says_n_of_m_with_an_eta() -> None:
    counts = FullPassCounts(encoded=900, reused=100, refused=3, seconds=100.0)
    line = fill_line(counts, 3000)
    # 1,000 done at 10 chunks/s: 3,000 left take 300 s
    assert "filling in full vectors between changes: 1,000 of 4,000 chunks (25%)" in line
    assert "about 5 min left at 10.0 chunks/s" in line
    assert "3 refused by the encoder" in line
    assert "left at" not in fill_line(FullPassCounts(), 10)  # no rate yet: no ETA
    done = fill_line(FullPassCounts(encoded=4000, seconds=400.0), 0)
    assert "full vectors: every chunk has one (4,000 filled in by this watch in 7 min)" in done


def test_durations_read_as_seconds_minutes_or_hours() -> None:
    assert [duration(s) for s in (0.4, 45, 600, 3 * 3600 + 300)] == [
        "0 s",
        "45 s",
        "10 min",
        "3 h 05 min",
    ]


def test_log_to_appends_info_lines_and_lets_go(tmp_path: Path) -> None:
    logger = logging.getLogger("attnswitch.test_watch_output")
    path = tmp_path / "logs" / "watch.log"
    with log_to(path, logger):
        logger.info("watch batch: new=%d", 2)
    logger.info("after: not logged")
    lines = path.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith("INFO watch batch: new=2")
    assert not logger.handlers and logger.level == logging.NOTSET
