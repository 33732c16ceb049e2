"""A run's options, each defined once: `ReadOptions` (which files are read and how),
`ChunkOptions` (how their text is cut), `EncodeOptions` (how the chunks are embedded), and
`RunOptions`, made of the three plus the run's own (`hourly_usd`).

The front ends build them from one flat set of keywords, `RunOptions.of(**flat)`: the
`run` and `watch` commands' options (`cli/pipeline.py`), the Python call
`attnswitch.index(folder, db, **options)` (`jobs/api.py`) and the service's jobs
(`service/runtime.py`). Each part checks its values when made; a bad one raises
`ConfigError` reading f"{name}: expected ..., got ..." (`name`: the flat keyword).

    options = RunOptions.of(max_tokens=64, ocr_max_pages=3)
    options.read.ocr_max_pages, options.chunk.max_tokens, options.encode.engine

The stages read their part: the readers `read` (`read_pool`, `run.read_ahead`,
`ray_run.read_row`), chunking `chunk` (through the index's config, `indexing.config`),
the encoders `encode` (`encode.load_encoder`, `choose.choose`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from attnswitch.documents.ingest import DEFAULT_MAX_BYTES
from attnswitch.documents.readers.blocks import DEFAULT_OCR_MAX_PAGES
from attnswitch.documents.rules import FileRules, RulesChange
from attnswitch.errors import ConfigError
from attnswitch.indexing.config import DEFAULT_CHUNKING, DEFAULT_EMBED_HEADINGS, DEFAULT_OVERLAP

DEFAULT_CHUNKS_PER_CALL = 128
# The most seconds one file's extraction may take in a read worker (`read_pool`): a scanned
# PDF of about 250 pages at Tesseract's 2.4 s a page on one core; the readers'
# `readers.blocks.ReadOptions.ocr_timeout_s` bounds each page.
DEFAULT_READ_TIMEOUT_S = 600.0
# Padded (length-sorted) batches by default: on CPU packed batches were no faster (see
# docs/results/e2e_vs_sentence_transformers.md); packed pays off where a varlen kernel
# (flash-attn) serves them.
LAYOUTS = ("padded", "packed")


@dataclass(frozen=True)
class ReadOptions:
    """Which files of the root are read, and how. max_bytes: larger files are skipped;
    include_hidden: hidden files and folders are listed too; rules: which files are indexed,
    stored with the index for the root: a `rules.RulesChange` (patterns added to the stored
    rules, ignore files set on or off, includes replaced, or all cleared first), a whole
    `rules.FileRules` (replacing the stored rules), or None (the rules stored for it by an
    earlier run, else the defaults); ocr: recognise scanned PDF pages and images with Tesseract (`readers.ocr`);
    ocr_max_pages: the most pages (scanned PDF pages, image frames) of one file that OCR
    recognises, the first ones, the rest counted in the document's `pages_failed`;
    ocr_languages: Tesseract's language packs OCR reads with ("eng+deu" or "eng,deu"; None:
    the system locale's language and English, those installed), a page in a script they do
    not read taking its script's packs (`readers.ocr_languages`); read_workers: processes
    that read and extract files beside the encoder (None: `read_pool.default_read_workers()`,
    half the CPUs; 0: one thread of the run's process, in order); read_timeout_s: the most
    one file's extraction may take in a worker (then it is skipped, "extraction timed out").

    Not the readers' own per-file `readers.blocks.ReadOptions`: `load_kwargs` gives the
    arguments of `ingest.load`, which makes that one for each file."""

    max_bytes: int = DEFAULT_MAX_BYTES
    include_hidden: bool = False
    rules: FileRules | RulesChange | None = None
    ocr: bool = True
    ocr_max_pages: int = DEFAULT_OCR_MAX_PAGES
    ocr_languages: str | None = None
    read_workers: int | None = None
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ConfigError(f"max_bytes: expected >= 1, got {self.max_bytes}")
        if self.read_workers is not None and self.read_workers < 0:
            raise ConfigError(f"read_workers: expected >= 0, got {self.read_workers}")
        if not self.read_timeout_s > 0:
            raise ConfigError(f"read_timeout_s: expected > 0, got {self.read_timeout_s}")
        if self.ocr_max_pages < 1:
            raise ConfigError(f"ocr_max_pages: expected >= 1, got {self.ocr_max_pages}")
        if self.ocr_languages is not None:
            from attnswitch.documents.readers.ocr_languages import parse_languages

            try:
                parse_languages(self.ocr_languages)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None

    def load_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `ingest.load` for one file read with these options."""
        return {
            "max_bytes": self.max_bytes,
            "ocr": self.ocr,
            "ocr_max_pages": self.ocr_max_pages,
            "ocr_languages": self.ocr_languages,
        }


@dataclass(frozen=True)
class ChunkOptions:
    """How a document's text is cut (`chunk.chunk_document`). max_tokens: text tokens per
    chunk (None: the model's limit); overlap: tokens shared by neighbouring chunks (windows
    only); chunking: "blocks" or "windows" (`chunk.CHUNKINGS`); embed_headings: the encoder
    reads each chunk's heading path before its text. The index's config
    (`indexing.config.IndexConfig`) records what they resolve to."""

    max_tokens: int | None = None
    overlap: int = DEFAULT_OVERLAP
    chunking: str = DEFAULT_CHUNKING
    embed_headings: bool = DEFAULT_EMBED_HEADINGS

    def __post_init__(self) -> None:
        from attnswitch.documents.chunk import CHUNKINGS

        if self.chunking not in CHUNKINGS:
            raise ConfigError(
                f"chunking: expected one of {', '.join(CHUNKINGS)}, got {self.chunking!r}"
            )


@dataclass(frozen=True)
class EncodeOptions:
    """How chunks are embedded. model: a model folder (None: the packaged default); engine:
    "auto" or an engine's name (`engines.engine_names()`); precision: "auto" (the measured
    pick, see `engines.explain_precision`), "fp32", "bf16" or "int8"; layout: "padded"
    (length-sorted token-budget batches) or "packed" (one row per batch with `cu_seqlens`,
    torch engine only); batch_tokens: the engine's padded-token budget per batch (None: its
    default); chunks_per_call: chunks gathered across documents for one encode call;
    quick: the quick pass only (docs/architecture.md, "Two passes"): chunks are stored with
    their quick vectors (the static model's) and no full vector, which a later run without
    `quick` (the full pass) or the searches that find them encode."""

    model: str | None = None
    engine: str = "auto"
    precision: str = "auto"
    layout: str = "padded"
    batch_tokens: int | None = None
    chunks_per_call: int = DEFAULT_CHUNKS_PER_CALL
    quick: bool = False

    def __post_init__(self) -> None:
        from attnswitch.engines import engine_names
        from attnswitch.engines.base import check_precision_choice

        check_precision_choice(self.precision)
        if self.engine not in engine_names():
            raise ConfigError(
                f"engine: expected one of {', '.join(engine_names())}, got {self.engine!r}"
            )
        if self.layout not in LAYOUTS:
            raise ConfigError(f"layout: expected one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if self.chunks_per_call < 1:
            raise ConfigError(f"chunks_per_call: expected >= 1, got {self.chunks_per_call}")


# the parts of `RunOptions` by field name, in the order `of` makes (and checks) them
PARTS = MappingProxyType({"encode": EncodeOptions, "chunk": ChunkOptions, "read": ReadOptions})


@dataclass(frozen=True)
class RunOptions:
    """A run's options: `read`, `chunk` and `encode` (see each), and hourly_usd: the
    device's price for the summary's cost per million tokens (None: `observe.cost` looks it
    up). `of(**flat)` makes them from one flat set of keywords (each field of the parts by
    its own name); `flat()` is the inverse; `replace(**flat)` changes some."""

    read: ReadOptions = field(default_factory=ReadOptions)
    chunk: ChunkOptions = field(default_factory=ChunkOptions)
    encode: EncodeOptions = field(default_factory=EncodeOptions)
    hourly_usd: float | None = None

    def __post_init__(self) -> None:
        if self.hourly_usd is not None and not self.hourly_usd >= 0:
            raise ConfigError(f"hourly_usd: expected >= 0, got {self.hourly_usd}")

    @classmethod
    def of(cls, **flat: Any) -> RunOptions:
        """The options named by `flat` (the fields of `ReadOptions`, `ChunkOptions`,
        `EncodeOptions` and `hourly_usd`), the others at their defaults. An unknown keyword
        raises TypeError naming it, as a call's does; a bad value ConfigError."""
        own = {f.name for f in dataclasses.fields(cls) if f.name not in PARTS}
        parts: dict[str, dict[str, Any]] = {name: {} for name in PARTS}
        top: dict[str, Any] = {}
        for key, value in flat.items():
            part = _PART_OF.get(key)
            if part is not None:
                parts[part][key] = value
            elif key in own:
                top[key] = value
            else:
                raise TypeError(f"RunOptions.of() got an unexpected keyword argument {key!r}")
        return cls(**{name: PARTS[name](**parts[name]) for name in PARTS}, **top)

    @classmethod
    def flat_names(cls) -> tuple[str, ...]:
        """Every keyword `of` takes."""
        own = tuple(f.name for f in dataclasses.fields(cls) if f.name not in PARTS)
        return (*_PART_OF, *own)

    def flat(self) -> dict[str, Any]:
        """The options as `of`'s keywords: `RunOptions.of(**o.flat()) == o`."""
        out: dict[str, Any] = {}
        for name in PARTS:
            part = getattr(self, name)
            out.update({f.name: getattr(part, f.name) for f in dataclasses.fields(part)})
        out.update(
            {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in PARTS}
        )
        return out

    def replace(self, **flat: Any) -> RunOptions:
        """These options with the flat keywords `flat` changed (checked again)."""
        return RunOptions.of(**{**self.flat(), **flat})


# flat keyword -> the part (a `RunOptions` field) that holds it; one part per name
_PART_OF = MappingProxyType(
    {f.name: name for name, part in PARTS.items() for f in dataclasses.fields(part)}
)

__all__ = [
    "DEFAULT_CHUNKS_PER_CALL",
    "DEFAULT_READ_TIMEOUT_S",
    "LAYOUTS",
    "ChunkOptions",
    "EncodeOptions",
    "ReadOptions",
    "RunOptions",
]
