"""Which reader takes a file of each kind: one registry from the kind that
`formats.detect` names to the reader function (`blocks.Reader`).

Each reader module owns one format family and registers nothing itself; this table is the
one place that lists them, so a new format is one reader module and one line here.
"""

from __future__ import annotations

import importlib

from attnswitch.pipeline.readers.blocks import Extracted, ReadOptions, Reader
from attnswitch.pipeline.readers.skip import Skip, Skipped


def readers() -> dict[str, Reader]:
    """kind -> reader. Each reader's module is imported when a file of its kind is read,
    so a format's library loads only then."""
    here = "attnswitch.pipeline.readers"
    return {
        "text": lazy(f"{here}.text", "read_text"),
        "markdown": lazy(f"{here}.markdown", "read_markdown"),
        "html": lazy(f"{here}.html", "read_html"),
        "pdf": lazy(f"{here}.pdf", "read_pdf"),
    }


def lazy(module: str, name: str) -> Reader:
    """The reader `name` of `module`, imported on its first call."""

    def read(data: bytes, options: ReadOptions) -> Extracted:
        return getattr(importlib.import_module(module), name)(data, options)

    read.__qualname__ = read.__name__ = name
    return read


def extract(kind: str, data: bytes, options: ReadOptions) -> Extracted:
    """The blocks of a file of `kind` (as `formats.detect` names it); `Skipped` when the
    reader finds no text or no reader takes the kind."""
    reader = readers().get(kind)
    if reader is None:
        raise Skipped(Skip.UNSUPPORTED, f"no reader for {kind}")
    return reader(data, options)
