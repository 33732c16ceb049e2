"""Ingest on real files made in tmp_path (every kind of bad input) and on the shipped corpus."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from pypdf import PdfWriter

from attnswitch.documents.ingest import Document, Skip, ingest, load, scan

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
PDF_SMALL = CORPUS / "sqlite" / "copyright-release.pdf"
FRENCH = (
    "Le cœur a ses raisons que la raison ne connaît point. Déjà vu, café crème, "
    "à bientôt, garçon, élève, où est la bibliothèque ? Très bien, merci.\n"
)
GERMAN = "Über die Brücke gehen Mädchen und Jungen; schön, größer, Fußball.\n"
RUSSIAN = (
    "Съешь же ещё этих мягких французских булок, да выпей чаю. Широкая "
    "электрификация южных губерний даст мощный толчок подъёму сельского хозяйства.\n"
)


def one(root: Path, **kw) -> Document:
    docs = list(ingest(root, **kw))
    assert len(docs) == 1, [d.source for d in docs]
    return docs[0]


def blank_pdf(*, password: str | None = None) -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(200, 200)
    if password is not None:
        writer.encrypt(password, algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


# -- the walk -----------------------------------------------------------------------------


def test_scan_is_recursive_sorted_and_skips_hidden(tmp_path: Path) -> None:
    for rel in [
        "b/z.txt",
        "a.md",
        "b/a/y.html",
        "c.txt",
        ".hidden/x.txt",
        "b/.secret.txt",
        "B.txt",
    ]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("text")
    entries = scan(tmp_path)
    found = [e.source for e in entries if e.error is None]
    assert found == ["B.txt", "a.md", "b/a/y.html", "b/z.txt", "c.txt"]
    assert found == [e.source for e in scan(tmp_path) if e.error is None]
    # the hidden folder is listed once, as skipped with the reason; the hidden file is not
    (folder,) = [e for e in entries if e.error is not None]
    assert (folder.source, folder.skip) == (".hidden", Skip.HIDDEN_FOLDER)
    assert 'starts with "."' in folder.error
    with_hidden = [e.source for e in scan(tmp_path, include_hidden=True)]
    assert set(with_hidden) - set(found) == {".hidden/x.txt", "b/.secret.txt"}
    for e in scan(tmp_path):
        assert e.path == (tmp_path / e.source).resolve() and e.root == str(tmp_path.resolve())


def test_scan_does_not_follow_folder_links(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.txt").write_text("x")
    (tmp_path / "d" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "link.txt").symlink_to(tmp_path / "d" / "x.txt")
    assert [e.source for e in scan(tmp_path)] == ["d/x.txt", "link.txt"]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the root, holding a secret a link may point at."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "passwd").write_text("root:x:0:0:secret line:/root:/bin/bash\n")
    return folder


def test_links_out_of_the_root_are_skipped_with_the_reason(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "x.txt").write_text("inside text")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "id_rsa").write_text("PRIVATE KEY")
    (root / "passwd").symlink_to(outside / "passwd")  # a file link out of the root
    (root / "etc").symlink_to(outside, target_is_directory=True)  # a folder link out
    (root / "up.txt").symlink_to(Path("..") / "outside" / "passwd")  # relative, out
    (root / "key").symlink_to(root / ".hidden" / "id_rsa")  # to a hidden path inside
    (root / "inside.txt").symlink_to(root / "d" / "x.txt")  # inside: read
    docs = {d.source: d for d in ingest(root)}
    assert sorted(docs) == [".hidden", "d/x.txt", "etc", "inside.txt", "key", "passwd", "up.txt"]
    assert docs[".hidden"].skip is Skip.HIDDEN_FOLDER and docs[".hidden"].sha256 is None
    for source in ("etc", "passwd", "up.txt"):
        assert docs[source].skip is Skip.LINK and docs[source].text is None
        assert docs[source].reason == "link not followed: its target is outside the root"
        assert docs[source].sha256 is None  # never read
    assert docs["key"].skip is Skip.LINK and "hidden" in docs["key"].reason
    assert docs["inside.txt"].text == "inside text"
    assert [d.source for d in ingest(root, include_hidden=True) if d.ok] == [
        ".hidden/id_rsa",
        "d/x.txt",
        "inside.txt",
        "key",
    ]


def test_a_link_swapped_in_after_the_scan_is_not_read(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("harmless at scan time")
    (entry,) = scan(root)
    (root / "notes.txt").unlink()
    (root / "notes.txt").symlink_to(outside / "passwd")
    doc = load(entry)
    assert doc.skip is Skip.LINK and doc.text is None and doc.sha256 is None


def test_root_must_be_a_folder(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(NotADirectoryError, match="root: expected a folder"):
        scan(tmp_path / "f.txt")


# -- good files ---------------------------------------------------------------------------


def test_utf8_text_keeps_metadata_and_hash(tmp_path: Path) -> None:
    data = "Grüße aus Köln\r\nzweite Zeile\n".encode()
    (tmp_path / "notes.txt").write_bytes(data)
    doc = one(tmp_path)
    st = os.stat(tmp_path / "notes.txt")
    assert doc.ok and doc.reason is None and doc.kind == "text"
    assert doc.text == "Grüße aus Köln\nzweite Zeile"  # paragraphs, stripped
    assert (doc.encoding, doc.encoding_detected) == ("utf-8", False)
    assert doc.sha256 == hashlib.sha256(data).hexdigest()
    assert (doc.size, doc.mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_markdown_and_extensionless_text(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("plain readme\n")
    (tmp_path / "guide.md").write_text("# Title\n\nSome *markdown*.\n")
    docs = {d.source: d for d in ingest(tmp_path)}
    assert docs["README"].kind == "text" and docs["README"].text == "plain readme"
    assert (
        docs["guide.md"].kind == "markdown" and docs["guide.md"].text == "Title\n\nSome markdown."
    )


@pytest.mark.parametrize(
    ("text", "codec"),
    [
        (FRENCH.replace("œ", "oe") * 3, "latin-1"),
        (FRENCH * 3, "cp1252"),
        (GERMAN * 4, "latin-1"),
        (RUSSIAN * 2, "cp1251"),
        (RUSSIAN * 2, "koi8_r"),
    ],
)
def test_legacy_encodings_are_detected(tmp_path: Path, text: str, codec: str) -> None:
    (tmp_path / "legacy.txt").write_bytes(text.encode(codec))
    doc = one(tmp_path)
    assert doc.ok, doc.reason
    assert doc.text == text.strip()
    assert doc.encoding_detected and doc.encoding != "utf-8"


@pytest.mark.parametrize("codec", ["utf-16", "utf-8-sig", "utf-32"])
def test_byte_order_marks_are_honoured(tmp_path: Path, codec: str) -> None:
    (tmp_path / "bom.txt").write_bytes((GERMAN * 2).encode(codec))
    doc = one(tmp_path)
    assert doc.ok and doc.text == (GERMAN * 2).strip() and not doc.encoding_detected


def test_html_text_is_paragraphs_without_scripts(tmp_path: Path) -> None:
    (tmp_path / "page.html").write_text(
        "<!doctype html><html><head><title>The Title</title><style>p {color: red}</style>"
        "<script>var secret = 1;</script></head><body>\n<h1>Heading</h1>\n"
        "<p>First   paragraph\nwith a <a href='#'>link</a> &amp; an entity.</p>"
        "<ul><li>one</li><li>two</li></ul>"
        "<pre>line 1\n    line 2</pre><p>a<br>b</p><!-- a comment -->"
        "<table><tr><td>x</td><td>y</td></tr></table></body></html>",
        encoding="utf-8",
    )
    doc = one(tmp_path)
    assert doc.ok and doc.kind == "html"
    paragraphs = doc.text.split("\n\n")
    assert paragraphs == [
        "The Title",
        "Heading",
        "First paragraph with a link & an entity.",
        "one",
        "two",
        "line 1\nline 2",
        "a\nb",
        "x\ty",
    ]
    for hidden in ("secret", "color", "comment"):
        assert hidden not in doc.text


def test_html_declared_charset_is_used(tmp_path: Path) -> None:
    page = '<html><head><meta charset="iso-8859-1"></head><body><p>' + GERMAN + "</p></body></html>"
    (tmp_path / "old.htm").write_bytes(page.encode("latin-1"))
    doc = one(tmp_path)
    assert doc.ok and doc.text == GERMAN.strip()
    assert doc.encoding == "iso-8859-1" and not doc.encoding_detected


def test_real_pdf_text(tmp_path: Path) -> None:
    (tmp_path / "release.pdf").write_bytes(PDF_SMALL.read_bytes())
    doc = one(tmp_path)
    assert doc.ok and doc.kind == "pdf" and doc.encoding is None and doc.pages_failed == 0
    assert "public domain" in " ".join(doc.text.split()).lower()


def test_pdf_content_wins_over_extension(tmp_path: Path) -> None:
    (tmp_path / "actually-a-pdf.txt").write_bytes(PDF_SMALL.read_bytes())
    (tmp_path / "about-pdf.md").write_text("# PDF\n\nA PDF file starts with %PDF-1.7.\n")
    docs = {d.source: d for d in ingest(tmp_path)}
    assert docs["actually-a-pdf.txt"].ok and docs["actually-a-pdf.txt"].kind == "pdf"
    assert docs["about-pdf.md"].ok and docs["about-pdf.md"].kind == "markdown"


# -- bad files: each skipped with its reason, none raises ---------------------------------


def test_binary_file(tmp_path: Path) -> None:
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(512))
    doc = one(tmp_path)
    assert doc.skip is Skip.BINARY and doc.reason.startswith("binary: ")
    assert doc.text is None and doc.sha256 is not None


def test_empty_and_blank_files(tmp_path: Path) -> None:
    (tmp_path / "empty.md").write_bytes(b"")
    (tmp_path / "blank.txt").write_text(" \n\t\n")
    (tmp_path / "blank.html").write_text("<html><body><script>x()</script></body></html>")
    docs = list(ingest(tmp_path))
    assert [d.skip for d in docs] == [Skip.EMPTY] * 3
    assert {d.source: d.detail for d in docs}["empty.md"] == "0 bytes"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: b"this is not a pdf at all", id="no-header"),
        pytest.param(lambda: b"%PDF-1.4\n" + os.urandom(4000), id="header-then-noise"),
        pytest.param(
            lambda: PDF_SMALL.read_bytes()[: PDF_SMALL.stat().st_size // 2], id="truncated"
        ),
    ],
)
def test_corrupt_pdf(tmp_path: Path, make) -> None:
    (tmp_path / "broken.pdf").write_bytes(make())
    doc = one(tmp_path)
    assert doc.skip is Skip.CORRUPT_PDF, doc.reason
    assert doc.reason.startswith("corrupt PDF: ")


def test_encrypted_and_textless_pdfs(tmp_path: Path) -> None:
    (tmp_path / "locked.pdf").write_bytes(blank_pdf(password="secret"))
    (tmp_path / "scan.pdf").write_bytes(blank_pdf())
    docs = {d.source: d for d in ingest(tmp_path)}
    assert docs["locked.pdf"].skip is Skip.ENCRYPTED_PDF
    # A blank page: OCR finds no text (or, without Tesseract, the page needs OCR).
    assert docs["scan.pdf"].skip in (Skip.EMPTY, Skip.NEEDS_OCR)
    assert "page 1: no text layer" in docs["scan.pdf"].reason


def test_too_large_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"word " * 1000)
    (tmp_path / "small.txt").write_bytes(b"word " * 10)
    docs = {d.source: d for d in ingest(tmp_path, max_bytes=1000)}
    assert docs["big.txt"].skip is Skip.TOO_LARGE and docs["big.txt"].sha256 is None
    assert "limit" in docs["big.txt"].reason
    assert docs["small.txt"].ok


def test_a_binary_media_type_is_skipped_by_its_extension(tmp_path: Path) -> None:
    (tmp_path / "song.mp3").write_bytes(b"ID3\x04")
    doc = one(tmp_path)
    assert doc.skip is Skip.BINARY and doc.reason == "binary: .mp3 is audio/mpeg, not a text format"


def test_undecodable_text(tmp_path: Path) -> None:
    # Not UTF-8, and every byte above 0x7f once each: no codec makes language of it.
    (tmp_path / "noise.txt").write_bytes(bytes(range(0x80, 0x100)) * 8)
    doc = one(tmp_path)
    assert doc.skip is Skip.UNDECODABLE and doc.reason.startswith("undecodable text: ")


def test_control_characters_are_binary(tmp_path: Path) -> None:
    (tmp_path / "ctrl.txt").write_bytes(bytes([1, 2, 3, 0x1B, 0x7F, 0x41]) * 100)
    doc = one(tmp_path)
    assert doc.skip is Skip.BINARY and "control characters" in doc.reason


_AS_NOBODY = """
import json, os, sys
from attnswitch.documents.ingest import ingest
os.setgid(65534)
os.setuid(65534)  # root reads chmod 000 files; an ordinary user does not
print(json.dumps({d.source: d.reason for d in ingest(sys.argv[1])}))
"""


def test_permission_denied_file_and_folder() -> None:
    base = Path(tempfile.mkdtemp(prefix="attnswitch-perm-"))  # traversable by any user
    try:
        os.chmod(base, 0o755)
        (base / "ok.txt").write_text("readable")
        (base / "secret.txt").write_text("x")
        (base / "locked").mkdir()
        (base / "locked" / "inner.txt").write_text("x")
        os.chmod(base / "ok.txt", 0o644)
        os.chmod(base / "secret.txt", 0)
        os.chmod(base / "locked", 0)
        if os.geteuid() == 0:
            proc = subprocess.run(
                [sys.executable, "-c", _AS_NOBODY, str(base)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
                pytest.skip("running as root and cannot drop to an unprivileged user here")
            assert proc.returncode == 0, proc.stderr
            reasons = json.loads(proc.stdout)
        else:
            reasons = {d.source: d.reason for d in ingest(base)}
    finally:
        os.chmod(base / "locked", 0o755)
        shutil.rmtree(base)
    assert reasons["ok.txt"] is None
    assert reasons["secret.txt"].startswith("unreadable: PermissionError")
    assert reasons["locked"].startswith("unreadable: cannot list folder")


def test_file_vanished_between_scan_and_read(tmp_path: Path) -> None:
    (tmp_path / "gone.txt").write_text("soon deleted")
    (entry,) = scan(tmp_path)
    (tmp_path / "gone.txt").unlink()
    doc = load(entry)
    assert doc.skip is Skip.UNREADABLE and "FileNotFoundError" in doc.reason


def test_broken_link(tmp_path: Path) -> None:
    (tmp_path / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    doc = one(tmp_path)
    assert doc.skip is Skip.UNREADABLE and "cannot stat" in doc.reason


def test_fifo_and_socket_are_not_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.txt")  # opening it for reading would block forever
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "sock.md"))
        docs = {d.source: d for d in ingest(tmp_path)}
    finally:
        sock.close()
    assert docs["pipe.txt"].skip is Skip.NOT_A_FILE and "named pipe" in docs["pipe.txt"].reason
    assert docs["sock.md"].skip is Skip.NOT_A_FILE and "socket" in docs["sock.md"].reason


def test_a_folder_of_bad_files_never_stops_the_walk(tmp_path: Path) -> None:
    (tmp_path / "a-binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    (tmp_path / "b-empty.txt").write_bytes(b"")
    (tmp_path / "c-corrupt.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<")
    (tmp_path / "d-latin.txt").write_bytes((GERMAN * 4).encode("latin-1"))
    (tmp_path / "e-big.md").write_bytes(b"x" * 5000)
    (tmp_path / "f-good.md").write_text("# fine\n")
    (tmp_path / "g-dangling.html").symlink_to(tmp_path / "missing.html")
    docs = list(ingest(tmp_path, max_bytes=4096))
    assert [d.source for d in docs] == sorted(p.name for p in tmp_path.iterdir())
    assert [d.skip for d in docs] == [
        Skip.BINARY,
        Skip.EMPTY,
        Skip.CORRUPT_PDF,
        None,
        Skip.TOO_LARGE,
        None,
        Skip.UNREADABLE,
    ]
    assert all((d.text is None) == (d.reason is not None) for d in docs)


# -- the shipped corpus -------------------------------------------------------------------


@pytest.mark.slow  # pypdf reads the corpus's 230 PDF pages in a few seconds
def test_corpus_ingests_without_skips() -> None:
    docs = list(ingest(CORPUS))
    assert [d.reason for d in docs if not d.ok] == []
    kinds = Counter(d.kind for d in docs)
    assert set(kinds) == {"html", "pdf", "text", "markdown"}
    assert kinds["pdf"] >= 2 and kinds["html"] >= 10
    assert len({d.sha256 for d in docs}) == len(docs)
    assert all(d.encoding == "utf-8" for d in docs if d.kind != "pdf")
