"""Format detection through `ingest`, on real files: compressed text read through its
stream (with a size limit), text with unknown extensions known by content, and binary
files with unknown extensions skipped with a reason that names what they are."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from attnswitch.documents.ingest import DEFAULT_MAX_BYTES, Document, Skip, ingest

CORPUS = Path(__file__).resolve().parents[3] / "examples" / "corpus"
# Shipped compressed in its Debian package (README.md.gz), committed decompressed.
LOGRUS = CORPUS / "go" / "logrus" / "README.md"
DEBIAN_DOC = Path("/usr/share/doc")


def by_source(root: Path, **kw) -> dict[str, Document]:
    return {d.source: d for d in ingest(root, **kw)}


def test_gzip_text_is_read_through_its_stream(tmp_path: Path) -> None:
    original = LOGRUS.read_bytes()
    packed = gzip.compress(original, compresslevel=9, mtime=0)  # as dh_compress does
    (tmp_path / "README.md.gz").write_bytes(packed)
    (tmp_path / "changelog.Debian.gz").write_bytes(
        gzip.compress(b"pkg (1.0-1) unstable; urgency=medium\n\n  * Initial release.\n")
    )
    docs = by_source(tmp_path)
    readme = docs["README.md.gz"]
    assert readme.ok, readme.reason
    assert (readme.kind, readme.compression) == ("markdown", "gzip")
    from attnswitch.documents.readers.markdown import markdown_blocks

    assert readme.text == "\n\n".join(b.text for b in markdown_blocks(original.decode()))
    assert readme.size == len(packed)
    changelog = docs["changelog.Debian.gz"]
    assert changelog.ok and changelog.kind == "text" and "Initial release" in changelog.text


def test_a_compressed_pdf_is_read_as_a_pdf(tmp_path: Path) -> None:
    # Debian ships large PDFs so (docbook-xsl's reference.pdf.gz, see the corpus notice).
    pdf = CORPUS / "sqlite" / "copyright-release.pdf"
    (tmp_path / "release.pdf.gz").write_bytes(gzip.compress(pdf.read_bytes()))
    [doc] = ingest(tmp_path)
    assert doc.ok and (doc.kind, doc.compression) == ("pdf", "gzip")
    assert "public domain" in " ".join(doc.text.split()).lower()


@pytest.mark.parametrize(
    ("name", "pack", "codec"),
    [
        ("notes.txt.bz2", bz2.compress, "bzip2"),
        ("notes.txt.xz", lzma.compress, "xz"),
        ("notes-without-suffix", gzip.compress, "gzip"),  # known by its magic bytes
    ],
)
def test_other_compressions_and_magic_bytes(tmp_path: Path, name: str, pack, codec: str) -> None:
    text = LOGRUS.read_text()
    (tmp_path / name).write_bytes(pack(text.encode()))
    [doc] = ingest(tmp_path)
    assert doc.ok, doc.reason
    from attnswitch.documents.readers.text import paragraphs

    assert (doc.compression, doc.text) == (codec, "\n\n".join(paragraphs(text)))


@pytest.mark.parametrize("max_bytes", [2**20, None])
def test_a_decompression_bomb_is_skipped_by_the_limit(tmp_path: Path, max_bytes) -> None:
    limit = max_bytes or DEFAULT_MAX_BYTES
    with gzip.open(tmp_path / "bomb.txt.gz", "wb", compresslevel=9) as out:
        zeros = b"0" * 2**20
        for _ in range(limit // 2**20 * 4):  # 4 times the limit, about 0.1% of it on disk
            out.write(zeros)
    assert (tmp_path / "bomb.txt.gz").stat().st_size < limit / 100
    kw = {} if max_bytes is None else {"max_bytes": max_bytes}
    [doc] = ingest(tmp_path, **kw)
    assert doc.skip is Skip.TOO_LARGE and doc.compression == "gzip"
    assert doc.reason == (
        f"too large: gzip stream decompresses to more than the limit {limit / 2**20:.1f} MiB"
    )


def test_corrupt_and_empty_compressed_files(tmp_path: Path) -> None:
    packed = gzip.compress(LOGRUS.read_bytes())
    (tmp_path / "truncated.md.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "empty.txt.gz").write_bytes(gzip.compress(b""))
    docs = by_source(tmp_path)
    truncated = docs["truncated.md.gz"]
    assert truncated.skip is Skip.CORRUPT_COMPRESSED
    assert truncated.reason.startswith("corrupt compressed file: gzip: ")
    assert "\n" not in truncated.reason
    assert docs["empty.txt.gz"].skip is Skip.EMPTY


def test_text_with_unknown_extensions_is_known_by_content(tmp_path: Path) -> None:
    (tmp_path / "README.Debian").write_bytes(
        b"procps for Debian\n-----------------\n\nThe kill command is in its own package.\n"
    )
    (tmp_path / "NEWS.Debian").write_bytes("Änderungen: größer, schöner.\n".encode("latin-1") * 4)
    (tmp_path / "setup.py").write_text("from setuptools import setup\n\nsetup(name='x')\n")
    (tmp_path / "page.php").write_text(
        "<!DOCTYPE html><html><body><h1>Title</h1><p>Hello "
        "from a page with another extension.</p></body></html>"
    )
    docs = by_source(tmp_path)
    assert {s: (d.ok, d.kind) for s, d in docs.items()} == {
        "README.Debian": (True, "text"),
        "NEWS.Debian": (True, "text"),
        "setup.py": (True, "code"),
        "page.php": (True, "html"),
    }
    assert docs["NEWS.Debian"].encoding_detected and "größer" in docs["NEWS.Debian"].text
    assert docs["page.php"].text.startswith("Title\n\nHello")


def test_binary_files_with_unknown_extensions_say_what_they_are(tmp_path: Path) -> None:
    shutil.copy(os.path.realpath(shutil.which("ls")), tmp_path / "tool.dat")
    (tmp_path / "photo.gif").write_bytes(b"GIF8")  # too short for its signature
    (tmp_path / "noise.xyz").write_bytes(bytes(range(256)) * 16)
    with tarfile.open(tmp_path / "bundle.tar.gz", "w:gz") as tar:
        tar.add(LOGRUS, arcname="README.md")
    docs = by_source(tmp_path)
    assert all(d.skip is Skip.BINARY and d.text is None for d in docs.values()), docs
    reasons = {s: d.reason for s, d in docs.items()}
    assert reasons == {
        "bundle.tar.gz": "binary: a tar archive inside gzip (unknown extension .tar)",
        "noise.xyz": "binary: unknown extension .xyz, content is not text: NUL bytes in "
        "the first 8192 bytes",
        "photo.gif": "binary: .gif is image/gif, not a text format",
        "tool.dat": "binary: an ELF executable or library (unknown extension .dat)",
    }


def test_real_debian_documentation(tmp_path: Path) -> None:
    """Copies of this machine's /usr/share/doc files that were skipped before: READMEs
    with a Debian suffix and gzip-compressed changelogs."""
    readmes = sorted(DEBIAN_DOC.glob("*/README.Debian"))[:10]
    changelogs = sorted(DEBIAN_DOC.glob("*/changelog.Debian.gz"))[:20]
    if not readmes or not changelogs:
        pytest.skip(f"{DEBIAN_DOC}: no README.Debian or changelog.Debian.gz on this machine")
    for path in readmes + changelogs:
        dest = tmp_path / path.parent.name / path.name
        dest.parent.mkdir(exist_ok=True)
        shutil.copy(path, dest)
    docs = list(ingest(tmp_path))
    assert len(docs) == len(readmes) + len(changelogs)
    assert [d.reason for d in docs if not d.ok] == []
    assert all(d.compression == "gzip" for d in docs if d.source.endswith(".gz"))
    changelog = next(d for d in docs if d.source.endswith("changelog.Debian.gz"))
    assert "urgency=" in changelog.text


READER_FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("anyhow.docx", "docx"),
        ("anyhow.pptx", "pptx"),
        ("json-types.xlsx", "xlsx"),
        ("anyhow.odt", "odt"),
        ("anyhow.odp", "odp"),
        ("json-types.ods", "ods"),
        ("anyhow.epub", "epub"),
        ("scan.png", "image"),
        ("scan.jpg", "image"),
        ("scan.tif", "image"),
        ("mail.eml", "eml"),
        ("mail.mbox", "mbox"),
    ],
)
def test_documents_under_names_that_do_not_say_are_known_by_content(name: str, kind: str) -> None:
    from attnswitch.documents.readers.formats import detect

    data = (READER_FIXTURES / name).read_bytes()
    for lying in ("download", "attachment.bin", "Inbox"):
        found = detect(lying, data, DEFAULT_MAX_BYTES)
        assert (found.kind, found.sniffed) == (kind, True), lying
    assert detect(name, data, DEFAULT_MAX_BYTES).kind == kind  # and by the name


def test_a_plain_zip_and_text_that_mentions_mail_stay_what_they_are(tmp_path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(tmp_path / "bundle", "w") as archive:
        archive.writestr("word/notes.txt", "not a Word file")
    (tmp_path / "NOTES").write_text("From: the release notes\nSubject to change.\n")
    docs = by_source(tmp_path)
    assert docs["bundle"].reason == "binary: a ZIP archive (or an office document) (no extension)"
    assert (docs["NOTES"].kind, docs["NOTES"].ok) == ("text", True)


def test_every_reader_fixture_is_indexed_or_skipped_with_its_reason(tmp_path: Path) -> None:
    """The walk over a folder of every format: what each file is read as, and the one-line
    reason of each file that is skipped."""
    for path in READER_FIXTURES.iterdir():
        if path.suffix not in (".png", ".jpg", ".tif", ".pdf"):  # OCR: test_ocr.py
            shutil.copy(path, tmp_path / path.name)
    docs = by_source(tmp_path)
    skipped = {s: d.reason for s, d in docs.items() if not d.ok}
    assert skipped == {
        "anyhow-drm.epub": "encrypted: epub: DRM-encrypted (1 of its content documents, "
        "such as EPUB/text/ch001.xhtml)",
        "anyhow-encrypted.docx": "encrypted: docx: password-protected (an encrypted Office file)",
    }
    kinds = {s: d.kind for s, d in docs.items() if d.ok}
    assert kinds == {
        "anyhow.doc": "doc",
        "anyhow.ppt": "ppt",
        "json-types.xls": "xls",
        "anyhow.docx": "docx",
        "anyhow.epub": "epub",
        "anyhow.ipynb": "ipynb",
        "anyhow.odp": "odp",
        "anyhow.odt": "odt",
        "anyhow.pptx": "pptx",
        "anyhow.rtf": "rtf",
        "json-types.csv": "csv",
        "json-types.docx": "docx",
        "json-types.ods": "ods",
        "json-types.tsv": "csv",
        "json-types.xlsx": "xlsx",
        "mail.eml": "eml",
        "mail.mbox": "mbox",
    }
    assert all("JSON" in docs[s].text for s in kinds if s.startswith(("json", "mail")))
    assert all("anyhow::Error" in docs[s].text for s in kinds if s.startswith("anyhow"))
