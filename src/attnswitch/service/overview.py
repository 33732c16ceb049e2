"""Read-only views of the server's index for the page (`page`) and any client: what is
indexed, the skipped files and why, the last runs, and a chunk among its neighbours.

Every function here takes an open `indexing.index.Index` and a `shown` function (how a
server path appears in answers: `jobs.JobManager.shown`), runs on the index's thread (its
connection belongs to it: `index.SearchIndex.view`), and returns plain JSON-ready dicts that never carry the
server's absolute paths: folders are shown by `shown`, the model by its name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from attnswitch.service.errors import ServiceError

if TYPE_CHECKING:
    from attnswitch.documents.readers.mail_parts import Attachment
    from attnswitch.indexing.access import Reader
    from attnswitch.indexing.index import Index
    from attnswitch.indexing.records import ChunkRow

MAX_AROUND = 10  # neighbours on each side of a chunk in context
MAX_SKIPPED_PAGE = 200
RUNS_SHOWN = 5
# The numbers of a run's summary shown per run (its other fields name files and folders).
RUN_FIGURES = (
    "files",
    "new",
    "changed",
    "unchanged",
    "deleted",
    "skipped",
    "failed",
    "indexed",
    "chunks_encoded",
    "tokens_encoded",
    "wall_s",
    "chunks_per_s",
    "tokens_per_s",
    "engine",
    "precision",
)

Shown = Callable[[str], str]


def index_summary(index: Index, shown: Shown, reader: Reader | None = None) -> dict[str, Any]:
    """Documents, chunks, tokens, bytes of the indexed documents, the model, precision and
    engine the index was built with, how much has quick and full vectors (`coverage`,
    `records.Coverage.to_dict`, as `status --json` has it), skipped files counted by
    reason, the last runs. For a `reader` (None: an admin), the counts, folders and
    coverage of the documents it may read only, without the skipped files and runs
    (`ADMIN_ONLY_FIELDS`)."""
    if reader is not None:
        return _reader_summary(index, shown, reader)
    st = index.status()
    return {
        "documents": st.documents,
        "chunks": st.chunks,
        "tokens": st.tokens,
        "bytes": index.indexed_bytes(),
        "dim": st.dim,
        "roots": [shown(r) for r in st.roots],
        "model": _model(index.config),
        "coverage": index.coverage().to_dict(),
        "skipped": st.skipped,
        "skipped_by_reason": st.skipped_by_reason,
        "runs": [_run(r, shown) for r in index.runs(limit=RUNS_SHOWN)],
    }


def _model(config: Any) -> dict[str, Any] | None:
    if config is None:
        return None
    return {
        "name": config.model_name,
        "fingerprint": config.model_fingerprint[:12],
        "engine": config.engine,
        "precision": config.precision,
        "dim": config.dim,
        **chunking(config),
    }


def _reader_summary(index: Index, shown: Shown, reader: Reader) -> dict[str, Any]:
    """`index_summary` as `reader` sees it: what the documents it may read hold, and
    nothing that counts the others (an index of no readable document reads as empty)."""
    totals = index.totals_of(index.readable_documents(reader) or [])
    return {
        "documents": totals.documents,
        "chunks": totals.coverage.chunks,
        "tokens": totals.tokens,
        "bytes": totals.bytes,
        "dim": index.status().dim,
        "roots": [shown(r) for r in totals.roots],
        "model": _model(index.config),
        "coverage": totals.coverage.to_dict(),
    }


def chunking(config: Any) -> dict[str, Any]:
    """How the index cuts its documents (an `IndexConfig`'s): `chunking` ("blocks": at the
    text's own sections, paragraphs and sentences, no overlap; "windows": fixed token
    windows), `max_tokens` per chunk, `overlap`: the tokens neighbouring windows share (0
    for blocks, whatever the unused option held), `embed_headings`: whether the encoder
    reads each chunk's heading path."""
    return {
        "chunking": config.chunking,
        "max_tokens": config.max_tokens,
        "overlap": config.overlap if config.chunking == "windows" else 0,
        "embed_headings": config.embed_headings,
    }


def _run(run: Any, shown: Shown) -> dict[str, Any]:
    summary = run.summary or {}
    return {
        "id": run.id,
        "status": run.status,
        "root": None if run.root is None else shown(run.root),
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        **{k: summary.get(k) for k in RUN_FIGURES},
    }


def skipped_files(
    index: Index, shown: Shown, match: str = "", offset: int = 0, limit: int = 50
) -> dict[str, Any]:
    """The skipped files whose folder, path or reason contains `match` (case-insensitive),
    `limit` of them from `offset`, with the total that matched."""
    needle = match.casefold()
    rows = []
    for root, source, reason in index.status().skipped_files:
        row = {"root": shown(root), "path": source, "reason": reason}
        if not needle or any(needle in v.casefold() for v in row.values()):
            rows.append(row)
    return {
        "object": "list",
        "total": len(rows),
        "offset": offset,
        "data": rows[offset : offset + limit],
    }


