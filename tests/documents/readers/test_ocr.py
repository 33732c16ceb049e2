"""OCR of images and scanned PDF pages: a real PDF page (the corpus' SQLite copyright
release) printed to images and to a scanned PDF (fixtures/, see
scripts/make_reader_fixtures.py), recognised by Tesseract and checked against the words
of the page's own text layer; and every way OCR can be unavailable, each said."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from reader_sources import FIXTURES, RELEASE_PDF, read, recall, words
from script_pages import need

from attnswitch.documents.ingest import ingest
from attnswitch.documents.readers.blocks import Location
from attnswitch.documents.readers.skip import Skip, Skipped

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="Tesseract is not installed (Debian: tesseract-ocr; `make system-packages`)",
)
# Tesseract 5 reads these clean 150-dpi prints without a miss here; the margin allows one
# misread word under another Tesseract model.
RECALL = 0.98


def page_text() -> str:
    from pypdf import PdfReader

    return " ".join(PdfReader(RELEASE_PDF).pages[0].extract_text().split())


def printed_words() -> set[str]:
    """The words of the page's title and first two paragraphs: what the images show."""
    text = page_text()
    return words(text[: text.index("individual copyright interest.")])


def docs(tmp_path: Path, names: dict[str, str], **options):
    for target, name in names.items():
        shutil.copy(FIXTURES / name, tmp_path / target)
    return {d.source: d for d in ingest(tmp_path, **options)}


@needs_tesseract
@pytest.mark.parametrize("name", ["scan.png", "scan.tif", "scan.jpg"])
def test_an_image_is_recognised(name: str) -> None:
    got = read(name)
    text = page_text()  # the JPEG shows less: the title and the first sentence
    expected = (
        printed_words() if name != "scan.jpg" else words(text[: text.index("database engine.")])
    )
    assert recall(expected, got.text) >= RECALL
    assert got.blocks[0].text == "Copyright Release for Contributions To SQLite"
    assert all(b.location == Location() for b in got.blocks)


@needs_tesseract
def test_each_frame_of_a_tiff_is_a_page() -> None:
    from PIL import Image

    from attnswitch.documents.readers.blocks import ReadOptions
    from attnswitch.documents.readers.ocr import read_image

    scan = Image.open(FIXTURES / "scan.tif")
    title = scan.crop((0, 0, scan.width, 125))
    buffer = io.BytesIO()
    title.save(buffer, format="TIFF", save_all=True, append_images=[title])
    got = read_image(buffer.getvalue(), ReadOptions())
    assert [(b.location.page, b.text) for b in got.blocks] == [
        (1, "Copyright Release for Contributions To SQLite"),
        (2, "Copyright Release for Contributions To SQLite"),
    ]


@needs_tesseract
def test_scanned_pdf_pages_are_recognised_and_text_pages_are_not(tmp_path: Path) -> None:
    found = docs(tmp_path, {"scan.pdf": "scan.pdf", "mixed.pdf": "mixed.pdf"})
    scan, mixed = found["scan.pdf"], found["mixed.pdf"]
    assert scan.ok and recall(printed_words(), scan.text) >= RECALL
    assert mixed.ok and mixed.pages_failed == 0
    # The text layer of page 1 in full, then page 2's recognised text.
    assert " ".join(mixed.text.split()).startswith(page_text())
    assert recall(printed_words(), mixed.text[len(page_text()) :]) >= RECALL


def test_with_ocr_off_scanned_pages_are_said_not_silently_empty(tmp_path: Path) -> None:
    found = docs(
        tmp_path,
        {"scan.pdf": "scan.pdf", "mixed.pdf": "mixed.pdf", "scan.png": "scan.png"},
        ocr=False,
    )
    assert found["scan.pdf"].skip is Skip.NEEDS_OCR
    assert found["scan.pdf"].reason == "needs OCR: page 1: no text layer, and OCR is off"
    assert found["scan.png"].reason == "needs OCR: PNG image: OCR is off"
    mixed = found["mixed.pdf"]
    assert mixed.ok and mixed.pages_failed == 1
    assert " ".join(mixed.text.split()) == page_text()


def test_without_tesseract_the_reason_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # a machine with no tesseract on its path
    root = tmp_path / "root"
    root.mkdir()
    found = docs(root, {"scan.pdf": "scan.pdf", "photo.jpg": "scan.jpg"})
    assert found["scan.pdf"].reason == (
        "needs OCR: page 1: no text layer, and Tesseract is not installed (Debian: tesseract-ocr)"
    )
    assert found["photo.jpg"].reason == (
        "needs OCR: JPEG image: Tesseract is not installed (Debian: tesseract-ocr)"
    )


