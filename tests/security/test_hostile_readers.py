"""Hostile files against the readers (issue 41, rows 2, 4, 5 and 7), through the real
walk and reader: a TIFF whose second frame is huge is refused before any frame is
decoded; an image past Pillow's own bomb limit is "too large" with the limit, never an
unexpected error; OCR stops at its page limit on a blank PDF of many pages and a TIFF of
many frames, the rest said; mail nested hundreds of levels deep keeps its outer message.
Each file is made small in the test (tests/hostile_files.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attnswitch.documents.ingest import Skip, ingest
from hostile_files import blank_pdf, many_frame_tiff, nested_mail, png_header, tiff_with_huge_frame

pytestmark = pytest.mark.xdist_group("security")
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="needs Tesseract (Debian: tesseract-ocr)"
)


def one(root: Path, name: str, data: bytes, **options):
    root.mkdir()
    (root / name).write_bytes(data)
    [doc] = ingest(root, **options)
    return doc


def test_a_tiff_whose_second_frame_has_150m_pixels_is_never_decoded(tmp_path: Path) -> None:
    """Row 2: 18 KB; its first frame 10x10, its second 12,000x12,500 (under Pillow's own
    bomb limit). Decoded, it took 2.5 GB and half a minute."""
    data = tiff_with_huge_frame()
    assert len(data) < 64 * 2**10
    doc = one(tmp_path / "docs", "scan.tif", data)
    assert doc.reason == (
        "too large: TIFF frame 2 of 12000x12500 pixels, more than the limit 100000000"
    )


def test_an_image_past_pillows_bomb_limit_is_too_large(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Row 7: a PNG declaring 40,000x40,000 pixels: "too large" with the limit hit, not
    "unreadable" and not logged as unexpected."""
    with caplog.at_level("WARNING"):
        doc = one(tmp_path / "docs", "photo.png", png_header(40_000, 40_000))
    assert doc.skip is Skip.TOO_LARGE
    assert "1600000000 pixels" in doc.reason and "exceeds limit of" in doc.reason
    assert "unexpected" not in caplog.text


@needs_tesseract
def test_ocr_stops_at_its_page_limit_on_a_blank_pdf_of_many_pages(tmp_path: Path) -> None:
    """Row 4: a blank PDF of 2,000 pages (the issue's had 20,000): only the first pages
    (here 3) are rendered and recognised; the reason says how many were not."""
    doc = one(tmp_path / "docs", "blank.pdf", blank_pdf(2_000), ocr_max_pages=3)
    assert doc.skip is Skip.EMPTY
    assert doc.reason.endswith("pages 4–2000: not recognised: OCR stops after 3 pages a file)"), (
        doc.reason
    )


@needs_tesseract
def test_ocr_stops_at_its_page_limit_on_a_tiff_of_many_frames(tmp_path: Path) -> None:
    """Row 4: a TIFF of 1,000 blank frames: 3 recognised, the rest said."""
    from PIL import Image

    data = many_frame_tiff(Image.new("L", (32, 32), 255), 1_000)
    doc = one(tmp_path / "docs", "frames.tif", data, ocr_max_pages=3)
    assert doc.reason == (
        "empty: TIFF image: no text recognised (pages 4–1000: not "
        "recognised: OCR stops after 3 pages a file)"
    )


def test_mail_nested_200_levels_deep_keeps_its_outer_message(tmp_path: Path) -> None:
    """Row 5: the standard library would run out of stack on it; the message's own
    subject and body are indexed, its attachments read 3 levels deep, the cut said."""
    doc = one(tmp_path / "docs", "deep.eml", nested_mail(200))
    assert doc.ok, doc.reason
    assert [b.text for b in doc.blocks[:1]] == ["level 0"]
    assert "body at level 0" in doc.text and "body at level 3" in doc.text
    assert "body at level 4" not in doc.text and doc.pages_failed >= 1
