"""Counts the C heap's arenas (glibc's `malloc_info`) after threads have allocated: in a fresh
interpreter (`in_fresh_interpreter`, for tests/jobs/test_heap.py and tests/cli/test_entry.py)
and in a reading worker (read_pool_loaders.arenas_load)."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim, mallopt and malloc_info are glibc's",
)


def in_fresh_interpreter(script: str, *args: str, arena_max: str | None = None) -> str:
    """The output of `script` run with `args` in a fresh interpreter that can import this
    module, with `MALLOC_ARENA_MAX` set to `arena_max` (None: unset, glibc's default)."""
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if arena_max is not None:
        environ["MALLOC_ARENA_MAX"] = arena_max
    here = str(Path(__file__).resolve().parent)
    environ["PYTHONPATH"] = os.pathsep.join([here, environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=True,
        env=environ,
    ).stdout


def arenas_after_threads(threads: int = 4) -> int:
    """Start `threads` threads that each allocate 1 MiB from the C heap at once and hold it
    until all have, then count this process's arenas (the `<heap nr=...>` of glibc's
    `malloc_info`): one per arena a thread was given."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    all_in = threading.Barrier(threads)

    def allocate() -> None:
        block = libc.malloc(2**20)
        all_in.wait()
        libc.free(block)

    started = [threading.Thread(target=allocate) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "malloc_info.xml")
        stream = libc.fopen(path.encode(), b"w")
        libc.malloc_info(0, stream)
        libc.fclose(stream)
        with open(path) as xml:
            return xml.read().count("<heap nr=")
