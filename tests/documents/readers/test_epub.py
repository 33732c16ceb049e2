"""An EPUB written by pandoc (fixtures/anyhow.epub), read back and checked against its
Markdown source; DRM declared in META-INF/encryption.xml is refused, font obfuscation is
not."""

from __future__ import annotations

import io
import zipfile

from reader_sources import FIXTURES, anyhow_headings, anyhow_words, headings, read, recall

from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.epub import read_epub
from attnswitch.documents.readers.skip import Skip, Skipped


def test_epub_keeps_the_heading_structure_and_every_word() -> None:
    got = read("anyhow.epub")
    # The title page pandoc writes first, then the chapter.
    assert headings(got.blocks) == [(1, "anyhow")] + anyhow_headings()
    assert recall(anyhow_words(), got.text) == 1.0


def test_an_ebook_with_drm_is_skipped_as_encrypted() -> None:
    try:
        read("anyhow-drm.epub")
    except Skipped as skip:
        assert skip.skip is Skip.ENCRYPTED
        assert skip.detail == (
            "epub: DRM-encrypted (1 of its content documents, such as EPUB/text/ch001.xhtml)"
        )
    else:
        raise AssertionError("expected a skip")


def test_font_obfuscation_alone_is_read() -> None:
    fonts_only = """<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"
        xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>
        <enc:EncryptionMethod Algorithm="http://www.idpf.org/2008/embedding"/>
        <enc:CipherData><enc:CipherReference URI="EPUB/fonts/serif.otf"/></enc:CipherData>
        </enc:EncryptedData></encryption>"""
    buffer = io.BytesIO((FIXTURES / "anyhow.epub").read_bytes())
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("META-INF/encryption.xml", fonts_only)
    got = read_epub(buffer.getvalue(), ReadOptions())
    assert headings(got.blocks) == [(1, "anyhow")] + anyhow_headings()
