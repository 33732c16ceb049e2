"""EPUB e-books as blocks, read with ebooklib: the documents of the spine in reading
order, each chapter's XHTML cut into blocks by the HTML reader (`markup.html_to_blocks`:
headings with their levels, paragraphs, list items, tables).

The file is checked as a container first (`containers.open_zip`). An e-book whose
`META-INF/encryption.xml` lists encrypted content documents (DRM: Adobe ADEPT, Apple
FairPlay, Readium LCP) is skipped as encrypted; the font obfuscation of the EPUB
standard (only fonts listed) does not hide text and is read.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ElementTree

from attnswitch.documents.readers.blocks import Block, Extracted, ReadOptions
from attnswitch.documents.readers.containers import library_errors, open_zip
from attnswitch.documents.readers.markup import html_to_blocks
from attnswitch.documents.readers.skip import Skip, Skipped

_ENCRYPTION = "META-INF/encryption.xml"
_CIPHER_REFERENCE = "{http://www.w3.org/2001/04/xmlenc#}CipherReference"
_FONT_SUFFIXES = (".otf", ".ttf", ".woff", ".woff2")


def read_epub(data: bytes, options: ReadOptions) -> Extracted:
    """An e-book's blocks (see the module)."""
    with open_zip(data, options, "epub") as archive:
        if _ENCRYPTION in archive.namelist():
            _refuse_drm(archive.read(_ENCRYPTION))
    with library_errors("epub"):
        import ebooklib
        from ebooklib import epub

        book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": True})
        blocks: list[Block] = []
        for idref, _linear in book.spine:
            item = book.get_item_with_id(idref)
            if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
                continue
            blocks += html_to_blocks(item.get_content().decode("utf-8", "replace"))
    if not blocks:
        raise Skipped(Skip.EMPTY, "epub: no text in its spine")
    return Extracted(tuple(blocks))


def _refuse_drm(encryption: bytes) -> None:
    """Skip (encrypted) when `encryption.xml` lists any member other than a font."""
    try:
        root = ElementTree.fromstring(encryption)
    except ElementTree.ParseError as exc:
        raise Skipped(Skip.CORRUPT, f"epub: unreadable {_ENCRYPTION}: {exc}") from None
    hidden = [ref.get("URI", "") for ref in root.iter(_CIPHER_REFERENCE)]
    content = [uri for uri in hidden if not uri.lower().endswith(_FONT_SUFFIXES)]
    if content:
        raise Skipped(
            Skip.ENCRYPTED,
            f"epub: DRM-encrypted ({len(content)} of its content documents, such as {content[0]})",
        )
