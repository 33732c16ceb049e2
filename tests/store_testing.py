"""Helpers shared by the store, run and service tests: the statements a store sends to its
database, another process holding a store's run lock, an encoder that records what it is
asked to encode, a SQLite file's vectors taken back to the float32 blobs of schema
version 7 and older, and where the graph of a SQLite store's first full vectors lies."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np

# The graph a SQLite store's first `sync_index` makes of its full vectors (a completed run's,
# or a writer's block's): the first segment's (`sqlite_segments`), beside the file.
FIRST_SEGMENT = ".full/0_1.hnsw"


@contextlib.contextmanager
def statements(store) -> Iterator[list[str]]:
    """The statements `store` sends to its database inside the block, as the driver sends
    them: SQLite's trace callback; libpq's trace of the PostgreSQL protocol (each statement
    is one Bind, or one simple Query)."""
    sent: list[str] = []
    conn = store._conn
    if hasattr(conn, "set_trace_callback"):
        # Not the statements SQLite runs inside one (an FTS5 table's reads of its own
        # tables: "-- " and the statement): those are the engine's, not the store's.
        conn.set_trace_callback(lambda sql: None if sql.startswith("-- ") else sent.append(sql))
        try:
            yield sent
        finally:
            conn.set_trace_callback(None)
        return
    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        try:
            yield sent
        finally:
            conn.pgconn.untrace()
            trace.seek(0)
            sent.extend(line for line in trace if re.search(r"\tF\t\d+\t(Bind|Query)\t", line))


def hold_run_lock(location: str | Path, seconds: float) -> subprocess.Popen:
    """Another process that takes `location`'s run lock (a run begun) and holds it for
    `seconds`, then exits (dropping it); returns once the lock is held."""
    code = textwrap.dedent(f"""
        import time
        from attnswitch.indexing.location import open_store
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
        from attnswitch.indexing.location import open_store
        store = open_store(sys.argv[1])
        store.begin_run()
        print("locked", flush=True)
        sys.stdin.readline()
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(location)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
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
    conn.create_function(
        "float32_of_float16", 1, lambda blob: np.frombuffer(blob, "<f2").astype("<f4").tobytes()
    )
    conn.execute("UPDATE chunks SET vector = float32_of_float16(vector)")
