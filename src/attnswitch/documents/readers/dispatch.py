"""Reading a file of a known kind: the reader `registry.readers()` names for it, and
mail attachments read like files of their own.
"""

from __future__ import annotations

import dataclasses

from attnswitch.documents.readers.blocks import Extracted, ReadOptions
from attnswitch.documents.readers.registry import readers
from attnswitch.documents.readers.skip import Skip, Skipped


def extract(kind: str, data: bytes, options: ReadOptions) -> Extracted:
    """The blocks of a file of `kind` (as `formats.detect` names it); `Skipped` when the
    reader finds no text or no reader takes the kind."""
    spec = readers().get(kind)
    if spec is None:
        raise Skipped(Skip.UNSUPPORTED, f"no reader for {kind}")
    return spec.read(data, options)


# Mail attached to mail attached to mail...: attachments are read this many levels deep.
ATTACHMENT_DEPTH = 3


def read_named(name: str, data: bytes, options: ReadOptions) -> Extracted:
    """A file known only by its name and bytes (a mail attachment): its format detected
    (`formats.detect`), then read by the reader of that kind."""
    from attnswitch.documents.readers.formats import detect

    found = detect(name, data, options.max_bytes)
    return extract(found.kind, found.data, dataclasses.replace(options, name=name))


def with_attachments(options: ReadOptions, depth: int = ATTACHMENT_DEPTH) -> ReadOptions:
    """`options` whose `read_attachment` reads an attachment like a file of its own
    (`read_named`), attachments of attachments up to `depth` levels down."""
    if depth <= 0:
        return dataclasses.replace(options, read_attachment=None)
    inner = with_attachments(options, depth - 1)
    return dataclasses.replace(
        options, read_attachment=lambda name, data: read_named(name, data, inner)
    )
