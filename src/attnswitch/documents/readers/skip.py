"""Why a file gave no text: the categories shown in summaries, and the exception a reader
raises to say so."""

from __future__ import annotations

import enum


class Skip(str, enum.Enum):
    """Why a file gave no text. The value is the category shown in summaries."""

    UNREADABLE = "unreadable"
    NOT_A_FILE = "not a regular file"
    UNSUPPORTED = "unsupported extension"  # no longer set: formats are known by content
    TOO_LARGE = "too large"
    EMPTY = "empty"
    BINARY = "binary"
    UNDECODABLE = "undecodable text"
    CORRUPT_PDF = "corrupt PDF"
    CORRUPT_COMPRESSED = "corrupt compressed file"
    LINK = "link not followed"
    ENCRYPTED_PDF = "encrypted PDF"
    ENCRYPTED = "encrypted"  # password-protected office files, e-books with DRM
    CORRUPT = "corrupt file"  # a container or document its library cannot read
    NEEDS_OCR = "needs OCR"  # scanned pages or images, and OCR is off or unavailable
    NEEDS_TOOL = "reader not installed"  # the program that reads its format is missing
    TOO_DEEP = "folder too deep"
    SYSTEM_FOLDER = "system folder"  # recycle bins, dependency and cache folders (`rules`)
    HIDDEN_FOLDER = "hidden folder"  # a folder named ".something", walked only when asked
    ENCODE_FAILED = "encode failed"  # set by the pipeline run, never by ingest
    CRASHED = "extraction crashed"  # its reader's process died (`jobs.read_pool`)
    TIMED_OUT = "extraction timed out"  # its reader ran out of time (`jobs.read_pool`)


class Skipped(Exception):
    """A file gives no text: `skip` is the category, `detail` says what happened."""

    def __init__(self, skip: Skip, detail: str):
        super().__init__(detail)
        self.skip = skip
        self.detail = detail
