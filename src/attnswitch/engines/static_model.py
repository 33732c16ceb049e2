"""A static model made from a transformer: one vector per token of its vocabulary, a text's
vector the normalised mean of its tokens' vectors. It encodes a chunk in microseconds where
the transformer takes milliseconds, and finds far less alone; the index uses it for the
"quick" vectors that make a folder searchable by meaning before the transformer has seen it
(docs/architecture.md, "Two passes").

Made as model2vec's `distill` makes one: each token of the vocabulary, alone between the
model's special tokens, through the model itself (its pooling and normalisation), then
weighted by its estimated rarity, smooth inverse frequency over a Zipf law on the token's
rank in the vocabulary (`SIF_COEFFICIENT / (SIF_COEFFICIENT + 1 / (rank + 1))`), so that
common tokens weigh less in a text's mean. The weights are folded into the vectors, as
model2vec's own models carry them. Hand-written: model2vec's `distill` needs transformers
below 5.4 and its own copy of the model in torch; this runs on the engine that encodes the
index (any engine, fp32), in seconds (29,523 tokens of all-MiniLM-L6-v2: 24 s on 2 cores).
The model is saved in model2vec's format and encoded by model2vec's `StaticModel`.

Made once per model: an `export.Artifacts` cache entry under the model's provenance key
(its files' fingerprint), the method and the format, so every process (a run, a search,
the service) finds the same vectors, and an upgrade of the method rebuilds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from attnswitch.engines.base import Encoder
    from attnswitch.engines.model import ModelSpec

FORMAT = 1  # bump when the made vectors change
METHOD = "distill-sif-zipf"
SIF_COEFFICIENT = 1e-4
# Texts per call to model2vec's encoder: bounds the token id lists held at once.
ENCODE_BATCH = 1024


def static_key(spec: ModelSpec) -> dict[str, Any]:
    """What a static model depends on: the model's files, its pooling, the method."""
    from attnswitch.engines.model import model_fingerprint

    return {
        "model": model_fingerprint(spec.path),
        "pooling": spec.pooling,
        "normalize": spec.normalize,
        "engine": "static",
        "method": METHOD,
        "sif": SIF_COEFFICIENT,
        "static_format": FORMAT,
    }


def static_fingerprint(spec: ModelSpec) -> str:
    """The provenance key of the model's static model (what an index records, so that its
    quick vectors and a query's are made by the same one)."""
    from attnswitch.provenance import provenance_key

    return provenance_key(static_key(spec))


def special_frame(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The token ids the model's tokenizer puts before and after a text's own tokens
    (BERT: `[CLS]` and `[SEP]`; a model without special tokens: none)."""
    bare = tokenizer.encode("a", add_special_tokens=False).ids
    framed = tokenizer.encode("a").ids
    for start in range(len(framed) - len(bare) + 1):
        if framed[start : start + len(bare)] == bare:
            return framed[:start], framed[start + len(bare) :]
    raise ValueError(
        f"tokenizer: expected a text's tokens inside its special tokens, got {framed} around {bare}"
    )


def distill(encoder: Encoder) -> tuple[np.ndarray, Any]:
    """The static vectors of `encoder`'s model, float32 `[vocabulary, dim]` (special
    tokens' rows zero, every other row weighted by its rarity), and the tokenizer that
    maps a text to rows (no padding, no truncation)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(encoder.spec.tokenizer().to_str())
    tokenizer.no_truncation()
    tokenizer.no_padding()
    before, after = special_frame(tokenizer)
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    vocabulary = tokenizer.get_vocab()
    ids = sorted(i for token, i in vocabulary.items() if token not in special)
    size = max(vocabulary.values()) + 1
    vectors = np.zeros((size, encoder.dim), np.float32)
    vectors[ids] = encoder.encode_ids([[*before, i, *after] for i in ids])
    rank = np.arange(size, dtype=np.float64)
    weights = SIF_COEFFICIENT / (SIF_COEFFICIENT + 1.0 / (rank + 1.0))
    vectors *= weights.astype(np.float32)[:, None]
    return vectors, tokenizer


def build(encoder: Encoder, folder: Path) -> None:
    """Distill `encoder`'s model and save it in model2vec's format in `folder`."""
    from model2vec import StaticModel

    vectors, tokenizer = distill(encoder)
    model = StaticModel(vectors, tokenizer, normalize=True, max_length=None)
    model.save_pretrained(folder)


@dataclass
class StaticEncoder:
    """A loaded static model: `encode(texts)` gives float32 `[len(texts), dim]`, each row
    unit length (zero for a text with no token the model knows). `fingerprint` is its
    provenance key."""

    model: Any  # model2vec.StaticModel
    fingerprint: str

    @property
    def dim(self) -> int:
        return int(self.model.dim)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        out = self.model.encode(
            texts, batch_size=ENCODE_BATCH, use_multiprocessing=False, max_length=None
        )
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)


def load_static(spec: ModelSpec, encoder: Encoder | None = None) -> tuple[StaticEncoder, str]:
    """The static model of `spec`'s model, made first when the cache has none (by
    `encoder`, or the model on its default engine in fp32), and what happened ("cached" or
    "built (...)", as `export.Artifacts.ensure` says; "built, not cached (...)" when the
    cache could not be written)."""
    from model2vec import StaticModel
    from safetensors import SafetensorError

    from attnswitch.engines.export import Artifacts
    from attnswitch.provenance import provenance_key

    def source() -> Encoder:
        from attnswitch.engines import get_engine

        return encoder or get_engine(spec.path, precision="fp32")

    key = static_key(spec)
    try:
        folder, how = Artifacts(key).ensure(lambda folder: build(source(), folder))
    except (OSError, SafetensorError) as exc:
        # The cache could not be written (a full disk, a file-size limit, a read-only
        # cache): the same model, made in memory for this process; the run goes on and
        # says what failed where it writes its own files.
        vectors, tokenizer = distill(source())
        model = StaticModel(vectors, tokenizer, normalize=True, max_length=None)
        return StaticEncoder(model, provenance_key(key)), f"built, not cached ({exc})"
    model = StaticModel.from_pretrained(folder, normalize=True, force_download=False)
    return StaticEncoder(model, provenance_key(key)), how


__all__ = [
    "StaticEncoder",
    "distill",
    "load_static",
    "special_frame",
    "static_fingerprint",
    "static_key",
]