def readable_chunk(index: Index, chunk_id: int, reader: Reader | None) -> ChunkRow:
    """The chunk `chunk_id`, when `reader` (None: an admin) may read its document; else,
    and when no chunk has that id, 404 `chunk_not_found`, the same words either way, so
    that nothing tells a reader a forbidden chunk exists."""
    found = index.chunks([chunk_id]).get(chunk_id)
    if found is not None and reader is not None:
        document = index.lookup(found.root, found.source)
        if document is None or not index.may_read(reader, document.id):
            found = None
    if found is None:
        raise ServiceError(
            404,
            f"chunk: expected the id of a chunk of the index, got {chunk_id}",
            code="chunk_not_found",
            param="chunk_id",
        )
    return found


def chunk_context(
    index: Index, shown: Shown, chunk_id: int, around: int, reader: Reader | None = None
) -> dict[str, Any]:
    """The chunk `chunk_id` and up to `around` chunks before and after it in its document,
    in order (404 when no chunk has that id, or `reader` may not read its document)."""
    found = readable_chunk(index, chunk_id, reader)
    rows = index.document_chunks(found.root, found.source)
    lo = max(0, found.ordinal - around)
    return {
        "root": shown(found.root),
        "path": found.source,
        "chunk_id": chunk_id,
        "ordinal": found.ordinal,
        "chunks_in_document": len(rows),
        "data": [
            {"chunk_id": r.id, "ordinal": r.ordinal, "start": r.start, "end": r.end, "text": r.text}
            for r in rows[lo : found.ordinal + around + 1]
        ],
    }


# Kinds a browser may show in place; every other file is a download. HTML and SVG never
# render from here: a document's script would run on the service's origin.
INLINE_TYPES = frozenset(
    {
        "application/pdf",
        "text/plain",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/tiff",
        "image/webp",
    }
)


def chunk_file(
    index: Index, shown: Shown, chunk_id: int, reader: Reader | None = None
) -> dict[str, Any]:
    """What the index recorded of the file of the document that holds chunk `chunk_id`:
    {"root", "source" (where a store records it), "size", "mtime_ns", "sha256" (None: not
    recorded), "label" (how answers name it), "name", "media_type", "inline", "attachment"
    (the name of the mail attachment the chunk lies in, opened alone: `mail_parts.
    attachment_name`; None: the whole file)}; for
    `open_chunk_file`, never an answer (it holds the server's path). 404 when no chunk has
    that id (or `reader` may not read its document), `file_changed` when its document is no longer recorded under its folder as it
    resolves now (the folder swapped for a link, or the document forgotten meanwhile)."""
    import mimetypes
    from pathlib import PurePosixPath

    from attnswitch.documents.readers.mail_parts import attachment_name

    found = readable_chunk(index, chunk_id, reader)
    label = f"{shown(found.root)}/{found.source}"
    document = index.lookup(found.root, found.source)
    if document is None:
        raise _file_changed(chunk_id, label, "its folder or its record changed")
    name = PurePosixPath(found.source).name
    media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return {
        "root": found.root,
        "source": found.source,
        "size": document.size,
        "mtime_ns": document.mtime_ns,
        "sha256": document.sha256,
        "label": label,
        "name": name,
        "media_type": media_type,
        "inline": media_type in INLINE_TYPES,
        "attachment": attachment_name(found.source, found.location),
    }


def open_chunk_file(found: dict[str, Any], chunk_id: int) -> BinaryIO:
    """The file `found` (`chunk_file`) of chunk `chunk_id`, open, when it is still the file
    indexed (`indexed_file.open_as_indexed`: found without following a link, of the recorded
    size, modification time and SHA-256); else 404, `file_not_found` when nothing is there,
    `file_changed` when something else is. Reads the whole file to hash it: call it off the
    event loop."""
    from attnswitch.service.indexed_file import FileChanged, open_as_indexed

    try:
        return open_as_indexed(
            found["root"], found["source"], found["size"], found["mtime_ns"], found["sha256"]
        )
    except FileChanged as exc:
        raise _file_changed(chunk_id, found["label"], str(exc)) from None
    except OSError:  # gone (FileNotFoundError, NotADirectoryError), or an I/O error
        raise ServiceError(
            404,
            f"file: expected the indexed file of chunk {chunk_id} "
            f"({found['label']}), got none there now (moved, deleted or "
            "unreadable)",
            code="file_not_found",
            param="chunk_id",
        ) from None


def read_attachment(file: BinaryIO, found: dict[str, Any]) -> Attachment | None:
    """The attachment `found["attachment"]` (`chunk_file`) of the message open in `file`
    (`open_chunk_file`: checked to be the file indexed), read from that descriptor (the
    `found["size"]` bytes indexed); None when the message has no attachment of that name
    (the whole file is served instead). Parses the message: call it off the event loop."""
    import os

    from attnswitch.documents.readers.mail_parts import find_attachment

    data = os.pread(file.fileno(), found["size"], 0)
    return find_attachment(data, found["attachment"])


def attachment_shown_inline(attachment: Attachment) -> bool:
    """Whether an attachment is shown in place: by the rule of whole files
    (`INLINE_TYPES`), on its own media type."""
    return attachment.media_type in INLINE_TYPES


def _file_changed(chunk_id: int, label: str, how: str) -> ServiceError:
    return ServiceError(
        404,
        f"file: expected the indexed file of chunk {chunk_id} ({label}) "
        f"as it was indexed, got another there now ({how})",
        code="file_changed",
        param="chunk_id",
    )
