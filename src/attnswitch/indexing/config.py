"""The index config: what a store's vectors were made with, so that runs and searches agree.

An `IndexConfig` names the model (where it is, a fingerprint of its files), the engine and
precision that encoded, and the chunking. It is kept in the store (meta key "index") by
`attnswitch run`; `attnswitch search` reads it back to encode queries the same way, and
refuses when the model on disk is no longer the one the index was built with.

`fingerprint` is the short hash of everything that changes a document's chunks or vectors
(model files, pooling, truncation, precision, chunk size, overlap). The engine is recorded
but not hashed: every engine's vectors match torch float32 within the parity that
`engines.autopick` checks, so a change of engine does not re-encode. Each stored
document carries the fingerprint it was indexed under, so changing any of these makes the
next run re-encode, and leaves everything else alone.

The model fingerprint is `engines.model.model_fingerprint`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from attnswitch.engines.model import model_fingerprint
from attnswitch.errors import AttnswitchError, ConfigError
from attnswitch.provenance import provenance_key

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from attnswitch.engines.model import ModelSpec

META_KEY = "index"
DEFAULT_OVERLAP = 32
DEFAULT_CHUNKING = "blocks"
# Whether a chunk's heading path is embedded with its text: measured by
# benchmarks/known_item_structure.py (docs/architecture.md, "Structure kept").
DEFAULT_EMBED_HEADINGS = True
# What a config stored by a version without these fields was made with.
_LEGACY = MappingProxyType({"chunking": "windows", "embed_headings": False})


class IndexMismatchError(AttnswitchError, ValueError):
    """A store's vectors were made with another model than the one asked for."""


def special_tokens(tokenizer: Tokenizer) -> int:
    """How many special tokens the tokenizer adds to one text ([CLS] and [SEP]: 2)."""
    processor = tokenizer.post_processor
    if processor is not None:
        return int(processor.num_special_tokens_to_add(False))
    return len(tokenizer.encode("a").ids) - len(tokenizer.encode("a", add_special_tokens=False).ids)


def chunk_tokenizer(spec: ModelSpec) -> Tokenizer:
    """The model's tokenizer for chunking: without truncation, so whole documents count."""
    tok: Tokenizer = spec.tokenizer()
    tok.no_truncation()
    return tok


