"""Mail (fixtures/mail.eml, mail.mbox: written with the standard library from the corpus'
JSON types page): subject as heading, the headers that matter, the plain body, and the
attachments read as documents in their own right, each at its part."""

from __future__ import annotations

import email.policy
from email.message import EmailMessage

import pytest
from reader_sources import CORPUS, FIXTURES, headings, json_types_rows, read, recall, words

from attnswitch.documents.readers.blocks import BlockKind, Location, ReadOptions
from attnswitch.documents.readers.dispatch import read_named, with_attachments
from attnswitch.documents.readers.mail import read_eml
from attnswitch.documents.readers.skip import Skip, Skipped


def test_a_message_gives_subject_headers_body_and_attachments() -> None:
    got = read("mail.eml")
    subject, header = got.blocks[:2]
    assert (subject.kind, subject.level, subject.text) == (
        BlockKind.HEADING,
        1,
        "JSON types in PostgreSQL",
    )
    assert header.text.splitlines() == [
        "From: Docs Team <docs@example.org>",
        "To: Readers <readers@example.org>",
        "Date: Wed, 02 Dec 2026 09:00:00 +0000",
    ]
    body = [b for b in got.blocks if b.location == Location(part="body")]
    assert any("8.14.1. JSON Input and Output Syntax" in b.text for b in body)
    [table] = [b for b in got.blocks if b.location.part == "json-types.csv"]
    assert [list(r) for r in table.rows] == json_types_rows()
    docx = tuple(b for b in got.blocks if b.location.part == "anyhow.docx")
    assert headings(docx) == headings(read("anyhow.docx").blocks)
    assert got.failed == ()


def test_without_an_attachment_reader_only_the_message_is_read() -> None:
    got = read_eml((FIXTURES / "mail.eml").read_bytes(), ReadOptions())
    assert {b.location.part for b in got.blocks} == {"body"}


def test_a_mailbox_gives_each_message_its_part() -> None:
    got = read("mail.mbox")
    assert headings(got.blocks)[:1] == [(1, "JSON types in PostgreSQL")]
    second = [b for b in got.blocks if b.location.part == "message 2 › body"]
    assert second[0].text == "Error handling with anyhow"
    assert any(b.location.part == "message 1 › anyhow.docx" for b in got.blocks)
    parts = {b.location.part.split(" › ")[0] for b in got.blocks}
    assert parts == {"message 1", "message 2"}


def test_an_html_only_message_is_read_through_the_html_reader() -> None:
    page = (CORPUS / "postgresql" / "tutorial-update.html").read_text()
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = "Updates"
    message["From"] = "a@example.org"
    message.set_content(page, subtype="html")
    got = read_named("update.eml", message.as_bytes(), ReadOptions())
    assert headings(got.blocks) == [(1, "Updates"), (2, "2.8. Updates")]  # subject, page
    assert "<" not in got.text and recall(words("UPDATE weather SET temp_hi"), got.text) == 1


def test_an_attachment_that_gives_no_text_is_listed_with_its_reason() -> None:
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = "Two files"
    message.set_content("See the attachments.")
    message.add_attachment(
        (FIXTURES / "anyhow-encrypted.docx").read_bytes(),
        maintype="application",
        subtype="octet-stream",
        filename="locked.docx",
    )
    message.add_attachment(
        b"\x00\x01binary", maintype="application", subtype="octet-stream", filename="../../blob.bin"
    )
    got = read_named("two.eml", message.as_bytes(), with_attachments(ReadOptions()))
    assert got.failed[0] == (
        "locked.docx: encrypted: docx: password-protected (an encrypted Office file)"
    )
    assert got.failed[1].startswith("blob.bin: binary: ")  # the name without its folders
    assert [b.text for b in got.blocks] == ["Two files", "See the attachments."]


def test_attached_mail_is_read_as_mail() -> None:
    inner = (FIXTURES / "mail.eml").read_bytes()
    outer = EmailMessage(policy=email.policy.SMTP)
    outer["Subject"] = "Fwd: JSON types"
    outer.set_content("Forwarded.")
    outer.add_attachment(email.message_from_bytes(inner, policy=email.policy.SMTP))
    got = read_named("fwd.eml", outer.as_bytes(), with_attachments(ReadOptions()))
    forwarded = [b for b in got.blocks if b.location.part.startswith("attached message 1.eml")]
    assert forwarded[0].text == "JSON types in PostgreSQL"
    assert any(b.location.part == "attached message 1.eml › json-types.csv" for b in forwarded)


@pytest.mark.parametrize("data", [b"", b"just some words\nwith no headers\n"])
def test_not_mail(data: bytes) -> None:
    with pytest.raises(Skipped) as caught:
        read_eml(data, ReadOptions())
    assert caught.value.skip in (Skip.CORRUPT, Skip.EMPTY)


@pytest.mark.parametrize("depth", [200, 1_000])
def test_deeply_nested_mail_keeps_the_outer_message(depth: int) -> None:
    """200 levels: the standard library parses it, but writes an attached message back
    recursively; 1,000: its parser recurses too. Either way the outer message is kept
    and attached messages are read as deep as attachments are read."""
    from hostile_files import nested_mail

    got = read_named("deep.eml", nested_mail(depth), with_attachments(ReadOptions()))
    body = [b.text for b in got.blocks if b.location.part == "body"]
    assert body[0] == "level 0" and body[-1] == "body at level 0"
    if depth == 200:
        deepest = [b for b in got.blocks if b.text.startswith("body at level")][-1]
        assert deepest.text == "body at level 3"
    assert got.failed and all("nested" in line for line in got.failed), got.failed
