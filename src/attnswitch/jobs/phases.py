"""Where a run's wall time went: seconds per part, each timed on the run's main thread.

The parts (`PARTS`) never nest: each is timed around work the main thread does itself, one
thing at a time, so their sum is at most the wall time, and `breakdown(wall)` adds the rest
as `other` (starting the job, the summary, whatever no part names). Parts:

- measure: choosing the engine and precision (measuring them on a first run here,
  checking an engine against torch float32 once);
- scan: listing the folder and comparing it with the index (hashing possible copies);
- read: waiting for the next file to be read and extracted (the readers work in other
  processes beside the encoder: only the wait is the run's);
- chunk: cutting documents into chunks (tokenising);
- load: loading the model (on Ray: connecting and starting the actors);
- encode: the encoder's calls;
- store: writing documents, vectors and skips to the index, and looking them up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PARTS = ("measure", "scan", "read", "chunk", "load", "encode", "store")


class Phases:
    """Seconds per part (`PARTS`), added by `part(name)` blocks or `add`."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Time the block as part `name`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        if name not in self.seconds:
            raise ValueError(f"name: expected one of {', '.join(PARTS)}, got {name!r}")
        self.seconds[name] += seconds

    def breakdown(self, wall: float, **known: float) -> dict[str, float]:
        """Seconds per part, the parts in `known` (timed elsewhere: load, encode, measure)
        replacing this object's, then `other`: the wall time less their sum, so that the
        values add up to `wall`. Parts that overlap would make that negative: `other` is
        then 0 and the sum exceeds the wall (a caller that times overlapping work must
        leave it out)."""
        parts = {**self.seconds, **known}
        out = {name: parts[name] for name in PARTS}
        out["other"] = max(0.0, wall - sum(out.values()))
        return out
