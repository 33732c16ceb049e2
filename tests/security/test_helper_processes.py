"""No helper process outlives its run (issue 50): the programs the readers start (antiword
and the other legacy Office converters, Tesseract) end with the call that started them, on
its timeout, with a worker ended by its read deadline, and with a run killed by `kill -9`;
so do the run's reading workers.

A hung converter is a fake `antiword` first on PATH (legacy_office finds its programs
there) that sleeps; Tesseract is the real one on a large scan (made with Pillow). Every
process a test starts carries a mark in its environment, inherited by all its descendants
whatever becomes of their parents; what is left is found by that mark in /proc (through
psutil) and waited for with a bounded timeout. Linux only: the parent-death signal is.

A converter that hangs in a child of its own has that child ended with it on its own
timeout (its process group); after its worker is killed outright (the read deadline, a
`kill -9` of the run) only the converter itself dies (the parent-death signal is not
inherited), so those tests hang in the converter itself, as antiword and Tesseract run.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from attnswitch.documents.readers import helper_process
from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.legacy_office import read_doc
from attnswitch.documents.readers.ocr import read_image
from attnswitch.documents.readers.skip import Skip, Skipped

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="the parent-death signal (PR_SET_PDEATHSIG) is Linux's",
)

FIXTURES = Path(__file__).resolve().parents[1] / "documents" / "readers" / "fixtures"
MARK = "ATTNSWITCH_TEST_HELPER"
GONE_S = 10.0  # how long what is left may take to die: a bound, not a measure
RUN_S = 300.0  # a hang detector for a whole run, not a measure
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="needs Tesseract (Debian: tesseract-ocr)"
)


def marked(mark: str) -> list[psutil.Process]:
    """Live processes (not zombies) whose environment holds `MARK=mark`."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get(MARK) == mark:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def left_after(mark: str, timeout: float = GONE_S) -> list[str]:
    """The command lines of the processes marked `mark` still alive after up to `timeout`
    seconds; each is killed then (what a failing test leaves would otherwise run on)."""
    _, alive = psutil.wait_procs(marked(mark), timeout=timeout)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    lines = []
    for p in alive:
        try:
            lines.append(" ".join(p.cmdline()))
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return lines


class Starts:
    """A FIFO on which a fake program writes a line when it starts; `next(timeout)` waits
    for one (an event, not a poll of the process table)."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self._read = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        # a writer held open here: the FIFO never reads as ended, nor blocks a writer
        self._hold = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        self._buffer = b""

    def next(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError(
                    f"{self.path.name}: expected a start within {timeout} s, got none"
                )
            self._buffer += os.read(self._read, 4096)
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def __enter__(self) -> Starts:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._hold)
        os.close(self._read)


def fake_program(folder: Path, name: str, body: str) -> str:
    """A shell script `name` in `folder` running `body`; the PATH that finds it first."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def forking_hang(mark: str) -> str:
    """A body that hangs in a child of its own (marked `mark`), as a converter that starts
    another program would."""
    return f"{MARK}={mark} sleep 1000 &\nwait\n"


def hang(starts: Path | None = None) -> str:
    """A body that hangs in the started process itself, after saying so on `starts`."""
    return (f"echo $$ > '{starts}'\n" if starts else "") + "exec sleep 1000\n"


# ---- a helper past its own timeout: its whole process group ends -------------------------


def test_a_helper_reads_as_under_subprocess_run() -> None:
    """Started through the parent-death wrapper, a program's exit code, the signal that
    ended it, its output and a missing program read as `subprocess.run` gives them."""
    done = helper_process.run(
        ["sh", "-c", "cat; echo said >&2; exit 3"], input=b"page", timeout_s=GONE_S
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, b"page", b"said\n")
    assert helper_process.run(["sh", "-c", "kill -SEGV $$"], timeout_s=GONE_S).returncode == (
        -signal.SIGSEGV
    )
    with pytest.raises(FileNotFoundError):
        helper_process.run([f"no-such-program-{uuid.uuid4().hex}"], timeout_s=GONE_S)


def test_a_converter_past_its_timeout_is_ended_with_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = uuid.uuid4().hex
    monkeypatch.setenv("PATH", fake_program(tmp_path / "bin", "antiword", forking_hang(mark)))
    with pytest.raises(Skipped) as raised:
        read_doc((FIXTURES / "anyhow.doc").read_bytes(), ReadOptions(tool_timeout_s=1))
    assert raised.value.skip is Skip.TIMED_OUT
    assert left_after(mark) == []  # was: the converter's child, left running


@needs_tesseract
def test_tesseract_past_its_timeout_is_ended_with_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> None:
    mark = uuid.uuid4().hex
    real = shutil.which("tesseract")
    # OCR runs (first argument "stdin") hang; the language list comes from the real one
    body = f'if [ "$1" = stdin ]; then\n{forking_hang(mark)}fi\nexec "{real}" "$@"\n'
    monkeypatch.setenv("PATH", fake_program(tmp_path / "bin", "tesseract", body))
    with pytest.raises(Skipped) as raised:
        read_image((FIXTURES / "scan.png").read_bytes(), ReadOptions(ocr_timeout_s=1))
    assert "Tesseract took more than 1 s" in raised.value.detail
    assert left_after(mark) == []


