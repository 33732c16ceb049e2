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
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


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


__all__ = ["trim_heap"]
