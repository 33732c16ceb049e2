"""Give the C heap's free memory back to the system between documents (glibc's
`malloc_trim`).

A run's process and each of its reading workers allocate a document's text, blocks,
chunks and rows, and free them once it is written. glibc keeps what is freed in its arenas
for reuse, and the small allocations made beside a large document pin the pages around
them, so after a drive's largest documents a process goes on holding about the most any of
them needed. `malloc_trim(0)` hands every arena's free pages back (madvise): tens of
microseconds a call here. A worker trims before each file it reads (`read_pool`), the run's
process after each document it takes (`run.RunJob`). On the 50 MB drive, side by side
with a checkout without the trims (docs/results/drive.md, "1 GB again"), the quick pass's
reading peak was 40 MiB lower (661 MiB RSS against 701), its time within noise. Where the C
library has no `malloc_trim` (musl, macOS) this does nothing.

The trim cannot reach all of it: glibc gives each thread an arena of its own when it first
allocates (up to eight per core), and `malloc_trim` returns the free pages inside a
thread's arena but never shrinks its top, which `free` shrinks only past a threshold glibc
raises as it sees large blocks. After the 1 GB drive's 3.4 MB
changelog, the run's process kept about 45 MiB in its threads' arenas for the rest of the
run. `limit_arenas` makes every thread share the main arena, which the trim shrinks: the
`attnswitch run` and `watch` processes and every reading worker call it when they start.
Measured on an AMD EPYC with AVX-512 BF16 (docs/results/drive.md, "1 GB with one heap
arena"): the run's process held 275 MiB after the changelog, against 320 with glibc's
arenas, and the 1 GB quick pass's reading peak fell from 815 MiB RSS to 740. The full
pass encoded as fast; the 50 MB quick pass took 98 s (median of three) against 89, within
that machine's noise (79 to 112 s) but not yet ruled out as a cost. The service keeps
glibc's arenas: its searches run on many threads at once. A `MALLOC_ARENA_MAX` set in the
environment is left as the user set it.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable

# mallopt's parameter for the most arenas (glibc's malloc.h: M_ARENA_MAX)
_M_ARENA_MAX = -8


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's `malloc_trim`, or None where it has none (looked up once a process:
    a symbol of the library the interpreter is linked with)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def trim_heap() -> bool:
    """Return the heap's free pages to the system; whether the C library could."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def limit_arenas() -> bool:
    """Make the threads this process starts from now on allocate from the main arena (glibc
    `mallopt(M_ARENA_MAX, 1)`; see the module), unless `MALLOC_ARENA_MAX` is set in the
    environment; whether the limit was set."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, 1) == 1)


__all__ = ["limit_arenas", "trim_heap"]
