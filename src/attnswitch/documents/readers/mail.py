"""Mail as blocks: one message (`.eml`) or a mailbox of them (`.mbox`), read with the
standard library's `email` (policy `default`, which decodes headers and transfer
encodings) and `mailbox`.

Each message gives: its subject as a level-1 heading (or "(no subject)"), a paragraph
of the headers that matter (From, To, Cc, Date), then its body: the plain-text body
when it has one, else the HTML body through the HTML reader (`markup.html_to_blocks`),
one paragraph per blank-line-separated run of a plain body. Its attachments (and
attached messages) are read as documents in their own right through
`options.read_attachment` (the walk's reader, which knows their format by name and
content); one that gives no text is listed in `Extracted.failed` with the reason, and
none are read when `read_attachment` is None.

Nesting: a message's parts (multiparts and attached messages) nested more than
`MAX_NESTING` levels deep are cut off before anything walks them, each listed in
`Extracted.failed`: attachments are read only a few levels deep
(`dispatch.ATTACHMENT_DEPTH`), and the standard library walks and writes parts
recursively (a message nested 200 levels deep would exhaust Python's stack). Where even
its parser runs out of stack (some 300 levels), the message's own top-level parts are
parsed one by one, and the part that holds the nesting is listed as not read. Either way
the outer message is kept.

Locations: `Location(part="body")` for a message's heading and body and
`part=<file name>` for an attachment's blocks (their page, slide or sheet kept); in a
mailbox, `part` starts with "message N" (1-based).
"""

from __future__ import annotations

import dataclasses
import email
import email.parser
import email.policy
import os
import re
import tempfile
from email.message import EmailMessage

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, Location, ReadOptions
from attnswitch.documents.readers.containers import library_errors
from attnswitch.documents.readers.skip import Skip, Skipped

_HEADERS = ("From", "To", "Cc", "Date")
_MAX_ATTACHMENTS = 100
# MIME levels kept below a message: ample for attachments read `ATTACHMENT_DEPTH` deep
# (a message is about four levels: mixed, alternative, related, the part), and a walk of
# this depth uses a small part of Python's stack.
MAX_NESTING = 24


def read_eml(data: bytes, options: ReadOptions) -> Extracted:
    """One message's blocks (see the module)."""
    with library_errors("eml"):
        message, cut = _parse(data)
    if not message.keys():
        raise Skipped(Skip.CORRUPT, "eml: no mail headers")
    blocks, failed = _message_blocks(message, options, "")
    return _done(blocks, cut + failed, "eml")


def read_mbox(data: bytes, options: ReadOptions) -> Extracted:
    """Every message of a mailbox, in order (see the module). The `mailbox` module reads
    a file by its path, so the bytes are written to a private temporary file first."""
    blocks: list[Block] = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="attnswitch-mbox-") as folder:
        path = os.path.join(folder, "mail.mbox")
        with open(path, "wb") as fh:
            fh.write(data)
        with library_errors("mbox"):
            import mailbox

            box = mailbox.mbox(path, factory=None, create=False)
            try:
                for number, key in enumerate(box.iterkeys(), start=1):
                    message, cut = _parse(box.get_bytes(key))
                    found, lost = _message_blocks(message, options, f"message {number}")
                    blocks += found
                    failed += [f"message {number} › {line}" for line in cut] + lost
            finally:
                box.close()
    return _done(blocks, failed, "mbox")


def _parse(data: bytes) -> tuple[EmailMessage, list[str]]:
    """The message in `data` with its parts nested past `MAX_NESTING` cut off, and one
    line for each part cut or not parsed (see the module)."""
    try:
        message = email.message_from_bytes(data, policy=email.policy.default)
        lost = []
    except RecursionError:
        message, lost = _parse_top_level(data)
    return message, lost + _cut_deep(message)


def _parse_top_level(data: bytes) -> tuple[EmailMessage, list[str]]:
    """The message in `data` parsed one top-level part at a time, for a message too deep
    for the parser as a whole: its headers, then each part its parser can take; a line
    for each part it cannot (or for the body, when the message is not a multipart)."""
    parser = email.parser.BytesParser(policy=email.policy.default)
    message = parser.parsebytes(data, headersonly=True)
    boundary = message.get_boundary()
    payload = message.get_payload()
    lost = []
    if message.get_content_maintype() != "multipart" or boundary is None:
        message.set_payload("")
        return message, ["body: not read: nested too deep to parse"]
    # RFC 2046 5.1.1: a delimiter is "--" and the boundary at the start of a line;
    # the parts lie between the first delimiter and the closing one ("--" after it).
    delimiter = re.compile(rf"^--{re.escape(boundary)}(--)?[ \t]*\r?$", re.MULTILINE)
    pieces = delimiter.split(payload if isinstance(payload, str) else "")
    message.set_payload([])
    for number, (text, closing) in enumerate(zip(pieces[2::2], pieces[1::2]), start=1):
        if closing:
            break
        try:
            message.attach(
                email.message_from_string(text.lstrip("\r\n"), policy=email.policy.default)
            )
        except RecursionError:
            lost.append(f"part {number}: not read: nested too deep to parse")
    return message, lost