@needs_tesseract
def test_a_language_without_data_is_named() -> None:
    with pytest.raises(Skipped) as caught:
        read("scan.png", ocr_languages="eng+qaa")
    assert caught.value.skip is Skip.NEEDS_OCR
    assert caught.value.detail == (
        "PNG image: Tesseract has no data for qaa (Debian: tesseract-ocr-qaa)"
    )


def test_an_image_past_the_pixel_limit_is_not_decoded() -> None:
    with pytest.raises(Skipped) as caught:
        read("scan.png", max_pixels=100_000)
    assert caught.value.skip is Skip.TOO_LARGE
    assert caught.value.detail == "PNG of 1275x600 pixels, more than the limit 100000"


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("photo.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40),
        ("photo.jpg", b"\xff\xd8\xff\xe0 not really"),
    ],
)
def test_a_broken_image_is_corrupt(tmp_path: Path, name: str, data: bytes) -> None:
    (tmp_path / name).write_bytes(data)
    [doc] = ingest(tmp_path)
    assert doc.skip is Skip.CORRUPT and doc.reason.startswith("corrupt file: image: ")


@needs_tesseract
def test_a_truncated_image_is_corrupt(tmp_path: Path) -> None:
    data = (FIXTURES / "scan.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    [doc] = ingest(tmp_path)
    assert doc.skip is Skip.CORRUPT, doc.reason


@needs_tesseract
@pytest.mark.parametrize("workers", [1, 2])
def test_scanned_pages_recognised_side_by_side_keep_their_page(workers: int) -> None:
    from PIL import Image

    from attnswitch.documents.readers.blocks import ReadOptions
    from attnswitch.documents.readers.ocr import ocr_pdf_pages

    scan = Image.open(FIXTURES / "scan.png")
    title = scan.crop((0, 0, scan.width, 125)).convert("L")
    blank = Image.new("L", title.size, 255)
    buffer = io.BytesIO()
    title.save(buffer, format="PDF", resolution=150, save_all=True, append_images=[blank, title])
    scanned = ocr_pdf_pages(buffer.getvalue(), [1, 2, 3], ReadOptions(ocr_workers=workers))
    found = scanned.blocks
    assert {n: [b.text for b in blocks] for n, blocks in found.items()} == {
        1: ["Copyright Release for Contributions To SQLite"],
        3: ["Copyright Release for Contributions To SQLite"],
    }
    assert all(b.location == Location(page=n) for n, blocks in found.items() for b in blocks)
    assert scanned.notes == ["page 2: no text layer, and OCR found no text"]
    assert not scanned.needs_ocr


def test_a_huge_later_frame_is_refused_before_any_frame_is_decoded() -> None:
    from attnswitch.documents.readers.blocks import ReadOptions
    from attnswitch.documents.readers.ocr import read_image
    from hostile_files import tiff_with_huge_frame

    with pytest.raises(Skipped) as caught:
        read_image(tiff_with_huge_frame(2_000, 1_000), ReadOptions(max_pixels=1_000_000))
    assert caught.value.skip is Skip.TOO_LARGE
    assert caught.value.detail == ("TIFF frame 2 of 2000x1000 pixels, more than the limit 1000000")


def test_a_pillow_bomb_is_too_large_with_the_limit_not_unreadable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from hostile_files import png_header

    (tmp_path / "bomb.png").write_bytes(png_header(20_000, 20_000))  # 400M pixels
    with caplog.at_level("WARNING"):
        [doc] = ingest(tmp_path)
    assert doc.skip is Skip.TOO_LARGE
    assert doc.reason.startswith(
        "too large: image: Image size (400000000 pixels) exceeds limit of "
    ), doc.reason
    assert "unexpected" not in caplog.text


@needs_tesseract
def test_frames_past_the_ocr_page_limit_are_listed_not_read(tmp_path: Path) -> None:
    from PIL import Image

    from hostile_files import many_frame_tiff

    scan = Image.open(FIXTURES / "scan.tif")
    title = scan.crop((0, 0, scan.width, 125))
    (tmp_path / "frames.tif").write_bytes(many_frame_tiff(title, 4))
    [doc] = ingest(tmp_path, ocr_max_pages=2)
    assert doc.ok and doc.pages_failed == 2
    assert [b.location.page for b in doc.blocks] == [1, 2]
    from attnswitch.documents.readers.blocks import ReadOptions
    from attnswitch.documents.readers.ocr import read_image

    got = read_image(many_frame_tiff(title, 4), ReadOptions(ocr_max_pages=2))
    assert got.failed == ("pages 3–4: not recognised: OCR stops after 2 pages a file",)


@needs_tesseract
def test_scanned_pdf_pages_past_the_ocr_page_limit_are_listed_not_read(tmp_path: Path) -> None:
    from PIL import Image

    from hostile_files import blank_pdf

    (tmp_path / "blank.pdf").write_bytes(blank_pdf(6))
    scan = Image.open(FIXTURES / "scan.png")
    title = scan.crop((0, 0, scan.width, 125)).convert("L")
    title.save(
        tmp_path / "titles.pdf",
        format="PDF",
        resolution=150,
        save_all=True,
        append_images=[title, title],
    )
    found = {d.source: d for d in ingest(tmp_path, ocr_max_pages=1)}
    assert found["blank.pdf"].reason == (
        "empty: no extractable text in 6 pages (page 1: no text layer, and OCR found no "
        "text; pages 2–6: not recognised: OCR stops after 1 page a file)"
    )
    titles = found["titles.pdf"]
    assert titles.ok and titles.pages_failed == 2
    assert {b.location.page for b in titles.blocks} == {1}


# ---- languages: the chosen packs, each page's script, a pack that is missing -----------
# Pages of Debian's translated documentation printed in Noto fonts (script_pages.py,
# ocr_pages/NOTICE.md); a test needing a pack or a font skips naming its Debian package.


def scanned_pdf(*packs: str) -> tuple[bytes, list[str]]:
    """A PDF of one printed page (image only, no text layer) per language of `packs`, and
    the text each page shows."""
    from PIL import Image
    from script_pages import printed_page

    pages = [printed_page(pack) for pack in packs]
    images = [Image.open(io.BytesIO(png)) for png, _ in pages]
    buffer = io.BytesIO()
    images[0].save(buffer, format="PDF", resolution=200, save_all=True, append_images=images[1:])
    return buffer.getvalue(), [text for _, text in pages]


@pytest.mark.parametrize("pack", ["chi_sim", "chi_tra", "deu", "hin", "jpn", "kor", "rus"])
def test_osd_reads_each_page_with_the_packs_of_its_script(pack: str) -> None:
    """English chosen: a page in another script is read with that script's packs, found by
    OSD (`script_pages.READ_WITH`); without OSD the same page read by English is noise.
    A German page is Latin, which English reads."""
    from script_pages import ACCURACY, READ_WITH, char_accuracy, printed_page

    from attnswitch.documents.readers.blocks import ReadOptions
    from attnswitch.documents.readers.ocr import read_image

    need("osd", *READ_WITH[pack].split("+"), fonts_of=(pack,))
    png, text = printed_page(pack)
    found = read_image(png, ReadOptions(ocr_languages="eng"))
    assert char_accuracy(text, found.text) >= ACCURACY[pack], found.text
    if READ_WITH[pack] != "eng":
        blind = read_image(png, ReadOptions(ocr_languages="eng", ocr_detect=False))
        assert char_accuracy(text, blind.text) < 0.5, blind.text


def test_the_default_languages_are_the_locale_s_and_english(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from attnswitch.documents.readers.blocks import ReadOptions
    from attnswitch.documents.readers.ocr import ocr_languages

    need("eng", "deu")
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    assert ocr_languages(ReadOptions()).chosen == ("deu", "eng")
    assert ocr_languages(ReadOptions(ocr_languages="fra")).chosen == ("fra",)
    monkeypatch.setenv("LANG", "C.UTF-8")
    assert ocr_languages(ReadOptions()).chosen == ("eng",)


def test_pages_of_several_scripts_in_one_pdf_each_take_their_packs(tmp_path: Path) -> None:
    from script_pages import ACCURACY, char_accuracy

    need("osd", "eng", "kor", "hin", fonts_of=("deu", "kor", "hin"))
    data, texts = scanned_pdf("deu", "kor", "hin")
    (tmp_path / "three.pdf").write_bytes(data)
    [doc] = ingest(tmp_path, ocr_languages="eng")
    assert doc.ok and doc.pages_failed == 0 and doc.failed == ()
    for page, (pack, text) in enumerate(zip(("deu", "kor", "hin"), texts), start=1):
        got = "\n".join(b.text for b in doc.blocks if b.location.page == page)
        assert char_accuracy(text, got) >= ACCURACY[pack], (page, got)


def test_a_page_whose_pack_is_missing_is_said_not_read_as_noise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine with English and OSD only (a Tesseract data folder holding just
    those), the Korean and Hindi pages of a PDF are listed with the package that reads
    them, and nothing of them is stored; an image of Korean alone is skipped saying so."""
    import re

    from script_pages import tessdata_with

    need("osd", "eng", fonts_of=("deu", "kor", "hin"))
    monkeypatch.setenv("TESSDATA_PREFIX", str(tessdata_with(tmp_path / "tessdata", ["eng", "osd"])))
    root = tmp_path / "root"
    root.mkdir()
    data, texts = scanned_pdf("deu", "kor", "hin")
    (root / "three.pdf").write_bytes(data)
    (root / "korean.pdf").write_bytes(scanned_pdf("kor")[0])
    from script_pages import printed_page

    (root / "korean.png").write_bytes(printed_page("kor")[0])
    found = {d.source: d for d in ingest(root)}
    three = found["three.pdf"]
    assert three.ok and three.pages_failed == 2
    assert three.failed == (
        "page 2: no text layer, and Tesseract has no data for the Korean script "
        "(Debian: tesseract-ocr-kor)",
        "page 3: no text layer, and Tesseract has no data for the Devanagari script "
        "(Debian: tesseract-ocr-hin)",
    )
    assert {b.location.page for b in three.blocks} == {1}
    assert not re.search("[\uac00-\ud7af\u0900-\u097f]", three.text)
    assert found["korean.pdf"].reason == (
        "needs OCR: page 1: no text layer, and Tesseract has no data for the Korean script "
        "(Debian: tesseract-ocr-kor)"
    )
    assert found["korean.png"].reason == (
        "needs OCR: PNG image: Tesseract has no data for the Korean script "
        "(Debian: tesseract-ocr-kor)"
    )


def test_a_chosen_language_that_is_missing_makes_every_page_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from script_pages import tessdata_with

    need("osd", "eng", fonts_of=("deu",))
    monkeypatch.setenv("TESSDATA_PREFIX", str(tessdata_with(tmp_path / "tessdata", ["eng", "osd"])))
    (root := tmp_path / "root").mkdir()
    (root / "german.pdf").write_bytes(scanned_pdf("deu", "deu")[0])
    [doc] = ingest(root, ocr_languages="deu+eng")
    assert doc.reason == (
        "needs OCR: pages 1–2: no text layer, and Tesseract has no data "
        "for deu (Debian: tesseract-ocr-deu)"
    )


def test_a_run_records_the_pages_whose_pack_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoder
) -> None:
    """The run's summary (and `attnswitch run`'s table) keeps each page's reason: a note on
    the PDF it indexed, and the skip of the image of which nothing was read."""
    from script_pages import printed_page, tessdata_with

    from attnswitch.indexing.store import SQLiteStore
    from attnswitch.jobs.run import RunOptions, run

    need("osd", "eng", fonts_of=("deu", "kor"))
    monkeypatch.setenv("TESSDATA_PREFIX", str(tessdata_with(tmp_path / "tessdata", ["eng", "osd"])))
    (root := tmp_path / "root").mkdir()
    (root / "two.pdf").write_bytes(scanned_pdf("deu", "kor")[0])
    (root / "korean.png").write_bytes(printed_page("kor")[0])
    options = RunOptions.of(max_tokens=32, overlap=4, chunks_per_call=8, ocr_languages="eng")
    with SQLiteStore(tmp_path / "db") as store:
        summary = run(root, store, options, get_encoder=lambda: encoder)
    assert summary.notes == [
        {
            "source": "two.pdf",
            "note": (
                "text of 1 page(s) or part(s) not read: page 2: no text layer, and Tesseract has no "
                "data for the Korean script (Debian: tesseract-ocr-kor)"
            ),
        }
    ]
    assert summary.skipped_files == [
        {
            "source": "korean.png",
            "reason": (
                "needs OCR: PNG image: Tesseract has no data for the Korean script "
                "(Debian: tesseract-ocr-kor)"
            ),
        }
    ]
