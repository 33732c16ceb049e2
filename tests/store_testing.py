"""Helpers shared by the store, run and service tests: another process holding a store's
run lock, an encoder that records what it is asked to encode, and a SQLite file's vectors
taken back to the float32 blobs of schema version 7 and older."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np


def hold_run_lock(location: str | Path, seconds: float) -> subprocess.Popen:
    """Another process that takes `location`'s run lock (a run begun) and holds it for
    `seconds`, then exits (dropping it); returns once the lock is held."""
    code = textwrap.dedent(f"""
        import time
        from attnswitch.index.location import open_store
        store = open_store({str(location)!r})
        store.begin_run()
        print("locked", flush=True)
        time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def hold_run_lock_until_stdin_closes(location: str | Path) -> subprocess.Popen:
    """Another process that takes `location`'s run lock (a run begun) and holds it until
    its stdin is closed (`proc.stdin.close()`), then exits; returns once the lock is held."""
    code = textwrap.dedent("""
        import sys
        from attnswitch.index.location import open_store
        store = open_store(sys.argv[1])
        store.begin_run()
        print("locked", flush=True)
        sys.stdin.readline()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code, str(location)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


class Recording:
    """The shared encoder, recording every text it is asked to encode."""

    def __init__(self, encoder):
        self.encoder, self.texts = encoder, []

    def __getattr__(self, name):
        return getattr(self.encoder, name)

    def encode(self, texts, *args, **kwargs):
        self.texts += list(texts)
        return self.encoder.encode(texts, *args, **kwargs)


def as_float32_blobs(conn: sqlite3.Connection) -> None:
    """Store a SQLite file's vectors as schema version 7 and older did: little-endian
    float32 blobs (the same values: each float16 element widened, exactly)."""
    conn.create_function("float32_of_float16", 1,
                         lambda blob: np.frombuffer(blob, "<f2").astype("<f4").tobytes())
    conn.execute("UPDATE chunks SET vector = float32_of_float16(vector)")
