"""Every skip reason of the container formats, on every ZIP-based format, through the
reader the walk picks: encrypted (a password-protected Word file, an OLE2 file under
a new name), truncated, corrupt member data, and decompression bombs (by ratio and by
total size), each a one-line reason and never a traceback."""

from __future__ import annotations

import io
import zipfile

import pytest
from reader_sources import FIXTURES

from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.dispatch import read_named
from attnswitch.documents.readers.skip import Skip, Skipped

ZIP_FIXTURES = (
    "anyhow.docx",
    "anyhow.pptx",
    "json-types.xlsx",
    "anyhow.odt",
    "anyhow.odp",
    "json-types.ods",
    "anyhow.epub",
)


def skipped(name: str, data: bytes, **options) -> Skipped:
    with pytest.raises(Skipped) as caught:
        read_named(name, data, ReadOptions(**options))
    assert "\n" not in caught.value.detail and len(caught.value.detail) <= 200
    return caught.value


def with_member(name: str, member: str, content: bytes) -> bytes:
    """The fixture `name` with one more member, deflated."""
    buffer = io.BytesIO((FIXTURES / name).read_bytes())
    with zipfile.ZipFile(buffer, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, content)
    return buffer.getvalue()


def test_a_password_protected_word_file_is_skipped_as_encrypted() -> None:
    skip = skipped("anyhow-encrypted.docx", (FIXTURES / "anyhow-encrypted.docx").read_bytes())
    assert skip.skip is Skip.ENCRYPTED
    assert skip.detail == "docx: password-protected (an encrypted Office file)"


def test_an_ole2_file_that_is_no_office_file_under_an_office_name_is_named() -> None:
    # An old Word file under a new name is read as Word (test_legacy_office.py); one whose
    # Word stream is renamed is no Office file any more, and each reader says so.
    data = (
        (FIXTURES / "anyhow.doc")
        .read_bytes()
        .replace("WordDocument".encode("utf-16-le"), "WordDocumenX".encode("utf-16-le"))
    )
    skip = skipped("report.docx", data)
    assert skip.skip is Skip.BINARY
    assert skip.detail == "docx: an OLE2 compound file, not docx"
    skip = skipped("report.doc", data)
    assert skip.skip is Skip.CORRUPT
    assert skip.detail == "doc: an OLE2 file with no WordDocument stream"


@pytest.mark.parametrize("name", ZIP_FIXTURES)
def test_a_truncated_file_is_corrupt(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    skip = skipped(name, data[: len(data) * 2 // 3])
    assert skip.skip is Skip.CORRUPT and "not a readable ZIP container" in skip.detail


@pytest.mark.parametrize("name", ZIP_FIXTURES)
def test_corrupt_member_data_is_found_before_the_library_reads_it(name: str) -> None:
    data = bytearray((FIXTURES / name).read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = max(archive.infolist(), key=lambda i: i.compress_size)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start + 10, start + min(info.compress_size, 200)):
        data[i] ^= 0x5A
    skip = skipped(name, bytes(data))
    assert skip.skip is Skip.CORRUPT and info.filename in skip.detail


@pytest.mark.parametrize("name", ZIP_FIXTURES)
def test_a_member_that_expands_a_thousand_times_is_a_bomb(name: str) -> None:
    data = with_member(name, "customXml/item9.xml", b"\0" * (8 * 2**20))
    assert len(data) < 100_000
    skip = skipped(name, data)
    assert skip.skip is Skip.TOO_LARGE
    assert "member customXml/item9.xml expands" in skip.detail and "limit 200" in skip.detail


@pytest.mark.parametrize("name", ZIP_FIXTURES)
def test_members_past_the_size_limit_are_not_inflated_further(name: str) -> None:
    # Incompressible: no ratio to judge by, only the total.
    import os

    data = with_member(name, "media/noise.bin", os.urandom(3 * 2**20))
    skip = skipped(name, data, max_bytes=2 * 2**20)
    assert skip.skip is Skip.TOO_LARGE
    assert skip.detail.endswith("members expand to more than the limit 2.0 MiB")
    read_named(name, data, ReadOptions(max_bytes=8 * 2**20))  # under a higher limit: read


def test_too_many_members() -> None:
    skip = skipped("anyhow.docx", (FIXTURES / "anyhow.docx").read_bytes(), max_members=5)
    assert skip.skip is Skip.TOO_LARGE and "more than the limit 5" in skip.detail


@pytest.mark.parametrize("name", ZIP_FIXTURES)
def test_a_zip_that_is_not_the_format_is_corrupt(name: str) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", "a plain archive, not a document")
    skip = skipped(name, buffer.getvalue())
    assert skip.skip is Skip.CORRUPT and skip.detail.startswith(name.rsplit(".", 1)[1])


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_bytes", 0), ("max_members", 0), ("max_ratio", 0.0), ("ocr_timeout_s", -1.0)],
)
def test_limits_must_be_positive(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"{field}: expected"):
        ReadOptions(**{field: value})
