"""Where a chunk opens: the attachment of a message served alone, and a PDF's page.

A chunk read from a mail attachment knows its part (`Location.part`, `mail`'s locations:
"body", or the attachment's file name, then " › " and the places inside it). A message
(`.eml`) opened for such a chunk is its attachment alone: the top-level attachment the
part names first (`attachment_name`), found again in the message's bytes by the name the
reader gave it (`find_attachment`; of several attachments with one name, the first). The
message's body, a mailbox's messages (`.mbox`) and anything else open as the whole file.

A chunk of a PDF with a known page opens at that page: the file's address ends with
`#page=N` (RFC 8118's fragment, which browsers' PDF viewers follow) where the file opened
is a PDF, the document itself or its attachment served alone (`page_fragment`).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from attnswitch.documents.readers.mail import _MAX_ATTACHMENTS, _attachment, _parse

SEPARATOR = " › "  # between the names of a part's places (`mail._join`)
BODY = "body"  # a message's own text (`mail`'s `Location(part="body")`)
GENERIC_TYPES = frozenset({"application/octet-stream", ""})


@dataclass(frozen=True)
class Attachment:
    """One attachment of a message: its file name (as the mail reader names it), its
    media type (the declared one, else guessed from the name) and its decoded bytes."""

    name: str
    media_type: str
    data: bytes


def attachment_name(source: str, location: Mapping[str, Any]) -> str | None:
    """The file name of the attachment a chunk at `location` of the document `source` lies
    in, when that attachment is opened alone: a part of a `.eml` other than its body.
    None: the chunk opens as the whole file."""
    part = location.get("part")
    if not isinstance(part, str) or not part:
        return None
    if PurePosixPath(source).suffix.lower() != ".eml":
        return None
    first = part.split(SEPARATOR, 1)[0]
    return None if first == BODY else first


def page_fragment(source: str, location: Mapping[str, Any], *, attachments: bool = True) -> str:
    """ "#page=N" when the file opened for a chunk at `location` of the document `source`
    is a PDF and N, the chunk's first page, is in it; "" otherwise. `attachments`: whether
    an attachment opens alone (`attachment_name`: the service's file route); False for a
    `file://` address, which opens the whole message."""
    page = location.get("page")
    if not isinstance(page, int) or isinstance(page, bool) or page < 1:
        return ""
    part = location.get("part")
    if not part:
        opened = source
    else:
        name = attachment_name(source, location) if attachments else None
        if name is None or name != part:  # the page of a file inside the part
            return ""
        opened = name
    return f"#page={page}" if opened.lower().endswith(".pdf") else ""


def find_attachment(data: bytes, name: str) -> Attachment | None:
    """The first top-level attachment of the message `data` named `name` (as the mail
    reader names attachments), None when it has none of that name. Parses the message:
    call it off the event loop."""
    message, _ = _parse(data)
    for number, part in enumerate(message.iter_attachments(), start=1):
        if number > _MAX_ATTACHMENTS:
            break
        found, payload = _attachment(part, number)
        if found == name and payload is not None:
            declared = part.get_content_type() if part.get("Content-Type") else ""
            guessed = mimetypes.guess_type(found)[0] or "application/octet-stream"
            media_type = guessed if declared in GENERIC_TYPES else declared
            return Attachment(found, media_type, bytes(payload))
    return None


__all__ = ["Attachment", "attachment_name", "find_attachment", "page_fragment"]
