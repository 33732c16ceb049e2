"""Library messages kept out of a command's own output: appended to a log file.

Libraries report through `logging` and `warnings` (pypdf's "EOF marker not found", a
runtime's deprecation notes). With no handler configured, Python prints such a record on
stderr, where a command draws its progress bar: the message lands in the middle of it, and
reads like an error of the command. While a `LibraryLog` is active:

- log records of WARNING and above from any logger but attnswitch's own, and warnings
  raised outside attnswitch, are appended to the log file (created on the first one, with
  a header line naming the command), and counted;
- attnswitch's own log records and warnings (messages that start with "attnswitch", or
  warning categories and code of the attnswitch package) are for the user: each goes to
  `show(line)` as one line (a progress display prints it above itself), once: a line
  already shown during the command is not shown again (the memory watchdog both logs and
  warns the same sentence, which reached the user twice).

On exit the logging handlers and `warnings.showwarning` are put back as they were.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

_PACKAGE = "attnswitch"
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


def is_own_warning(message: Any, category: type, filename: str) -> bool:
    """Whether a warning is attnswitch's (for the user) rather than a library's."""
    return (
        str(message).startswith(_PACKAGE)
        or category.__module__.startswith(_PACKAGE)
        or str(Path(filename).resolve()).startswith(_PACKAGE_DIR)
    )


class _LibraryFile(logging.Handler):
    """Appends library records to `path`, opened on the first record."""

    def __init__(self, path: Path, header: str):
        super().__init__(logging.WARNING)
        self.path, self.header, self.count = path, header, 0
        self._file: Any = None
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.addFilter(lambda record: not record.name.startswith(_PACKAGE))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8")
                self._file.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {self.header}\n")
            self._file.write(self.format(record) + "\n")
            self._file.flush()
            self.count += 1
        except Exception:
            self.handleError(record)

    def close(self) -> None:
        with self.lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        super().close()


class _OwnRecords(logging.Handler):
    """attnswitch's own records, one line each, to `show`."""

    def __init__(self, show: Callable[[str], None]):
        super().__init__(logging.WARNING)
        self.show = show

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.show(f"{record.levelname.lower()}: {record.getMessage()}")
        except Exception:
            self.handleError(record)


class LibraryLog:
    """The context of a command: library messages to `path`, attnswitch's to `show`.

    `count` is how many library messages were written to `path` (the file is created on
    the first one only)."""

    def __init__(self, path: Path, show: Callable[[str], None], header: str = ""):
        self.path = Path(path)
        self._show = show
        self._shown: set[str] = set()
        self._file = _LibraryFile(self.path, header)
        self._own = _OwnRecords(self.show)
        self._saved: Any = None
        self._own_logger = logging.getLogger(_PACKAGE)

    @property
    def count(self) -> int:
        return self._file.count

    def show(self, line: str) -> None:
        """`line` to the user, unless it was shown already during this command."""
        if line not in self._shown:
            self._shown.add(line)
            self._show(line)

    def _showwarning(
        self,
        message: Any,
        category: type,
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if is_own_warning(message, category, filename):
            self.show(f"warning: {message}")
            return
        text = warnings.formatwarning(message, category, filename, lineno, line).strip()
        record = logging.LogRecord(
            "py.warnings", logging.WARNING, filename, lineno, text, None, None
        )
        self._file.handle(record)

    def __enter__(self) -> LibraryLog:
        root = logging.getLogger()
        self._saved = warnings.showwarning
        root.addHandler(self._file)
        self._own_logger.addHandler(self._own)
        warnings.showwarning = self._showwarning
        return self

    def __exit__(self, *exc: object) -> None:
        warnings.showwarning = self._saved
        self._own_logger.removeHandler(self._own)
        logging.getLogger().removeHandler(self._file)
        self._file.close()
