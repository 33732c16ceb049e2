"""Dying with the parent (Linux's `PR_SET_PDEATHSIG`): the reading workers
(`jobs.read_pool`) and the programs the readers start (`readers.helper_process`) are
killed by the kernel when the process that started them dies, a `kill -9` included.

- `die_with_parent(parent)`: for this process, from its own code (a worker's set-up).
- Run as a script, `python -I -S parent_death.py PARENT PROGRAM ARG...` does the same and
  then becomes PROGRAM (`exec`: the same process, so the same pid and process group),
  the signal kept across the `exec`. This is how a program is started with it: setting
  it between `fork` and `exec` (`Popen`'s `preexec_fn`) would make `subprocess` fork the
  whole caller, threads and all, where it otherwise uses `vfork`, and JAX warns of that
  (rightly: a forked child of a threaded process may deadlock before its `exec`).
  `setpriv --pdeathsig` (util-linux) sets it too, but cannot tell that the parent died
  before it did, and is not on every system. The script imports nothing but the
  standard library, so `-I -S` (no site packages, no environment) starts it quickly.

The kernel sends the signal when the *thread* that started the process exits, not the
whole process; a caller waits for what it starts in the thread that started it. The
signal is not inherited by the process's own children.
"""

from __future__ import annotations

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
SCRIPT = os.path.abspath(__file__)


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process (SIGKILL) when the thread that started it exits
    (Linux only), and exit now when `parent` is no longer its parent: it died before the
    request was made."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _main(argv: list[str]) -> None:
    """`PARENT PROGRAM ARG...`: die with PARENT, then become PROGRAM (a path)."""
    parent, program, *args = argv
    die_with_parent(int(parent))
    try:
        os.execv(program, [program, *args])
    except OSError as exc:  # as a shell says it: the program's name, the reason, 126/127
        os.write(2, f"{program}: {exc.strerror}\n".encode(errors="replace"))
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    _main(sys.argv[1:])
