"""Library messages go to a log file while a command runs; attnswitch's own reach the
user (observe/liblog.py)."""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path

import pytest

from attnswitch.observe.liblog import LibraryLog

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"


def _read_truncated_pdf() -> None:
    """pypdf on a PDF cut short: it logs "EOF marker not found" (then gives up)."""
    import pypdf

    data = (CORPUS / "sqlite" / "copyright-release.pdf").read_bytes()
    with pytest.raises(pypdf.errors.PdfReadError):
        pypdf.PdfReader(io.BytesIO(data[: len(data) // 2]))


def test_library_noise_goes_to_the_log_and_attnswitch_messages_to_the_user(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    shown: list[str] = []
    path = tmp_path / "logs" / "run.log"
    handlers = list(logging.getLogger().handlers)
    showwarning = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with LibraryLog(path, shown.append, "attnswitch run /data") as log:
            _read_truncated_pdf()
            warnings.warn_explicit("old API", DeprecationWarning, "/site-packages/lib.py", 3)
            warnings.warn("attnswitch: engine 'x' failed its parity check", RuntimeWarning)  # noqa: B028
            logging.getLogger("attnswitch.jobs.run").warning("run: retrying one by one")
    assert shown == [
        "warning: attnswitch: engine 'x' failed its parity check",
        "warning: run: retrying one by one",
    ]
    text = path.read_text()
    assert text.startswith("=== ") and "attnswitch run /data" in text.splitlines()[0]
    assert "WARNING pypdf._reader: EOF marker not found" in text
    assert "DeprecationWarning: old API" in text
    assert "parity" not in text and "retrying" not in text
    assert log.count == 2
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
    assert logging.getLogger().handlers == handlers and warnings.showwarning is showwarning


def test_no_library_message_makes_no_file(tmp_path: Path) -> None:
    with LibraryLog(tmp_path / "run.log", print) as log:
        pass
    assert log.count == 0 and not (tmp_path / "run.log").exists()


def test_the_memory_watchdogs_warning_reaches_the_user_once(tmp_path: Path) -> None:
    """The watchdog logs and warns the same sentence when memory grows: one line shown."""
    import numpy as np

    from attnswitch.observe.memwatch import MemoryWatchdog

    recorded = iter((np.arange(40) * 5 * 2**20 + 2**30).astype(int))
    watchdog = MemoryWatchdog("replay", meter=lambda: next(recorded), min_growth_mb=32)
    shown: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with LibraryLog(tmp_path / "run.log", shown.append):
            for _ in range(40):
                watchdog.check()
    assert len(shown) == 1 and "growing" in shown[0], shown
