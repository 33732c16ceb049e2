"""OCR that falls back (issue 53): a page is read by the chosen packs first, and Tesseract's
script detection (OSD) is asked only where that reading is unsure, so an English screen
that OSD takes for Arabic or Hebrew is read, not skipped as needing a pack; a page the
chosen packs read costs one Tesseract run (OSD before every page doubled an image's
time); a page in another script is still read by its script's packs, or said to need
them, never kept as noise. The decision is also tested alone on real Tesseract readings.

The English screens are printed here with Pillow in DejaVu Sans Mono Bold (Debian:
fonts-dejavu-core), like an installer's text screen; the other pages are those of
script_pages.py."""

from __future__ import annotations

import io
import shutil
import textwrap
from pathlib import Path

import pytest
from script_pages import ACCURACY, char_accuracy, need, printed_page, tessdata_with

from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.ocr import SURE_CONFIDENCE, read_image, second_packs
from attnswitch.documents.readers.ocr_languages import NoPack, OcrLanguages
from attnswitch.documents.readers.tesseract import detect_script, read_page

MONO_BOLD = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf")
SCREEN = (
    "Partition disks",
    "This partitioner will guide you through the steps of partitioning a disk.",
    "Guided - use entire disk",
    "Guided - use entire disk and set up LVM",
    "Manual",
    "<Go Back>",
    "Configure the network",
    "Hostname:",
    "debian",
)
TIMEOUT_S = 120.0


def installer_screen() -> bytes:
    """An installer's text screen, 11 px DejaVu Sans Mono Bold on 640x480 shown at twice
    its size, as PNG bytes: Tesseract 5.3's OSD takes it for Hebrew (0.39 sure) where
    English reads every word (mean confidence 95)."""
    from PIL import Image, ImageDraw, ImageFont

    if not MONO_BOLD.is_file():
        pytest.skip(f"{MONO_BOLD.name} is not installed (Debian: fonts-dejavu-core)")
    font = ImageFont.truetype(str(MONO_BOLD), 11)
    image = Image.new("L", (640, 480), 255)
    draw, y = ImageDraw.Draw(image), 20
    for paragraph in SCREEN:
        for line in textwrap.wrap(paragraph, 60):
            draw.text((20, y), line, font=font, fill=0)
            y += 16
    png = io.BytesIO()
    image.resize((1280, 960)).save(png, format="PNG")
    return png.getvalue()


def languages(*installed: str) -> OcrLanguages:
    return OcrLanguages(("eng",), frozenset(installed), True)


def runs(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_an_english_screen_osd_takes_for_another_script_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> None:
    """With English and OSD only, the screen OSD names another script for was skipped
    ("needs OCR: PNG image: Tesseract has no data for the Hebrew script"); it is read."""
    need("osd", "eng")
    png = installer_screen()
    script = detect_script(png, TIMEOUT_S)
    if script in (None, "Latin"):
        pytest.skip(f"this Tesseract's OSD finds the screen's script ({script}): no error")
    monkeypatch.setenv("TESSDATA_PREFIX", str(tessdata_with(tmp_path / "tessdata", ["eng", "osd"])))
    got = read_image(png, ReadOptions(ocr_languages="eng"))
    assert "This partitioner will guide you through the steps of" in got.text
    assert "Configure the network" in got.text and got.failed == ()


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs Tesseract")
def test_a_page_the_chosen_packs_read_costs_one_tesseract_run(
    tesseract_calls: Path, cache_dir: Path
) -> None:
    need("osd", "eng")
    got = read_image(installer_screen(), ReadOptions(ocr_languages="eng"))
    assert "Guided - use entire disk and set up LVM" in got.text
    assert len(runs(tesseract_calls)) == 1 and "--psm" not in runs(tesseract_calls)[0]


def test_a_page_of_another_script_is_read_by_its_packs_after_an_unsure_reading(
    tesseract_calls: Path, cache_dir: Path
) -> None:
    """A Korean page under English: English reads it unsure, OSD finds Korean, the Korean
    pack reads it and is kept."""
    need("osd", "eng", "kor", fonts_of=("kor",))
    png, text = printed_page("kor")
    got = read_image(png, ReadOptions(ocr_languages="eng"))
    assert char_accuracy(text, got.text) >= ACCURACY["kor"], got.text
    done = runs(tesseract_calls)
    assert len(done) == 3 and "--psm 0" in done[1] and "-l kor+eng" in done[2]


def test_the_decision_on_real_readings() -> None:
    """`second_packs` given what Tesseract read and what OSD said: the English screen's
    English reading is kept whatever script OSD names (the held-out drive's Arabic and
    Bengali included) when no pack of it is installed; a Korean page's English reading
    (noise) is kept by no script: the Korean pack reads it where installed, else the
    page needs it."""
    need("osd", "eng", fonts_of=("kor",))
    screen = read_page(installer_screen(), "eng", TIMEOUT_S)
    assert screen.confidence >= SURE_CONFIDENCE  # so OSD is not even asked
    noise = read_page(printed_page("kor")[0], "eng", TIMEOUT_S)
    assert noise.confidence < 50 and noise.words > 20
    bare = languages("eng", "osd")
    for script in ("Arabic", "Bengali", "Hebrew", "Korean", "Latin", None):
        assert second_packs(screen, script, bare) is None
    with pytest.raises(NoPack, match="Korean script .Debian: tesseract-ocr-kor"):
        second_packs(noise, "Korean", bare)
    assert second_packs(noise, "Korean", languages("eng", "osd", "kor")) == "kor+eng"
    assert second_packs(noise, "Latin", bare) is None  # the chosen packs read Latin
    assert second_packs(noise, None, bare) is None  # OSD found nothing