@dataclass(frozen=True)
class IndexConfig:
    """model: the model folder as the user named it (None: the packaged default model);
    model_name: a readable name; model_fingerprint: see `model_fingerprint`. max_tokens:
    text tokens per chunk (special tokens excluded); overlap: tokens shared by neighbours
    (windows only). chunking: "blocks" or "windows" (`chunk.CHUNKINGS`); embed_headings:
    the encoder reads each chunk's heading path before its text. languages: those its
    model's card declares (`ModelSpec.languages`; None: any), which hybrid search trusts
    the vectors for."""

    model: str | None
    model_name: str
    model_fingerprint: str
    dim: int
    pooling: str
    normalize: bool
    max_seq_length: int
    engine: str
    precision: str
    max_tokens: int
    overlap: int
    chunking: str = DEFAULT_CHUNKING
    embed_headings: bool = DEFAULT_EMBED_HEADINGS
    languages: tuple[str, ...] | None = None

    @classmethod
    def build(
        cls,
        spec: ModelSpec,
        model: str | os.PathLike[str] | None,
        engine: str,
        precision: str,
        max_tokens: int | None = None,
        overlap: int = DEFAULT_OVERLAP,
        tokenizer: Tokenizer | None = None,
        chunking: str = DEFAULT_CHUNKING,
        embed_headings: bool = DEFAULT_EMBED_HEADINGS,
    ) -> IndexConfig:
        """The config for `spec` (a loaded `ModelSpec`). `max_tokens` defaults to the model's
        limit minus its special tokens, and may not exceed it."""
        limit = spec.max_seq_length - special_tokens(tokenizer or spec.tokenizer())
        if max_tokens is None:
            max_tokens = limit
        if not 1 <= max_tokens <= limit:
            raise ConfigError(
                f"max_tokens: expected 1 to {limit} (the model's "
                f"{spec.max_seq_length} minus special tokens), got {max_tokens}"
            )
        if not 0 <= overlap < max_tokens:
            raise ConfigError(
                f"overlap: expected 0 <= overlap < max_tokens ({max_tokens}), got {overlap}"
            )
        from attnswitch.documents.chunk import CHUNKINGS

        if chunking not in CHUNKINGS:
            raise ValueError(f"chunking: expected one of {', '.join(CHUNKINGS)}, got {chunking!r}")
        path = Path(spec.path)
        name = path.parent.name if path.name == "model" else path.name
        return cls(
            model=None if model is None else str(Path(model).resolve()),
            model_name=name,
            model_fingerprint=model_fingerprint(path),
            dim=spec.dim,
            pooling=spec.pooling,
            normalize=spec.normalize,
            max_seq_length=spec.max_seq_length,
            engine=engine,
            precision=precision,
            max_tokens=int(max_tokens),
            overlap=int(overlap),
            chunking=chunking,
            embed_headings=bool(embed_headings),
            languages=getattr(spec, "languages", None),
        )

    @property
    def fingerprint(self) -> str:
        fields = asdict(self)
        # where it lives is not what it is; engines agree within the parity of
        # engines.autopick, so switching engines does not re-encode an index
        # (the languages are read from the model's card, which its fingerprint leaves out)
        for key in ("model", "model_name", "dim", "engine", "languages"):
            fields.pop(key)
        # A config with the chunking of versions before these fields hashes as they did, so
        # their stores stay fresh under it.
        for key, legacy in _LEGACY.items():
            if fields[key] == legacy:
                fields.pop(key)
        return provenance_key(fields, 16)

    @property
    def vector_fingerprint(self) -> str:
        """The short hash of what makes the vector of one text (model files, pooling,
        normalisation, sequence length, precision): vectors are reusable across configs
        that share it (`vector_key`)."""
        fields = {
            k: getattr(self, k)
            for k in ("model_fingerprint", "pooling", "normalize", "max_seq_length", "precision")
        }
        return provenance_key(fields, 16)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> IndexConfig:
        """A stored config; one stored before `chunking` and `embed_headings` existed gets
        the values it was made with (fixed windows, no heading path)."""
        fields = {**_LEGACY, **json.loads(text)}
        if fields.get("languages") is not None:
            fields["languages"] = tuple(fields["languages"])
        return cls(**fields)

    def describe(self) -> str:
        return (
            f"{self.model_name} ({self.model or 'default model'}, "
            f"{self.model_fingerprint[:12]}), {self.engine} engine, {self.precision}"
        )


class MetaStore(Protocol):
    """A store's meta table, where the config is kept (`Store.meta` has it)."""

    def meta(self, key: str) -> str | None: ...


def stored_config(store: MetaStore) -> IndexConfig | None:
    """The config kept in `store`, or None when it has none."""
    text = store.meta(META_KEY)
    return None if text is None else IndexConfig.from_json(text)


def check_same_model(
    stored: IndexConfig | None, wanted: IndexConfig, stored_dim: int | None, where: str
) -> None:
    """Refuse to mix models in one store: vectors of two models are not comparable.
    `stored_dim` is the dimension of the vectors in the store (None: it has none yet)."""
    if stored_dim is None:
        return
    if stored_dim != wanted.dim:
        raise IndexMismatchError(
            f"model: expected vectors of dimension {stored_dim} (the store's, in {where}), "
            f"got {wanted.dim} from {wanted.model_name}; use another --db for this model"
        )
    if stored is None:
        raise IndexMismatchError(
            f"store: expected an index made by `attnswitch run`, got vectors of an unknown "
            f"model in {where}; use another --db"
        )
    if stored.model_fingerprint != wanted.model_fingerprint or stored.dim != wanted.dim:
        raise IndexMismatchError(
            f"model: expected the index's model {stored.describe()}, got "
            f"{wanted.model_name} ({wanted.model or 'default model'}, "
            f"{wanted.model_fingerprint[:12]}); use another --db for another model"
        )
