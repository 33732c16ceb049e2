"""Which reader takes a file of each kind: one registry from the kind that
`formats.detect` names to the reader function (`blocks.Reader`).

Each reader module owns one format family and registers nothing itself; this table is the
one place that lists them, so a new format is one reader module and one line here.
"""

from __future__ import annotations

import dataclasses
import importlib

from attnswitch.pipeline.readers.blocks import Extracted, ReadOptions, Reader
from attnswitch.pipeline.readers.skip import Skip, Skipped


def readers() -> dict[str, Reader]:
    """kind -> reader. Each reader module is imported when a file of its kind is first
    read, so a format's library loads only then."""
    return {
        "text": _later("text", "read_text"), "markdown": _later("markdown", "read_markdown"),
        "html": _later("html", "read_html"), "pdf": _later("pdf", "read_pdf"),
        "docx": _later("office", "read_docx"), "pptx": _later("office", "read_pptx"),
        "xlsx": _later("office", "read_xlsx"), "odt": _later("opendocument", "read_odt"),
        "odp": _later("opendocument", "read_odp"), "ods": _later("opendocument", "read_ods"),
        "epub": _later("epub", "read_epub"), "rtf": _later("rtf", "read_rtf"),
        "eml": _later("mail", "read_eml"), "mbox": _later("mail", "read_mbox"),
        "ipynb": _later("notebook", "read_ipynb"), "csv": _later("tabular", "read_csv"),
        "doc": _later("legacy_office", "read_doc"), "xls": _later("legacy_office", "read_xls"),
        "ppt": _later("legacy_office", "read_ppt"), "code": _later("code", "read_code"),
        "image": _later("ocr", "read_image"),
    }


def _later(module: str, name: str) -> Reader:
    """The reader `name` of `readers.<module>`, imported when it is first called."""

    def read(data: bytes, options: ReadOptions) -> Extracted:
        found = importlib.import_module(f"attnswitch.pipeline.readers.{module}")
        return getattr(found, name)(data, options)

    read.__name__ = read.__qualname__ = name
    return read


def extract(kind: str, data: bytes, options: ReadOptions) -> Extracted:
    """The blocks of a file of `kind` (as `formats.detect` names it); `Skipped` when the
    reader finds no text or no reader takes the kind."""
    reader = readers().get(kind)
    if reader is None:
        raise Skipped(Skip.UNSUPPORTED, f"no reader for {kind}")
    return reader(data, options)


# Mail attached to mail attached to mail...: attachments are read this many levels deep.
ATTACHMENT_DEPTH = 3


def read_named(name: str, data: bytes, options: ReadOptions) -> Extracted:
    """A file known only by its name and bytes (a mail attachment): its format detected
    (`formats.detect`), then read by the reader of that kind."""
    from attnswitch.pipeline.readers.formats import detect

    found = detect(name, data, options.max_bytes)
    return extract(found.kind, found.data, dataclasses.replace(options, name=name))


def with_attachments(options: ReadOptions, depth: int = ATTACHMENT_DEPTH) -> ReadOptions:
    """`options` whose `read_attachment` reads an attachment like a file of its own
    (`read_named`), attachments of attachments up to `depth` levels down."""
    if depth <= 0:
        return dataclasses.replace(options, read_attachment=None)
    inner = with_attachments(options, depth - 1)
    return dataclasses.replace(options,
                               read_attachment=lambda name, data: read_named(name, data, inner))
