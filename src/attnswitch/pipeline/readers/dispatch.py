"""Which reader takes a file of each kind: one registry from the kind that
`formats.detect` names to the reader function (`blocks.Reader`).

Each reader module owns one format family and registers nothing itself; this table is the
one place that lists them, so a new format is one reader module and one line here.
"""

from __future__ import annotations

import dataclasses

from attnswitch.pipeline.readers.blocks import Extracted, ReadOptions, Reader
from attnswitch.pipeline.readers.skip import Skip, Skipped


def readers() -> dict[str, Reader]:
    """kind -> reader. Imported on call, so a format's library loads only when a file of
    that kind is read."""
    from attnswitch.pipeline.readers import (code, epub, mail, notebook, ocr, office,
                                             opendocument, rtf, tabular)

    return {
        "docx": office.read_docx, "pptx": office.read_pptx, "xlsx": office.read_xlsx,
        "odt": opendocument.read_odt, "odp": opendocument.read_odp,
        "ods": opendocument.read_ods, "epub": epub.read_epub, "rtf": rtf.read_rtf,
        "eml": mail.read_eml, "mbox": mail.read_mbox, "ipynb": notebook.read_ipynb,
        "csv": tabular.read_csv, "code": code.read_code, "image": ocr.read_image,
    }


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