# ---- a run: past its read deadline, and killed with kill -9 ------------------------------


def start_run(root: Path, db: Path, mark: str, path: str, *args: str) -> subprocess.Popen:
    """`attnswitch run root` with one reading worker, every process of it marked `mark`."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnswitch.cli",
            "run",
            str(root),
            "--db",
            str(db),
            "--read-workers",
            "1",
            "--no-progress",
            "--json",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            MARK: mark,
            "PATH": path,
            "ATTNSWITCH_CACHE_DIR": str(db.parent / "cache"),
        },
    )


def one_doc(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    shutil.copy(FIXTURES / "anyhow.doc", root / "anyhow.doc")
    return root


@pytest.mark.slow
def test_a_hung_converter_past_the_read_timeout_is_skipped_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """The worker's read deadline ends it (SIGALRM) while antiword hangs: the file is
    skipped, and antiword dies with the worker (was: left running, its parent 1)."""
    mark = uuid.uuid4().hex
    path = fake_program(tmp_path / "bin", "antiword", hang())
    proc = start_run(one_doc(tmp_path), tmp_path / "db", mark, path, "--read-timeout", "2")
    out, err = proc.communicate(timeout=RUN_S)
    assert proc.returncode == 0, err
    assert json.loads(out)["skipped_files"] == [
        {"source": "anyhow.doc", "reason": "extraction timed out: more than 2 s"}
    ]
    assert left_after(mark) == []


@pytest.mark.slow
def test_kill_9_of_a_run_in_a_hung_converter_leaves_nothing(tmp_path: Path) -> None:
    """The run is killed once its worker's antiword has started: the worker dies with the
    run, and antiword with the worker."""
    mark = uuid.uuid4().hex
    with Starts(tmp_path / "started") as starts:
        path = fake_program(tmp_path / "bin", "antiword", hang(starts.path))
        proc = start_run(one_doc(tmp_path), tmp_path / "db", mark, path)
        try:
            antiword = int(starts.next(timeout=RUN_S))
        except TimeoutError:
            proc.kill()
            pytest.fail(f"the run never started antiword: {proc.communicate()[1]}")
    assert psutil.Process(antiword).parent().parent().pid == proc.pid  # run > worker > it
    proc.kill()
    proc.communicate()
    assert left_after(mark) == []


def large_scan(path: Path, tiles: int = 7) -> Path:
    """The fixture scan (a printed English page) tiled `tiles` x `tiles` in one image (8,925
    x 4,200 pixels, under the 100 M pixel limit): a page Tesseract reads for minutes on one
    core, after finding its script (Latin) in seconds."""
    from PIL import Image

    with Image.open(FIXTURES / "scan.png") as tile:
        width, height = tile.size
        page = Image.new(tile.mode, (width * tiles, height * tiles), "white")
        for column in range(tiles):
            for row in range(tiles):
                page.paste(tile, (column * width, row * height))
    page.save(path)
    return path


_READING_TESSERACT = """\
import os, sys
args = sys.argv[1:]
if args[:1] == ["stdin"] and "--psm" not in args:  # the reading, not the script detection
    page = os.path.join({folder!r}, "page-%d.png" % os.getpid())
    with open(page, "wb") as fh:
        fh.write(sys.stdin.buffer.read())
    args[0] = page
    try:
        fd = os.open({fifo!r}, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no one is waiting
        pass
    else:
        os.write(fd, b"%d\\n" % os.getpid())
        os.close(fd)
os.execv({real!r}, [{real!r}, *args])
"""


def reading_tesseract(folder: Path, starts: Starts) -> str:
    """A `tesseract` in `folder` that, when it is to read a page, takes the whole page from
    its standard input, says its pid on `starts` and `exec`s the real Tesseract on it (the
    same process: what the run started); the PATH that finds it first. A kill then finds
    Tesseract reading, not waiting for the rest of its input."""
    real = shutil.which("tesseract")
    script = folder / "tesseract"
    folder.mkdir(parents=True, exist_ok=True)
    script.write_text(
        f"#!{sys.executable} -I\n"
        + _READING_TESSERACT.format(folder=str(folder), fifo=str(starts.path), real=real)
    )
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.slow
@needs_tesseract
def test_kill_9_of_a_run_in_tesseract_on_a_large_scan_leaves_nothing(
    tmp_path: Path, static_model_cached: None
) -> None:
    """The run is killed once Tesseract reads the page (its script found, the whole page
    taken in): the worker dies with the run, and Tesseract with the worker (was: left
    reading the page for minutes, its parent 1)."""
    mark = uuid.uuid4().hex
    root = tmp_path / "scans"
    root.mkdir()
    large_scan(root / "page.png")
    with Starts(tmp_path / "started") as starts:
        path = reading_tesseract(tmp_path / "bin", starts)
        proc = start_run(root, tmp_path / "db", mark, path)
        try:
            tesseract = int(starts.next(timeout=RUN_S))
        except TimeoutError:
            proc.kill()
            pytest.fail(f"the run never read the page: {proc.communicate()[1]}")
    assert psutil.Process(tesseract).parent().parent().pid == proc.pid  # run > worker > it
    proc.kill()
    proc.communicate()
    assert left_after(mark) == []
