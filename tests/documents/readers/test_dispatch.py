"""Reading through `dispatch.extract`: a heading that repeats the heading right before it
is given once, whatever the reader (a Word file made by python-docx here, the way pandoc
and LibreOffice write a converted page: its title as "Title", then "Heading 1" and
"Heading 2" of the same words)."""

from __future__ import annotations

import io

import pytest

from attnswitch.documents.chunk import chunk_document
from attnswitch.documents.readers.blocks import Block, BlockKind, ReadOptions
from attnswitch.documents.readers.dispatch import distinct_headings, extract


def remote_login_docx() -> bytes:
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_heading("9.2. Remote Login", level=0)  # the "Title" style
    document.add_heading("9.2. Remote Login", level=1)
    document.add_paragraph("Use ssh to log in to a remote machine; the server is sshd.")
    document.add_heading("9.2.  remote login", level=2)  # the same words again
    document.add_paragraph("The ssh client reads its configuration from ~/.ssh/config.")
    document.add_heading("9.2.1. Keys", level=2)
    document.add_paragraph("Generate a key pair with ssh-keygen.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_word_file_s_repeated_headings_read_once(tok) -> None:
    got = extract("docx", remote_login_docx(), ReadOptions())
    heads = [(b.level, b.text) for b in got.blocks if b.kind is BlockKind.HEADING]
    # The Title's twin "Heading 1" is dropped; the "Heading 2" after a paragraph is a
    # section of its own, kept, and in the heading path once (`chunk._sections`).
    assert heads == [(1, "9.2. Remote Login"), (2, "9.2. remote login"), (2, "9.2.1. Keys")]
    chunks = chunk_document(got.text, got.blocks, tok, max_tokens=32)
    assert [c.heading_path for c in chunks] == [
        ("9.2. Remote Login",),
        ("9.2. Remote Login",),
        ("9.2. Remote Login", "9.2.1. Keys"),
    ]
    assert got.text.count("9.2. Remote Login") == 1


def test_only_a_heading_right_after_the_same_heading_is_dropped() -> None:
    h = [Block(BlockKind.HEADING, "Intro", level=1), Block(BlockKind.HEADING, "INTRO", level=2)]
    p = Block(BlockKind.PARAGRAPH, "Intro")
    assert distinct_headings((*h, p)) == (h[0], p)
    assert distinct_headings((h[0], p, h[1])) == (h[0], p, h[1])  # a section of that name
    assert distinct_headings((p, h[0])) == (p, h[0])


@pytest.fixture(scope="module")
def tok():
    from attnswitch.engines import ModelSpec
    from attnswitch.indexing.config import chunk_tokenizer

    return chunk_tokenizer(ModelSpec.load(None))
