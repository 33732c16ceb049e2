"""Reading a file of a known kind: the reader `registry.readers()` names for it, and
mail attachments read like files of their own.

Whatever the reader, a heading that repeats the heading right before it is given once
(`distinct_headings`): a page converted to Word or OpenDocument (pandoc, LibreOffice)
holds its `<title>` as a "Title" paragraph and its `<h1>` of the same words as "Heading
1" (and often an `<h2>` of them again), which read "9.2. Remote Login › 9.2. Remote
Login" in every heading path under them.
"""

from __future__ import annotations

import dataclasses

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.documents.readers.registry import readers
from attnswitch.documents.readers.skip import Skip, Skipped


def extract(kind: str, data: bytes, options: ReadOptions) -> Extracted:
    """The blocks of a file of `kind` (as `formats.detect` names it); `Skipped` when the
    reader finds no text or no reader takes the kind."""
    spec = readers().get(kind)
    if spec is None:
        raise Skipped(Skip.UNSUPPORTED, f"no reader for {kind}")
    extracted = spec.read(data, options)
    blocks = distinct_headings(extracted.blocks)
    if len(blocks) == len(extracted.blocks):
        return extracted
    return dataclasses.replace(extracted, blocks=blocks)


def distinct_headings(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
    """`blocks` less each heading whose words (case and spacing aside) are those of the
    heading right before it; the first of the two is kept, at its level."""
    out: list[Block] = []
    for block in blocks:
        if (
            block.kind is BlockKind.HEADING
            and out
            and out[-1].kind is BlockKind.HEADING
            and _words(out[-1].text) == _words(block.text)
        ):
            continue
        out.append(block)
    return tuple(out)


def _words(text: str) -> str:
    return " ".join(text.casefold().split())


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
