"""An event for each Tesseract OCR run that starts: tests that must act while a read worker
runs Tesseract wait on it instead of polling the process table.

`TesseractStarts(folder)` puts a `tesseract` in `folder` that, for an OCR run (its first
argument "stdin": the page and OSD runs of `readers/tesseract.py`, not `--list-langs`),
writes "<its pid> <its parent's pid>" to a FIFO, then `exec`s the real Tesseract (same pid,
same process name). Processes given `path` as their PATH run it. `next(timeout)` blocks on
the FIFO until a run announces itself: (tesseract pid, pid of the process that started it,
a read worker). A wrapper with no one reading is not held up: it writes nothing and runs
Tesseract.
"""

from __future__ import annotations

import os
import select
import shutil
import sys
import time
from pathlib import Path

_WRAPPER = """\
import os, sys
if sys.argv[1:2] == ["stdin"]:
    try:
        fd = os.open({fifo!r}, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no reader: nothing to announce
        pass
    else:
        try:
            os.write(fd, b"%d %d\\n" % (os.getpid(), os.getppid()))
        except OSError:  # the FIFO is full: no one is reading it
            pass
        os.close(fd)
os.execv({real!r}, [{real!r}, *sys.argv[1:]])
"""


class TesseractStarts:
    """See the module doc. Close it (or use it as a context manager) to close the FIFO."""

    def __init__(self, folder: Path) -> None:
        real = shutil.which("tesseract")
        if real is None:
            raise FileNotFoundError("tesseract: expected the program on PATH, got none")
        folder.mkdir(parents=True, exist_ok=True)
        fifo = folder / "started"
        os.mkfifo(fifo)
        wrapper = folder / "tesseract"
        wrapper.write_text(f"#!{sys.executable} -I\n" + _WRAPPER.format(fifo=str(fifo), real=real))
        wrapper.chmod(0o755)
        self.path = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
        self._read = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        # a writer held open here: between two wrappers the FIFO never reads as ended
        self._hold = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        self._buffer = b""

    def next(self, timeout: float) -> tuple[int, int]:
        """(tesseract pid, its parent's pid) of the next OCR run to start; `TimeoutError`
        when none starts within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError(
                    f"tesseract: expected an OCR run to start within {timeout} s, got none"
                )
            self._buffer += os.read(self._read, 4096)
        line, self._buffer = self._buffer.split(b"\n", 1)
        pid, parent = line.split()
        return int(pid), int(parent)

    def close(self) -> None:
        os.close(self._hold)
        os.close(self._read)

    def __enter__(self) -> TesseractStarts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
