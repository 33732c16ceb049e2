"""attnswitch's reading of documents for the framework loaders (LangChain's
`AttnswitchLoader`, LlamaIndex's `AttnswitchReader`): a folder or one file read by
attnswitch's readers (`documents.ingest`: every format it knows, OCR of scans, the same
walk and file rules as `attnswitch run`), given back as (text, metadata) pieces by `by`:

- "chunks": the chunks `attnswitch run` would index (`chunk.chunk_document` with the
  default model's tokenizer and limits), metadata as a search hit has them: path, root,
  ordinal, start, end, heading_path, location, kind;
- "blocks": each block a reader found (heading, paragraph, list item, table, code,
  caption), with its kind, level, heading path and location;
- "documents": each file's whole extracted text (its blocks joined by blank lines).

Every piece's metadata has `path` (relative to the folder read, "/" separators), `root`
(the folder), `kind` (the document's format: "html", "pdf", "docx", ...), `modified` (the
file's mtime, ISO 8601 UTC) and `sha256`. Files that give no text (binary, empty,
unreadable) are left out, as `run` skips them; `skipped` lists them with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BY = ("chunks", "blocks", "documents")


@dataclass
class Extraction:
    """The pieces of the documents at `path` (see the module doc); `skipped` holds
    (path, reason) of each file that gave none, filled as the pieces are read."""

    path: str | os.PathLike
    by: str = "chunks"
    ocr: bool = True
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.by not in BY:
            raise ValueError(f"by: expected one of {', '.join(BY)}, got {self.by!r}")
        if not isinstance(self.path, (str, os.PathLike)) or not Path(self.path).exists():
            raise ValueError(f"path: expected an existing folder or file, got {self.path!r}")

    def pieces(self) -> Iterator[tuple[str, dict[str, Any]]]:
        from attnswitch.documents.ingest import load

        tokenizer, max_tokens = _chunking() if self.by == "chunks" else (None, 0)
        for entry in _entries(Path(self.path)):
            doc = load(entry, ocr=self.ocr)
            if not doc.ok or doc.text is None:
                self.skipped.append((doc.source, doc.reason or "no text"))
                continue
            yield from _pieces(doc, self.by, tokenizer, max_tokens)


def _entries(path: Path) -> Iterator[Any]:
    """What `load` reads: every file of a folder as `scan` finds them, or the one file."""
    from attnswitch.documents.ingest import SourceFile, scan

    if path.is_dir():
        yield from scan(path.resolve())
        return
    resolved = path.resolve()
    st = resolved.stat()
    yield SourceFile(
        root=str(resolved.parent),
        source=resolved.name,
        path=resolved,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
    )


def _chunking() -> tuple[Any, int]:
    """The default model's chunking tokenizer and chunk size, as `run` chunks."""
    from attnswitch.engines import ModelSpec
    from attnswitch.indexing.config import IndexConfig, chunk_tokenizer

    spec = ModelSpec.load(None)
    tokenizer = chunk_tokenizer(spec)
    return tokenizer, IndexConfig.build(spec, None, "auto", "auto", tokenizer=tokenizer).max_tokens


def _document_fields(doc: Any) -> dict[str, Any]:
    modified = datetime.fromtimestamp(doc.mtime_ns / 1e9, tz=UTC)
    return {
        "path": doc.source,
        "root": doc.root,
        "kind": doc.kind,
        "modified": modified.isoformat(),
        "sha256": doc.sha256,
    }


def _pieces(
    doc: Any, by: str, tokenizer: Any, max_tokens: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    from attnswitch.documents.chunk import chunk_document
    from attnswitch.documents.readers.blocks import BlockKind

    fields = _document_fields(doc)
    if by == "documents":
        yield doc.text, fields
        return
    if by == "chunks":
        for chunk in chunk_document(doc.text, doc.blocks, tokenizer, max_tokens=max_tokens):
            yield (
                chunk.text,
                {
                    **fields,
                    "ordinal": chunk.ordinal,
                    "start": chunk.start,
                    "end": chunk.end,
                    "heading_path": list(chunk.heading_path),
                    "location": chunk.location.to_dict(),
                },
            )
        return
    headings: list[tuple[int, str]] = []  # the heading path, as chunk._sections keeps it
    for ordinal, block in enumerate(doc.blocks):
        if block.kind is BlockKind.HEADING:
            while headings and headings[-1][0] >= (block.level or 1):
                headings.pop()
            headings.append((block.level or 1, " ".join(block.text.split())))
        yield (
            block.text,
            {
                **fields,
                "ordinal": ordinal,
                "block_kind": block.kind.value,
                "level": block.level,
                "heading_path": [t for _, t in headings],
                "location": block.location.to_dict(),
            },
        )


__all__ = ["BY", "Extraction"]
