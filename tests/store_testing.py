"""Helpers shared by the store, run and service tests: another process holding a store's
run lock, and an encoder that records what it is asked to encode."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


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


class Recording:
    """The shared encoder, recording every text it is asked to encode."""

    def __init__(self, encoder):
        self.encoder, self.texts = encoder, []

    def __getattr__(self, name):
        return getattr(self.encoder, name)

    def encode(self, texts, *args, **kwargs):
        self.texts += list(texts)
        return self.encoder.encode(texts, *args, **kwargs)
