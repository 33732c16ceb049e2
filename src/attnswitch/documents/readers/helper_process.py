"""Helper programs (antiword, catdoc, xls2csv, catppt, Tesseract) run so that none outlives
the call that started it, nor the process that made that call.

`run(args, input=..., timeout_s=...)` is `subprocess.run(args, capture_output=True)` with
these guarantees:

- **Its own process group.** The program starts in a session of its own
  (`start_new_session`), so its process group holds it and whatever it starts, and a
  terminal's Ctrl-C reaches the run, which ends it, not the program directly.
- **Ended as a whole.** Past `timeout_s`, and on any other way out of the call (an
  exception, Ctrl-C, `SystemExit`), the whole group gets SIGTERM, then SIGKILL once the
  program has exited or `GRACE_S` has passed (what it started is ended all the same).
  `subprocess.TimeoutExpired` is raised after the group is ended. A program that
  exits by itself is waited for as usual: the call returns once its output is closed by
  every process that held it.
- **Dies with its parent** (Linux): the program is started through
  `readers.parent_death`, which has the kernel kill it (SIGKILL) when the thread that
  started it exits, and then `exec`s it: a `kill -9` of the run (whose reading workers
  die with it the same way, `jobs.read_pool`) or a worker ended by its read deadline
  takes the program with it. `run` waits for the program in the thread that starts it,
  so that thread outlives it (OCR's page threads included, `readers.ocr`). The cost is
  one short interpreter start (`python -I -S`, the standard library only) per program.
  The signal is not inherited by the program's own children (none of the helpers above
  starts any): those are ended with its group on a timeout or an exception, but outlive
  a parent killed outright, which has no chance to end them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence

from attnswitch.documents.readers.parent_death import SCRIPT

# Seconds a timed-out program has to exit after SIGTERM before its group gets SIGKILL.
GRACE_S = 1.0


def run(
    args: Sequence[str],
    *,
    input: bytes | None = None,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run program `args` with `input` on its standard input (none: /dev/null), its output
    and error output captured; see the module. `subprocess.TimeoutExpired` past
    `timeout_s` (the program and its group ended); `OSError` when it cannot start."""
    with started(
        args, stdin=subprocess.DEVNULL if input is None else subprocess.PIPE, env=env
    ) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise subprocess.TimeoutExpired(list(args), timeout_s) from None
    return subprocess.CompletedProcess(list(args), proc.returncode, out, err)


@contextlib.contextmanager
def started(
    args: Sequence[str],
    *,
    stdin: int | None = subprocess.DEVNULL,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Program `args` started in a process group of its own that dies with this thread
    (Linux), its output and error output on pipes; on leaving the block, whatever of its
    group still runs is ended (`end`) and its pipes closed."""
    env = dict(os.environ if env is None else env)
    proc = subprocess.Popen(
        _dying_with_this_process(args, env),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    with proc:  # closes the pipes, after `end`
        try:
            yield proc
        finally:
            end(proc)


def end(proc: subprocess.Popen[bytes]) -> None:
    """End the process group of `proc` (started by `started`): SIGTERM, then SIGKILL after
    `GRACE_S`; nothing when `proc` already exited and was waited for."""
    if proc.returncode is not None:
        # Reaped: its group id may be free, even taken by a group that is not ours.
        return
    # Until `proc` is reaped its pid, and so its group id, cannot be another's.
    _signal_group(proc.pid, signal.SIGTERM)
    _exits_within(proc, GRACE_S)
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _dying_with_this_process(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The command that runs `args` as a program that dies with this thread (Linux; as
    they are elsewhere, or where this interpreter cannot be started again). The program
    is looked up on `env`'s PATH here: one not found is `FileNotFoundError`, as from
    `Popen`."""
    program = shutil.which(args[0], path=env.get("PATH", os.defpath))
    if program is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), args[0])
    if not (sys.platform.startswith("linux") and sys.executable and os.path.isfile(SCRIPT)):
        return [program, *args[1:]]
    return [sys.executable, "-I", "-S", SCRIPT, str(os.getpid()), program, *args[1:]]


def _exits_within(proc: subprocess.Popen[bytes], seconds: float) -> None:
    """Wait up to `seconds` for `proc` to exit, leaving it unreaped where the system can
    (Linux: a pidfd), so that its group id stays its own; elsewhere it is reaped."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (not Linux 5.3+)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(seconds)
        return
    try:
        select.select([fd], [], [], seconds)  # readable once the process has exited
    finally:
        os.close(fd)


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone; set-user-ID
        os.killpg(group, signum)