def _cut_deep(message: EmailMessage) -> list[str]:
    """Cut off, in place, the parts of `message` nested more than `MAX_NESTING` levels
    below it (each emptied); a line for each. Walked with a stack: the nesting may be
    deeper than Python's own."""
    lost = []
    stack = [(message, 0)]
    while stack:
        part, level = stack.pop()
        inner = part.get_payload()
        if not isinstance(inner, list):
            continue
        if level >= MAX_NESTING:
            # An attached message keeps an empty message: the library writes one back.
            part.set_payload(
                []
                if part.get_content_maintype() == "multipart"
                else [EmailMessage(policy=email.policy.default)]
            )
            lost.append(
                f"{part.get_content_type()} part: not read: nested more than "
                f"{MAX_NESTING} levels deep"
            )
            continue
        stack.extend((p, level + 1) for p in inner if isinstance(p, EmailMessage))
    return lost


def _message_blocks(
    message: EmailMessage, options: ReadOptions, prefix: str
) -> tuple[list[Block], list[str]]:
    body = Location(part=_join(prefix, "body"))
    subject = " ".join(str(message.get("Subject", "")).split()) or "(no subject)"
    blocks = [Block(BlockKind.HEADING, subject, body, level=1)]
    lines = [
        f"{name}: {' '.join(str(message[name]).split())}" for name in _HEADERS if message.get(name)
    ]
    if lines:
        blocks.append(Block(BlockKind.PARAGRAPH, "\n".join(lines), body))
    blocks += _body_blocks(message, body)
    failed: list[str] = []
    if options.read_attachment is None:
        return blocks, failed
    for number, part in enumerate(message.iter_attachments(), start=1):
        if number > _MAX_ATTACHMENTS:
            failed.append(
                f"{_join(prefix, 'attachments')}: more than {_MAX_ATTACHMENTS}, the rest not read"
            )
            break
        name, payload = _attachment(part, number)
        where = _join(prefix, name)
        if payload is None:
            failed.append(f"{where}: no content")
            continue
        try:
            found = options.read_attachment(name, payload)
        except Skipped as skip:
            failed.append(f"{where}: {skip.skip.value}: {skip.detail}")
            continue
        blocks += [
            dataclasses.replace(
                b,
                location=dataclasses.replace(
                    b.location, part=_join(where, b.location.part) if b.location.part else where
                ),
            )
            for b in found.blocks
        ]
        failed += [f"{where}: {line}" for line in found.failed]
    return blocks, failed


def _body_blocks(message: EmailMessage, where: Location) -> list[Block]:
    from attnswitch.documents.readers.markup import html_to_blocks

    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return []
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset or a bad part
        content = part.get_payload(decode=True).decode("utf-8", "replace")
    if part.get_content_subtype() == "html":
        return html_to_blocks(content, where)
    paragraphs = [" ".join(p.split()) for p in content.replace("\r\n", "\n").split("\n\n")]
    return [Block(BlockKind.PARAGRAPH, p, where) for p in paragraphs if p]


def _attachment(part: EmailMessage, number: int) -> tuple[str, bytes | None]:
    """(file name, bytes) of an attachment; an attached message is a `.eml`."""
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        inner = inner[0] if isinstance(inner, list) and inner else inner
        name = part.get_filename() or f"attached message {number}.eml"
        return name, inner.as_bytes() if hasattr(inner, "as_bytes") else None
    name = part.get_filename() or f"attachment {number}"
    return os.path.basename(name.replace("\\", "/")) or f"attachment {number}", part.get_payload(
        decode=True
    )


def _join(prefix: str, name: str) -> str:
    return f"{prefix} › {name}" if prefix else name


def _done(blocks: list[Block], failed: list[str], what: str) -> Extracted:
    if not any(b.kind is not BlockKind.HEADING or b.text != "(no subject)" for b in blocks):
        raise Skipped(Skip.EMPTY, f"{what}: no text")
    return Extracted(tuple(blocks), failed=tuple(failed))
