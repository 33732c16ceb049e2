"""RTF documents as blocks, read with striprtf: the text without its control words, one
paragraph block per line (RTF's `\\par`). RTF keeps no heading structure striprtf could
give, so every block is a paragraph."""

from __future__ import annotations

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, ReadOptions
from attnswitch.documents.readers.containers import library_errors
from attnswitch.documents.readers.skip import Skip, Skipped

_MAGIC = b"{\\rtf"


def read_rtf(data: bytes, options: ReadOptions) -> Extracted:
    """An RTF file's paragraphs. RTF is 7-bit text with escapes for other characters;
    bytes outside ASCII are read as cp1252, RTF's default code page."""
    if not data.lstrip().startswith(_MAGIC):
        raise Skipped(Skip.CORRUPT, "rtf: does not start with {\\rtf")
    with library_errors("rtf"):
        from striprtf.striprtf import rtf_to_text

        text = rtf_to_text(data.decode("cp1252", "replace"), errors="replace")
    blocks = [
        Block(BlockKind.PARAGRAPH, " ".join(line.split()))
        for line in text.splitlines()
        if line.strip()
    ]
    if not blocks:
        raise Skipped(Skip.EMPTY, "rtf: no text")
    return Extracted(tuple(blocks), encoding="cp1252")
