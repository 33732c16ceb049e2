"""Which reader takes a file of each kind: one registry from the kind that
`formats.detect` names to the reader function (`blocks.Reader`).

Each reader module owns one format family and registers nothing itself; this table is the
one place that lists them, so a new format is one reader module and one line here.
"""

from __future__ import annotations

from attnswitch.pipeline.readers.blocks import Extracted, ReadOptions, Reader
from attnswitch.pipeline.readers.skip import Skip, Skipped


def readers() -> dict[str, Reader]:
    """kind -> reader. Imported on call, so a format's library loads only when a file of
    that kind is read."""
    return {}


def extract(kind: str, data: bytes, options: ReadOptions) -> Extracted:
    """The blocks of a file of `kind` (as `formats.detect` names it); `Skipped` when the
    reader finds no text or no reader takes the kind."""
    reader = readers().get(kind)
    if reader is None:
        raise Skipped(Skip.UNSUPPORTED, f"no reader for {kind}")
    return reader(data, options)
