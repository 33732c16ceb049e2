"""Where a chunk opens (`mail_parts`): a chunk of an .eml's attachment names that attachment,
which is found again in the message's bytes, byte for byte, with its own media type; a
chunk of a PDF opens at its page, whether the PDF is the document or an attachment served
alone; the body, a mailbox and a file inside an attachment open as the whole file."""

from __future__ import annotations

import email.policy
from email.message import EmailMessage

import pytest

from attnswitch.documents.readers.blocks import ReadOptions
from attnswitch.documents.readers.dispatch import read_named, with_attachments
from attnswitch.documents.readers.mail_parts import attachment_name, find_attachment, page_fragment
from text_pdfs import text_pdf

PAGES = ["harbour charts for the pilots", "the tide tables of the harbour", "the lighthouse log"]


def _message() -> tuple[bytes, bytes]:
    pdf = text_pdf(PAGES)
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = "Harbour papers"
    message["From"] = "harbour@example.org"
    message.set_content("The tide tables are attached.")
    message.add_attachment(
        b"name,depth\npier,4\n", maintype="text", subtype="csv", filename="depths.csv"
    )
    message.add_attachment(pdf, maintype="application", subtype="pdf", filename="tides.pdf")
    message.add_attachment(
        b"no type given\n", maintype="application", subtype="octet-stream", filename="notes.txt"
    )
    return message.as_bytes(), pdf


def test_a_chunk_of_an_attachment_opens_as_that_attachment_at_its_page() -> None:
    data, pdf = _message()
    got = read_named("papers.eml", data, with_attachments(ReadOptions()))
    (tides,) = [b for b in got.blocks if "tide tables of the harbour" in b.text]
    location = tides.location.to_dict()
    assert location == {"part": "tides.pdf", "page": 2}
    assert attachment_name("papers.eml", location) == "tides.pdf"
    assert page_fragment("papers.eml", location) == "#page=2"
    # a file:// address opens the whole message: no page of it
    assert page_fragment("papers.eml", location, attachments=False) == ""
    found = find_attachment(data, "tides.pdf")
    assert found is not None and found.data == pdf
    assert (found.name, found.media_type) == ("tides.pdf", "application/pdf")
    csv = find_attachment(data, "depths.csv")
    assert csv is not None and (csv.media_type, csv.data) == ("text/csv", b"name,depth\npier,4\n")
    # declared as bytes of no type: the type its name says
    assert find_attachment(data, "notes.txt").media_type == "text/plain"
    assert find_attachment(data, "missing.pdf") is None


def test_the_body_opens_as_the_whole_message() -> None:
    data, _ = _message()
    got = read_named("papers.eml", data, with_attachments(ReadOptions()))
    body = [b for b in got.blocks if b.location.part == "body"]
    assert body and all(attachment_name("papers.eml", b.location.to_dict()) is None for b in body)


@pytest.mark.parametrize(
    "source, location, name, fragment",
    [
        ("guide.pdf", {"page": 3}, None, "#page=3"),
        ("guide.pdf", {"page": 3, "page_end": 4}, None, "#page=3"),
        ("GUIDE.PDF", {"page": 1}, None, "#page=1"),
        ("guide.pdf", {}, None, ""),
        ("slides.pptx", {"slide": 3}, None, ""),
        ("book.epub", {"page": 3}, None, ""),
        ("mail.eml", {"part": "body"}, None, ""),
        ("mail.eml", {"part": "a.pdf", "page": 2}, "a.pdf", "#page=2"),
        ("mail.eml", {"part": "a.docx"}, "a.docx", ""),
        # a file inside an attachment: the attachment opens, not at the inner file's page
        ("mail.eml", {"part": "fwd.eml › a.pdf", "page": 2}, "fwd.eml", ""),
        ("mail.eml", {"part": "files.zip › a.pdf", "page": 2}, "files.zip", ""),
        # a mailbox opens whole
        ("box.mbox", {"part": "message 2 › a.pdf", "page": 2}, None, ""),
        ("x.pdf", {"page": 0}, None, ""),
        ("x.pdf", {"page": True}, None, ""),
    ],
)
def test_what_opens_and_where(source, location, name, fragment) -> None:
    assert attachment_name(source, location) == name
    assert page_fragment(source, location) == fragment
