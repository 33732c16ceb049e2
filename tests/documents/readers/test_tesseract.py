"""Tesseract's program as the readers run it (`readers.tesseract`): the packs it finds, the
script its OSD finds on real pages (paragraphs of Debian's translated documentation printed
in a Noto font: script_pages.py, ocr_pages/NOTICE.md), the text it reads with a page's
pack, and how it fails. Tests needing a pack, a font or the program skip saying which
Debian package is missing (`make system-packages` installs them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_pages import (
    ACCURACY,
    DEBIAN_SOURCES,
    READ_WITH,
    char_accuracy,
    need,
    printed_page,
    tessdata_with,
)

from attnswitch.documents.readers.tesseract import (
    detect_script,
    installed_packs,
    recognise_png,
    tesseract_env,
)

TIMEOUT_S = 60


def test_the_packs_installed_are_the_files_of_its_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need("eng", "osd")
    monkeypatch.setenv("TESSDATA_PREFIX", str(tessdata_with(tmp_path / "two", ["eng", "osd"])))
    assert installed_packs() == {"eng", "osd"}
    monkeypatch.setenv("TESSDATA_PREFIX", str(tessdata_with(tmp_path / "none", [])))
    assert installed_packs() == frozenset()


def test_without_the_program_the_packs_cannot_be_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine with no tesseract on its path
    with pytest.raises(RuntimeError, match=r"^Tesseract does not run: FileNotFoundError: "):
        installed_packs()


def test_tesseract_runs_on_one_thread_in_this_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TESSDATA_PREFIX", "/some/tessdata")
    env = tesseract_env()
    assert env["OMP_THREAD_LIMIT"] == "1" and env["TESSDATA_PREFIX"] == "/some/tessdata"


@pytest.mark.parametrize("pack", sorted(READ_WITH))
def test_osd_finds_the_script_of_a_printed_page(pack: str) -> None:
    need("osd", fonts_of=(pack,))
    png, _ = printed_page(pack)
    assert detect_script(png, TIMEOUT_S) == DEBIAN_SOURCES[pack].script


def test_osd_finds_no_script_on_a_blank_page() -> None:
    import io

    from PIL import Image

    need("osd")
    png = io.BytesIO()
    Image.new("L", (1654, 2339), 255).save(png, format="PNG")
    assert detect_script(png.getvalue(), TIMEOUT_S) is None


def test_read_with_english_alone_a_korean_page_is_noise() -> None:
    """What the script's pack is for: English reads a Korean page as a few Latin letters
    and digits, nothing like its text."""
    need("eng", "kor", fonts_of=("kor",))
    png, text = printed_page("kor")
    assert char_accuracy(text, recognise_png(png, "eng", TIMEOUT_S)) < 0.2
    assert char_accuracy(text, recognise_png(png, "kor+eng", TIMEOUT_S)) >= ACCURACY["kor"]


def test_a_pack_tesseract_lacks_fails_with_its_message() -> None:
    """Alone: beside a pack it has ("eng+qaa"), Tesseract warns and reads with that one (the
    readers check the packs first: `ocr_languages.resolve`)."""
    need("eng", fonts_of=("deu",))
    png, _ = printed_page("deu", max_lines=2)
    with pytest.raises(RuntimeError) as caught:
        recognise_png(png, "qaa", TIMEOUT_S)
    message = str(caught.value)
    assert message.startswith("Tesseract failed (1): ") and "\n" not in message, message


def test_a_page_past_the_time_limit_fails_saying_so() -> None:
    need("eng", fonts_of=("deu",))
    png, _ = printed_page("deu")
    with pytest.raises(RuntimeError) as caught:
        recognise_png(png, "eng", 0.01)
    assert str(caught.value) == "Tesseract took more than 0.01 s"
