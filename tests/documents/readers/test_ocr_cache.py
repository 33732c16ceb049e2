"""OCR results kept by content (`readers/ocr_cache.py`): a page read once is not given to
Tesseract again, in this run or the next; anything a page's text depends on is in its key;
the cache keeps the most recently used pages; a cache that cannot be written costs nothing
but the saving.

Tesseract's calls are counted by a wrapper put first on PATH that logs its arguments and
runs the real program (`tesseract_calls`, conftest.py)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from attnswitch.documents.readers import ocr_cache
from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.ocr import read_image
from attnswitch.documents.readers.ocr_languages import OcrLanguages

FIXTURES = Path(__file__).resolve().parent / "fixtures"
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="needs Tesseract (Debian: tesseract-ocr)"
)


def readings(log: Path) -> list[str]:
    return log.read_text().splitlines()


@needs_tesseract
def test_a_page_read_once_comes_from_the_cache_the_next_time(
    cache_dir: Path, tesseract_calls: Path
) -> None:
    data = (FIXTURES / "scan.png").read_bytes()
    first = read_image(data, ReadOptions())
    done = len(readings(tesseract_calls))
    assert done >= 1  # recognised (and its script found) by Tesseract
    again = read_image(data, ReadOptions())
    assert again.text == first.text and first.text.strip()
    assert len(readings(tesseract_calls)) == done  # not asked again
    assert (cache_dir / ocr_cache.FILE_NAME).is_file()


@needs_tesseract
def test_other_packs_read_the_page_again(cache_dir: Path, tesseract_calls: Path) -> None:
    data = (FIXTURES / "scan.png").read_bytes()
    read_image(data, ReadOptions(ocr_languages="eng"))
    done = len(readings(tesseract_calls))
    read_image(data, ReadOptions(ocr_languages="eng+deu"))
    assert any("eng+deu" in line or "deu+eng" in line for line in readings(tesseract_calls)[done:])


def test_every_field_a_page_s_text_depends_on_is_in_its_key() -> None:
    base = OcrLanguages(("eng",), frozenset({"eng", "osd"}), True, "tesseract 5.3.0")
    key = ocr_cache.page_key(b"png", base)
    others = [
        ocr_cache.page_key(b"png2", base),
        ocr_cache.page_key(b"png", OcrLanguages(("deu",), base.installed, True, base.build)),
        ocr_cache.page_key(
            b"png", OcrLanguages(base.chosen, frozenset({"eng", "osd", "kor"}), True, base.build)
        ),
        ocr_cache.page_key(b"png", OcrLanguages(base.chosen, base.installed, False, base.build)),
        ocr_cache.page_key(
            b"png", OcrLanguages(base.chosen, base.installed, True, "tesseract 5.4.0")
        ),
    ]
    assert key == ocr_cache.page_key(b"png", base)
    assert len({key, *others}) == 6


def test_the_least_recently_used_pages_go_first(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ocr_cache, "MAX_PAGES", 3)
    monkeypatch.setattr(ocr_cache, "_PRUNE_EVERY", 1)
    for name in ("a", "b", "c"):
        ocr_cache.keep_text(name, f"text {name}")
    assert ocr_cache.cached_text("a") == "text a"  # used: now the newest
    ocr_cache.keep_text("d", "text d")
    ocr_cache.keep_text("e", "text e")
    with sqlite3.connect(cache_dir / ocr_cache.FILE_NAME) as conn:
        kept = {row[0] for row in conn.execute("SELECT key FROM pages")}
    assert kept == {"a", "d", "e"}
    assert ocr_cache.cached_text("b") is None


@needs_tesseract
def test_a_cache_that_cannot_be_written_only_loses_the_saving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tesseract_calls: Path
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("ATTNSWITCH_CACHE_DIR", str(blocked))
    data = (FIXTURES / "scan.png").read_bytes()
    first = read_image(data, ReadOptions())
    done = len(readings(tesseract_calls))
    assert read_image(data, ReadOptions()).text == first.text and first.text.strip()
    assert len(readings(tesseract_calls)) == 2 * done  # read again: nothing was kept
