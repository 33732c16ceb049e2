"""The bytes of an indexed file, exactly as they were indexed, for `GET /v1/chunks/{id}/file`.

`open_as_indexed` opens the file a store records (`ingest.open_indexed`: from "/" down, no
link followed) and holds it to the document's record: a regular file of the recorded size
and modification time whose bytes, read from that descriptor, hash to the recorded
SHA-256. Anything else at that path (a link swapped in, another file renamed or hard-linked
over it, the file edited since) is `FileChanged`. `IndexedFileResponse` then streams the
file from that same descriptor (never reopened by name, so nothing swapped in after the
check is read) and closes it when the response ends, sent or not.

Were the file rewritten in place between the check and the sending (its own inode, by
someone who may write it), the answer carries what was written there, never another file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from typing import BinaryIO
from urllib.parse import quote

import anyio.to_thread
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from attnswitch.documents.ingest import open_indexed

BLOCK = 64 * 1024  # bytes read at a time, to hash and to send


class FileChanged(Exception):
    """The file at an indexed path is not the one indexed; the message says how."""


def open_as_indexed(
    root: str, source: str, size: int, mtime_ns: int, sha256: str | None
) -> BinaryIO:
    """The file `source` of `root` opened for reading (unbuffered; the caller closes it),
    when it is still the file a store recorded with `size`, `mtime_ns` and `sha256` (None:
    not recorded, not checked). Raises `FileNotFoundError` or `NotADirectoryError` when
    nothing is there, `FileChanged` when something else is (`ingest.open_indexed`'s
    refusals included)."""
    try:
        fd = open_indexed(root, source)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        raise FileChanged(exc.strerror or type(exc).__name__) from None
    file = open(fd, "rb", buffering=0)
    try:
        st = os.fstat(fd)
        if st.st_size != size:
            raise FileChanged(f"{st.st_size} bytes now, {size} when indexed")
        if st.st_mtime_ns != mtime_ns:
            raise FileChanged("modified since it was indexed")
        if sha256 is not None and _sha256(fd, size) != sha256:
            raise FileChanged("its bytes differ from those indexed")
    except BaseException:
        file.close()
        raise
    return file


def _sha256(fd: int, size: int) -> str | None:
    """The SHA-256 of the first `size` bytes of `fd`; None when it holds more or fewer."""
    digest = hashlib.sha256()
    offset = 0
    while offset <= size:
        block = os.pread(fd, min(BLOCK, size + 1 - offset), offset)
        if not block:
            break
        digest.update(block)
        offset += len(block)
    return digest.hexdigest() if offset == size else None


def content_disposition(kind: str, filename: str) -> str:
    """The `Content-Disposition` value `kind` ("inline" or "attachment") for `filename`, as
    Starlette's `FileResponse` writes it (RFC 6266; a name that needs quoting as RFC 5987's
    `filename*`)."""
    quoted = quote(filename)
    if quoted != filename:
        return f"{kind}; filename*=utf-8''{quoted}"
    return f'{kind}; filename="{filename}"'


class IndexedFileResponse(StreamingResponse):
    """The first `size` bytes of the open `file` (`open_as_indexed`), read from its
    descriptor by offset and sent with `Content-Length`, `media_type` and a
    `Content-Disposition` of `filename` shown in place (`inline`) or downloaded. `file` is
    closed when the response ends, sent or cut short (a response never sent leaves it to
    the garbage collector, which closes a file object). A file that shrank meanwhile ends
    the body early: the client sees it cut short of its `Content-Length`."""

    def __init__(
        self,
        file: BinaryIO,
        size: int,
        *,
        media_type: str,
        filename: str,
        inline: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.file = file
        super().__init__(
            _blocks(file.fileno(), size),
            media_type=media_type,
            headers={
                **(headers or {}),
                "Content-Length": str(size),
                "Content-Disposition": content_disposition(
                    "inline" if inline else "attachment", filename
                ),
            },
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.file.close()


async def _blocks(fd: int, size: int) -> AsyncIterator[bytes]:
    # A read in a worker thread is waited for even when the request is cancelled (anyio's
    # default), so the descriptor is never closed, and its number reused, under a read.
    offset = 0
    while offset < size:
        block = await anyio.to_thread.run_sync(os.pread, fd, min(BLOCK, size - offset), offset)
        if not block:
            return
        offset += len(block)
        yield block
