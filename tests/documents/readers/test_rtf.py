"""An RTF file written by pandoc (fixtures/anyhow.rtf), read back: every word of the
Markdown source, one paragraph per line."""

from __future__ import annotations

import pytest
from reader_sources import anyhow_words, read, recall

from attnswitch.documents.readers.blocks import BlockKind, ReadOptions
from attnswitch.documents.readers.rtf import read_rtf
from attnswitch.documents.readers.skip import Skip, Skipped


def test_rtf_gives_every_word_as_paragraphs() -> None:
    got = read("anyhow.rtf")
    assert recall(anyhow_words(), got.text) == 1.0
    assert {b.kind for b in got.blocks} == {BlockKind.PARAGRAPH}
    assert got.blocks[1].text == "Anyhow ¯\\_(°ペ)_/¯"


@pytest.mark.parametrize(
    ("data", "skip"),
    [
        (b"plain words, not RTF", Skip.CORRUPT),
        (b"{\\rtf1\\ansi {\\fonttbl\\f0 Times;}\\par }", Skip.EMPTY),
    ],
)
def test_not_rtf_or_no_text(data: bytes, skip: Skip) -> None:
    with pytest.raises(Skipped) as caught:
        read_rtf(data, ReadOptions())
    assert caught.value.skip is skip and caught.value.detail.startswith("rtf: ")
