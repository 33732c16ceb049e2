"""`heap.trim_heap` gives a fragmented heap's free pages back to the system: the resident
memory of a process whose freed blocks lie between blocks still held falls by most of
what was freed (glibc; elsewhere it says it could not). `heap.limit_arenas` makes the
threads started after it share the main arena, unless the environment sets
`MALLOC_ARENA_MAX`."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from attnswitch.jobs.heap import trim_heap
from heap_arenas import glibc_only, in_fresh_interpreter

# In a fresh interpreter (this one's heap is the test session's): 64 MiB of 64 KiB blocks,
# each followed by a small block still held, so the heap cannot shrink from its top; then
# the large blocks are freed. Prints the resident KiB after freeing, and after the trim.
FRAGMENTED = """
import ctypes, sys
from attnswitch.jobs.heap import trim_heap
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD: the large blocks come from the heap
libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: free() does not trim by itself
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4
large, small = [], []
for _ in range(1024):
    p = libc.malloc(64 * 1024)
    ctypes.memset(p, 1, 64 * 1024)
    large.append(p)
    small.append(libc.malloc(64))
for p in large:
    libc.free(p)
before = resident()
assert trim_heap()
print(before, resident())
"""


@glibc_only
def test_a_trim_returns_the_freed_pages_of_a_fragmented_heap() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FRAGMENTED], capture_output=True, text=True, check=True
    ).stdout
    before, after = (int(v) for v in out.split())
    assert before - after > 48 * 1024, (before, after)  # KiB: most of the 64 MiB freed


def test_it_says_whether_it_could() -> None:
    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert trim_heap() is expected


# In a fresh interpreter: limit the arenas (or not), then count them after four threads
# allocated at once. Prints whether the limit was set, and the arenas.
THREADS = """
import sys
from attnswitch.jobs.heap import limit_arenas
from heap_arenas import arenas_after_threads
limited = limit_arenas() if sys.argv[1] == "limit" else None
print(limited, arenas_after_threads(4))
"""


@glibc_only
@pytest.mark.parametrize(
    "how,env,expected",
    [
        ("limit", None, "True 1"),  # the threads share the main arena
        ("none", None, "None 5"),  # glibc: an arena for each thread, the main one besides
        ("limit", "3", "False 3"),  # the user's MALLOC_ARENA_MAX holds
    ],
)
def test_limited_arenas_are_shared_by_the_threads(how: str, env: str | None, expected: str) -> None:
    out = in_fresh_interpreter(THREADS, how, arena_max=env)
    assert out.split() == expected.split()
