"""The readers, registered like the attention backends and the engines: one table of
`ReaderSpec`s, the built-in ones (`BUILTIN`) then those of the `attnswitch.readers` entry
points, from which everything that names a reader is derived: the kind a file's extension
picks (`extension_kinds`, used by `formats.detect`), the kinds a search filter accepts
(`filters`) and the function that reads a kind (`dispatch.extract`).

A package adds a format by naming a `ReaderSpec` in its metadata:

    [project.entry-points."attnswitch.readers"]
    visio = "attnswitch_visio:READER"   # ReaderSpec("vsdx", (".vsdx",), read_vsdx)

A built-in reader keeps its kind and its extensions: a plug-in naming a taken kind is
skipped, and an extension already taken is left out of its spec, each with a warning that
names it, so no installed package can take `.pdf` from the PDF reader unseen.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from attnswitch.documents.readers.blocks import Extracted, Reader, ReadOptions
from attnswitch.documents.readers.code import LANGUAGES
from attnswitch.plugins import Registry, entry_point_objects

ENTRY_POINT_GROUP = "attnswitch.readers"


@dataclass(frozen=True)
class ReaderSpec:
    """kind: the name of the format (what `formats.detect` returns, what `--type` takes);
    extensions: the file name suffixes it owns, lower-case with their dot ("" for a name
    without one); read: the `blocks.Reader` turning a file's bytes into blocks."""

    kind: str
    extensions: tuple[str, ...]
    read: Reader


def lazy(module: str, name: str) -> Reader:
    """The reader `name` of `attnswitch.documents.readers.<module>`, imported when it is
    first called, so that a format's library loads only when a file of its kind is read."""

    def read(data: bytes, options: ReadOptions) -> Extracted:
        found = importlib.import_module(f"attnswitch.documents.readers.{module}")
        return getattr(found, name)(data, options)

    read.__name__ = read.__qualname__ = name
    return read


def _builtin(kind: str, extensions: tuple[str, ...], module: str, name: str) -> ReaderSpec:
    return ReaderSpec(kind, extensions, lazy(module, name))


BUILTIN = (
    _builtin("text", (".txt", ".text", ".rst", ""), "text", "read_text"),
    _builtin("markdown", (".md", ".markdown"), "markdown", "read_markdown"),
    _builtin("html", (".html", ".htm", ".xhtml"), "html", "read_html"),
    _builtin("pdf", (".pdf",), "pdf", "read_pdf"),
    _builtin("docx", (".docx",), "office", "read_docx"),
    _builtin("pptx", (".pptx",), "office", "read_pptx"),
    _builtin("xlsx", (".xlsx",), "office", "read_xlsx"),
    _builtin("odt", (".odt",), "opendocument", "read_odt"),
    _builtin("odp", (".odp",), "opendocument", "read_odp"),
    _builtin("ods", (".ods",), "opendocument", "read_ods"),
    _builtin("epub", (".epub",), "epub", "read_epub"),
    _builtin("rtf", (".rtf",), "rtf", "read_rtf"),
    _builtin("eml", (".eml",), "mail", "read_eml"),
    _builtin("mbox", (".mbox",), "mail", "read_mbox"),
    _builtin("ipynb", (".ipynb",), "notebook", "read_ipynb"),
    _builtin("csv", (".csv", ".tsv", ".tab"), "tabular", "read_csv"),
    _builtin("doc", (".doc", ".dot"), "legacy_office", "read_doc"),
    _builtin("xls", (".xls", ".xlt"), "legacy_office", "read_xls"),
    _builtin("ppt", (".ppt", ".pps", ".pot"), "legacy_office", "read_ppt"),
    _builtin("image", (".png", ".jpg", ".jpeg", ".tif", ".tiff"), "ocr", "read_image"),
    _builtin("code", tuple(LANGUAGES), "code", "read_code"),
)


def _load() -> dict[str, ReaderSpec]:
    """The built-in readers, then each entry point's that neither takes a kind nor an
    extension a reader already has (warned and skipped or left out)."""
    table = {spec.kind: spec for spec in BUILTIN}
    taken = {ext: spec.kind for spec in BUILTIN for ext in spec.extensions}
    for spec in entry_point_objects(
        ENTRY_POINT_GROUP,
        "reader",
        lambda s: isinstance(s, ReaderSpec),
        "an attnswitch.documents.readers.registry.ReaderSpec",
    ):
        if spec.kind in table:
            warnings.warn(
                f"attnswitch: reader {spec.kind!r}: expected a kind no reader "
                f"has, got one the {table[spec.kind].read.__name__} reader "
                "has; skipped",
                stacklevel=2,
            )
            continue
        clashing = [ext for ext in spec.extensions if ext in taken]
        if clashing:
            warnings.warn(
                f"attnswitch: reader {spec.kind!r}: extensions "
                f"{', '.join(clashing)} belong to readers "
                f"{', '.join(taken[e] for e in clashing)}; left out",
                stacklevel=2,
            )
            spec = replace(spec, extensions=tuple(e for e in spec.extensions if e not in taken))
        table[spec.kind] = spec
        taken.update((ext, spec.kind) for ext in spec.extensions)
    return table


# The process's readers: the one registry of readers (plugins.Registry).
REGISTRY: Registry[ReaderSpec] = Registry("reader", _load)


def readers() -> Mapping[str, ReaderSpec]:
    """kind -> its reader's spec, the built-in ones first."""
    return REGISTRY.table()


def _extension_kinds(table: Mapping[str, ReaderSpec]) -> Mapping[str, str]:
    return MappingProxyType({ext: spec.kind for spec in table.values() for ext in spec.extensions})


def extension_kinds() -> Mapping[str, str]:
    """extension (lower-case, with its dot; "" for none) -> the kind of the reader owning
    it: each extension to one reader."""
    return REGISTRY.derived("extension_kinds", _extension_kinds)


def reset() -> None:
    """Forget the table, so that the next call reads the entry points again (tests that
    install a plug-in)."""
    REGISTRY.reset()
