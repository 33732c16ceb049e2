"""Word, Excel and PowerPoint 97-2003 files (OLE2) written by LibreOffice from the other
fixtures (fixtures/, see scripts/make_reader_fixtures.py), read back with antiword,
xls2csv and the PowerPoint record walk, and checked against their sources; and each way
such a file gives no text, as a one-line reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from reader_sources import FIXTURES, anyhow_words, json_types_rows, read, recall

from attnswitch.documents.readers.blocks import BlockKind, Location, ReadOptions
from attnswitch.documents.readers.dispatch import read_named
from attnswitch.documents.readers.formats import detect
from attnswitch.documents.readers.skip import Skip, Skipped

LEGACY = (("anyhow.doc", "doc"), ("json-types.xls", "xls"), ("anyhow.ppt", "ppt"))
needs_catdoc = pytest.mark.skipif(
    shutil.which("xls2csv") is None, reason="catdoc is not installed (make system-packages)"
)
needs_antiword = pytest.mark.skipif(
    shutil.which("antiword") is None, reason="antiword is not installed (make system-packages)"
)


def skipped(name: str, data: bytes, **options) -> Skipped:
    with pytest.raises(Skipped) as caught:
        read_named(name, data, ReadOptions(**options))
    assert "\n" not in caught.value.detail and len(caught.value.detail) <= 200
    return caught.value


@pytest.mark.parametrize(("name", "kind"), LEGACY)
def test_legacy_files_are_known_by_name_and_by_content(name: str, kind: str) -> None:
    data = (FIXTURES / name).read_bytes()
    assert (detect(name, data, 2**30).kind, detect(name, data, 2**30).sniffed) == (kind, False)
    for lying in ("download", "report.docx", "sheet.xlsx", "notes.txt"):
        found = detect(lying, data, 2**30)
        assert (found.kind, found.sniffed) == (kind, True), lying


@needs_antiword
def test_doc_gives_every_word_of_its_source() -> None:
    got = read("anyhow.doc")
    assert got.blocks[0].text == "anyhow"
    assert all(b.kind is BlockKind.PARAGRAPH for b in got.blocks)
    assert recall(anyhow_words(), got.text) == 1.0
    assert "Anyhow\u2002¯\\_(°ペ)_/¯" in got.text  # UTF-8 out of antiword, not Latin-1


@needs_antiword
def test_a_doc_saved_under_a_new_name_is_read_as_doc() -> None:
    got = read_named("report.docx", (FIXTURES / "anyhow.doc").read_bytes(), ReadOptions())
    assert recall(anyhow_words(), got.text) == 1.0


@needs_catdoc
def test_xls_gives_the_sheet_rows_with_the_header_row() -> None:
    got = read("json-types.xls")
    [table] = got.blocks
    rows = json_types_rows()
    assert [list(r) for r in table.rows] == rows and table.header
    assert table.location == Location(sheet="1", rows=(2, len(rows)))


def test_ppt_gives_each_slide_its_location_and_titles_as_headings() -> None:
    got = read("anyhow.ppt")
    slides = [b.location.slide for b in got.blocks]
    assert slides == sorted(slides) and slides[0] == 1 and slides[-1] == 7
    titles = [(b.location.slide, b.text) for b in got.blocks if b.kind is BlockKind.HEADING]
    assert (1, "anyhow") in titles and (4, "Details") in titles
    assert "Click to edit" not in got.text  # the masters' placeholders are not slides
    assert recall(anyhow_words(), got.text) >= 0.97  # pandoc's slides drop a few words


@pytest.mark.parametrize(
    ("name", "program", "package"),
    [("anyhow.doc", "antiword", "antiword"), ("json-types.xls", "xls2csv", "catdoc")],
)
def test_a_missing_program_skips_naming_the_package(
    name: str, program: str, package: str, monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH where nothing is installed
    skip = skipped(name, (FIXTURES / name).read_bytes())
    assert skip.skip is Skip.NEEDS_TOOL
    assert skip.detail == f"{name[-3:]}: {program} is not installed (Debian: {package})"


@needs_antiword
def test_a_doc_that_takes_too_long_is_skipped_as_timed_out() -> None:
    skip = skipped("anyhow.doc", (FIXTURES / "anyhow.doc").read_bytes(), tool_timeout_s=1e-9)
    assert skip.skip is Skip.TIMED_OUT and skip.detail.startswith("doc: antiword took more")


@pytest.mark.parametrize(("name", "kind"), LEGACY)
def test_a_truncated_legacy_file_is_corrupt(name: str, kind: str) -> None:
    data = (FIXTURES / name).read_bytes()
    skip = skipped(name, data[: len(data) // 3])
    assert skip.skip is Skip.CORRUPT and skip.detail.startswith(f"{kind}: ")


def test_a_password_protected_ooxml_file_named_doc_is_encrypted() -> None:
    skip = skipped("report.doc", (FIXTURES / "anyhow-encrypted.docx").read_bytes())
    assert skip.skip is Skip.ENCRYPTED
    assert skip.detail == "doc: password-protected (an encrypted Office file)"


@pytest.mark.parametrize(
    ("fixture", "name", "kind"),
    [
        ("anyhow.rtf", "anyhow.doc", "rtf"),
        ("anyhow.docx", "anyhow.doc", "docx"),
        ("json-types.xlsx", "export.xls", "xlsx"),
    ],
)
def test_a_legacy_name_on_other_content_is_read_as_that_content(
    fixture: str, name: str, kind: str
) -> None:
    data = (FIXTURES / fixture).read_bytes()
    assert detect(name, data, 2**30).kind == kind
    assert read_named(name, data, ReadOptions()).blocks


def test_an_html_table_exported_as_xls_is_read_as_html() -> None:
    page = (
        "<html><head><title>Export</title></head><body><table><tr><th>serial</th>"
        "<th>owner</th></tr><tr><td>PF07919K</td><td>Amal Haddad</td></tr></table>"
        "</body></html>"
    )
    got = read_named("export.xls", page.encode(), ReadOptions())
    [table] = [b for b in got.blocks if b.kind is BlockKind.TABLE]
    assert table.rows == (("serial", "owner"), ("PF07919K", "Amal Haddad"))


def test_a_legacy_name_on_text_is_no_ole2_file() -> None:
    skip = skipped("notes.doc", b"just some text, not a Word file\n")
    assert skip.skip is Skip.CORRUPT
    assert skip.detail == "doc: not an OLE2 (old binary Office) file"
