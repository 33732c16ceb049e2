"""The store's records and shared rules: the rows a store returns (`StoredDocument`,
`ChunkRow`, `RunRecord`, `StoreStatus`, `SyncPlan`), what a chunk written to it must offer
(`ChunkLike`, `ChunkRecord`), the keys it matches on (`vector_key`, `root_key`, freshness)
and the limits both stores share. Imported by the `Store` protocol and both stores."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from attnswitch.indexing.store_errors import (
    StoreInputError,
)

if TYPE_CHECKING:
    from attnswitch.documents.ingest import SourceFile

# The ANN search beam (`ef_search`, the candidates a graph search keeps) of both stores'
# HNSW indexes by default: at 1M clustered 384-d chunks it gives recall@10 0.99 against
# exact search in each (docs/results/search.md, "The search beam"); 128 gave 0.96.
EF_SEARCH = 512
# The widest beam a store or a request may ask for: pgvector's own limit, kept for both
# stores so that one request's cost stays bounded.
MAX_EF_SEARCH = 1000
# The most hits one search returns, in every interface (`/v1/search`'s `k`, `search -k`).
MAX_K = 100
# A chunk id as the stores keep it: a SQLite rowid or a PostgreSQL bigint, 1 .. 2^63 - 1
# (a larger one in a path used to overflow inside the store and answer 500).
MAX_CHUNK_ID = 2**63 - 1
# A keyword query uses at most this many of its words.
MAX_QUERY_TERMS = 64
RUN_STATUSES = ("running", "completed", "failed", "interrupted")
# Seconds a run waits for another process's run lock before it is refused as busy.
RUN_LOCK_WAIT_S = 5.0
# The store schema's version (a SQLite file's user_version; a PostgreSQL store is upgraded
# by what its catalog lacks, `postgres_schema.upgrade`).
SCHEMA_VERSION = 13
# The element of a stored vector, in both stores: IEEE float16, rounded to nearest from the
# L2-normalised float32 vector (SQLite: a BLOB of little-endian float16; PostgreSQL:
# pgvector's `halfvec(dim)`; the SQLite store's HNSW graph: usearch's "f16"). Half the
# bytes of float32 for the same search quality: dense and hybrid MRR@10 never below
# float32's on any kind of query of both benchmark corpora, exact and through the graph;
# int8 with a scale per vector lost 0.0051 on one kind and the demo query's first place, and
# pgvector has no int8 type (docs/results/vector_precision.md, docs/architecture.md
# "Vectors on disk: float16").
VECTOR_DTYPE = "float16"
# The chunk columns that schema version 3 added: heading path (a JSON array of the
# headings' titles, outermost first), location (a JSON object, `Location.to_dict`) and
# vector key (`vector_key`, NULL when not known).
CHUNK_STRUCTURE_COLUMNS = ("heading_path", "location", "vector_key")


class ChunkLike(Protocol):
    """What the store needs of a chunk (`chunk.Chunk` has it): its text, its token count
    and its character span `[start, end)` in its document's text. A chunk's ordinal is
    its position in the sequence given to `write_document`. Optional: `heading_path`
    (tuple of str), `location` (`readers.blocks.Location`) and `encoder_text` (what the
    encoder read, for the vector key; `text` when absent). Read-only: a frozen dataclass
    has it."""

    @property
    def text(self) -> str: ...
    @property
    def n_tokens(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


@dataclass(frozen=True)
class ChunkRecord:
    """A plain chunk, for callers without a chunk type of their own."""

    text: str
    n_tokens: int
    start: int
    end: int
    heading_path: tuple[str, ...] = ()
    location: Any = None


def vector_key(vector_fingerprint: str, encoder_text: str) -> str:
    """What identifies a stored vector: the SHA-256 (hex) of the config's vector
    fingerprint (`config.IndexConfig.vector_fingerprint`), a newline and the exact text
    the encoder read. A chunk whose key is stored has its vector already: a run reuses
    it rather than encode the text again."""
    return hashlib.sha256(f"{vector_fingerprint}\n{encoder_text}".encode()).hexdigest()


@dataclass(frozen=True)
class StoredDocument:
    """A document row as stored."""

    id: int
    root: str
    source: str
    sha256: str | None
    size: int
    mtime_ns: int
    status: str
    reason: str | None
    config: str
    n_chunks: int


@dataclass(frozen=True)
class SyncPlan:
    """What a run must do for `root`, from a listing of its files (`ingest.scan`): the files
    to read (`to_read`, with their stored rows in `stored`, None where not stored), the fresh
    ones it leaves alone (`fresh`, see `is_fresh_row`) and the stored sources that left the
    root (`deleted`). A file read is then `classify`-ed: new, changed, unchanged or skipped."""

    root: str
    to_read: tuple[SourceFile, ...] = ()
    fresh: tuple[SourceFile, ...] = ()
    deleted: tuple[str, ...] = ()
    stored: dict[str, StoredDocument | None] = field(default_factory=dict)


def is_fresh_row(row: StoredDocument | None, entry: SourceFile, config: str) -> bool:
    """The freshness rule: `entry` need not be read again when its stored `row` is indexed
    under `config` at the file's current size and mtime (a skipped file is read again: its
    reason may be gone). A False only means "read and hash it"; `classify` decides then."""
    return (
        row is not None
        and row.status == "indexed"
        and row.config == config
        and row.size == entry.size
        and row.mtime_ns == entry.mtime_ns
        and entry.error is None
    )


def indexed_sha(row: StoredDocument | None, config: str) -> str | None:
    """The content hash a read document must have to be "unchanged": the stored one when
    `row` is indexed under `config`, else None (nothing matches)."""
    if row is None or row.status != "indexed" or row.config != config:
        return None
    return row.sha256


@dataclass(frozen=True)
class RunRecord:
    """A row of the runs table: one `run.run` (or Ray run) on this store and its outcome."""

    id: int
    root: str | None
    config: str | None
    pid: int
    started_at: float
    ended_at: float | None
    status: str
    counts: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoreStatus:
    """`skipped_by_reason` counts skipped files per category; `skipped_files` lists
    (root, source, reason) for each, sorted. `copies`: indexed documents whose content
    (hash) another indexed document has too, stored once more without being encoded."""

    path: str
    documents: int
    chunks: int
    tokens: int
    skipped: int
    skipped_by_reason: dict[str, int]
    skipped_files: tuple[tuple[str, str, str], ...]
    dim: int | None
    roots: tuple[str, ...]
    last_run: RunRecord | None
    copies: int = 0


@dataclass(frozen=True)
class Coverage:
    """How much of an index has each kind of vector (docs/architecture.md, "Two passes"):
    `chunks` stored, `quick` of them with a quick vector (the static model's), `full` with
    a full vector (the transformer's); `unencoded_tokens`, the model tokens of the chunks
    without a full vector (the full pass's work). A search by meaning finds every chunk
    that has either."""

    chunks: int
    quick: int
    full: int
    unencoded_tokens: int = 0

    @property
    def quick_fraction(self) -> float:
        return self.quick / self.chunks if self.chunks else 1.0

    @property
    def full_fraction(self) -> float:
        return self.full / self.chunks if self.chunks else 1.0

    @property
    def unencoded(self) -> int:
        """Chunks still without a full vector (the full pass's work)."""
        return self.chunks - self.full

    def to_dict(self) -> dict[str, Any]:
        """`status --json`'s `coverage`: counts, and the fractions of chunks."""
        return {
            "chunks": self.chunks,
            "quick": round(self.quick_fraction, 4),
            "full": round(self.full_fraction, 4),
            "quick_chunks": self.quick,
            "full_chunks": self.full,
            "unencoded_tokens": self.unencoded_tokens,
        }


@dataclass(frozen=True)
class DocumentTotals:
    """What a set of indexed documents holds (a reader's view of the index: only the
    documents it may read are counted): `documents`, model `tokens`, `bytes` of their
    files as read, the folders (`roots`) they lie in, and their chunks' `coverage`."""

    documents: int
    tokens: int
    bytes: int
    roots: tuple[str, ...]
    coverage: Coverage


@dataclass(frozen=True)
class Unencoded:
    """A stored chunk without its full vector: its id, the text the encoder reads
    (`prefix` + `text`, `Chunk.encoder_text`), its vector key (None: not known) and its
    model tokens."""

    id: int
    encoder_text: str
    vector_key: str | None
    n_tokens: int


@dataclass(frozen=True)
class ChunkRow:
    """A stored chunk with its document's root and source. `heading_path`: the titles of
    the headings it lies under, outermost first; `location`: where it lies in its file
    (`Location.to_dict`: page, page_end, slide, sheet, rows, part, cell; {} when not
    known); `language`: its language (`analyzer.detect_language`, "" for none)."""

    id: int
    root: str
    source: str
    ordinal: int
    text: str
    n_tokens: int
    start: int
    end: int
    heading_path: tuple[str, ...] = ()
    location: dict[str, Any] = field(default_factory=dict)
    language: str = ""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ChunkRow:
        """A row of `CHUNK_SELECT` (the JSON columns parsed)."""
        chunk_id, root, source, ordinal, text, n_tokens, start, end, path, location, language = row
        return cls(
            chunk_id,
            root,
            source,
            ordinal,
            text,
            n_tokens,
            start,
            end,
            tuple(json.loads(path or "[]")),
            json.loads(location or "{}"),
            language or "",
        )


# The columns a ChunkRow is read from (chunks c joined with documents d).
CHUNK_SELECT = (
    "c.id, d.root, d.source, c.ordinal, c.text, c.n_tokens, c.char_start, "
    "c.char_end, c.heading_path, c.location, c.language"
)


# The last version whose upgrade changes the chunks (what `MIGRATED` tells).
CHUNKS_CHANGED_IN = 4
MIGRATED = (
    "{where}: index upgraded to schema version {version} (chunks get a heading "
    "path and a location); the next run re-chunks its documents and reuses every "
    "vector whose text is unchanged"
)


def keyword_terms(text: str) -> list[str]:
    """The words of a keyword query (letters, digits, underscores), at most
    `MAX_QUERY_TERMS`; each store turns them into its own query syntax."""
    return [t for t in re.findall(r"\w+", text) if any(c.isalnum() for c in t)][:MAX_QUERY_TERMS]


def check_ef_search(ef: object) -> int:
    """`ef` as an ANN search beam: an integer from 1 to `MAX_EF_SEARCH`, else
    `StoreInputError` naming it."""
    if (
        isinstance(ef, bool)
        or not isinstance(ef, Integral)  # numpy's integers too, without importing numpy
        or not (1 <= int(ef) <= MAX_EF_SEARCH)
    ):
        raise StoreInputError("ef_search", f"an integer from 1 to {MAX_EF_SEARCH}", repr(ef))
    return int(ef)


def root_key(root: str | os.PathLike[str]) -> str:
    """How a root is stored: its absolute, resolved path (as `ingest.scan` records it)."""
    return str(Path(root).resolve())
