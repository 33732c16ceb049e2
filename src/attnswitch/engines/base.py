"""What every engine answers: `Encoder.encode(texts) -> float32 [N, dim]`, and the work all
engines share (input checks, tokenising, length-sorted token-budget batching).

Semantics, the same for every engine:
- texts: a list (or tuple) of non-empty strings. An empty or whitespace-only text raises
  `EncodeInputError` naming its index.
- Tokenising uses the model's own tokenizer with its special tokens. A text longer than the
  model's `max_seq_length` tokens is truncated (as sentence-transformers does), or refused
  with `EncodeInputError` when `truncate=False`.
- Batches: texts sorted by token count, longest first, grouped so that each padded batch
  holds at most `batch_tokens` token slots (batch size x longest text) and at most
  `max_batch` texts. Sorting leaves almost no padding; small batches keep activations in
  cache. Output rows are in input order whatever the batching.
- Pooling over the real tokens only (padding never counts): "mean" = the average of the
  last hidden states, "cls" = the first token's, "last" = the last real token's; then L2
  normalisation when the model asks for it (`ModelSpec`).
"""

from __future__ import annotations

import abc
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from attnswitch.engines.model import ModelSpec
from attnswitch.errors import AttnswitchError

# What an encoder computes in ("int8" only where an engine declares it), and what a caller
# may ask for: those, or "auto" (measured per machine and model, see engines.autoprecision).
PRECISIONS = ("fp32", "bf16", "int8")
PRECISION_CHOICES = ("auto", *PRECISIONS)


class EncodeInputError(AttnswitchError, ValueError):
    """Bad input to `encode`: the message names the argument (or the text's index), what was
    expected and what came."""

    def __init__(self, name: str, expected: str, got: Any):
        self.argument = name
        super().__init__(f"{name}: expected {expected}, got {got}")


def _preview(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def check_texts(texts: Any) -> list[str]:
    """The texts as a list of non-empty strings, or `EncodeInputError` naming the culprit."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise EncodeInputError("texts", "a list of strings", type(texts).__name__)
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise EncodeInputError(f"texts[{i}]", "a string", type(text).__name__)
        if not text.strip():
            raise EncodeInputError(f"texts[{i}]", "a non-empty text", _preview(text))
    return out


def check_precision(precision: Any) -> str:
    if precision not in PRECISIONS:
        raise EncodeInputError("precision", f"one of {', '.join(PRECISIONS)}", repr(precision))
    return str(precision)


def check_precision_choice(precision: Any) -> str:
    if precision not in PRECISION_CHOICES:
        raise EncodeInputError(
            "precision", f"one of {', '.join(PRECISION_CHOICES)}", repr(precision)
        )
    return str(precision)


def plan_batches(lengths: Sequence[int], batch_tokens: int, max_batch: int) -> list[np.ndarray]:
    """Indices of each batch: sorted by length, longest first, each batch's padded size
    (count x its longest length) within `batch_tokens` and its count within `max_batch`.
    A text longer than the budget gets a batch of its own."""
    if batch_tokens < 1 or max_batch < 1:
        raise EncodeInputError("batch_tokens", "a positive number of tokens", batch_tokens)
    sizes = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-sizes, kind="stable")
    batches, start = [], 0
    while start < len(order):
        width = int(sizes[order[start]])
        count = max(1, min(max_batch, batch_tokens // max(width, 1)))
        batches.append(order[start : start + count])
        start += count
    return batches


class Encoder(abc.ABC):
    """One model on one engine. Subclasses implement `_forward` (a batch of token id lists,
    longest first, to pooled float32 vectors) and `explain`."""

    engine: str = ""
    default_batch_tokens: int = 2048
    max_batch: int = 64

    def __init__(self, spec: ModelSpec, precision: str = "fp32"):
        self.spec = spec
        self.precision = check_precision(precision)
        # seconds each step of loading took: "tokenizer_s" here; engines add "import_s"
        # (their runtime's modules) and "model_s" (reading, building or compiling the model)
        self.load_times: dict[str, float] = {}
        start = time.perf_counter()
        self._tokenizer = spec.tokenizer()
        self.load_times["tokenizer_s"] = time.perf_counter() - start

    @property
    def dim(self) -> int:
        return self.spec.dim

    def tokenize(self, texts: Sequence[str], *, truncate: bool = True) -> list[list[int]]:
        """Token ids per text, special tokens included, at most `max_seq_length` each."""
        texts = check_texts(texts)
        if self.spec.do_lower_case:
            texts = [t.lower() for t in texts]
        encodings = self._tokenizer.encode_batch(texts)
        if not truncate:
            limit = self.spec.max_seq_length
            for i, enc in enumerate(encodings):
                if enc.overflowing:
                    full = self._untruncated_length(texts[i])
                    raise EncodeInputError(
                        f"texts[{i}]",
                        f"at most {limit} tokens for this model (or truncate=True)",
                        f"{full} tokens",
                    )
        return [enc.ids for enc in encodings]

    def _untruncated_length(self, text: str) -> int:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_str(self._tokenizer.to_str())
        tok.no_truncation()
        return len(tok.encode(text).ids)

    def encode(
        self, texts: Sequence[str], *, batch_tokens: int | None = None, truncate: bool = True
    ) -> np.ndarray:
        """float32 `[len(texts), dim]`, one vector per text, in input order."""
        return self.encode_ids(self.tokenize(texts, truncate=truncate), batch_tokens=batch_tokens)

    def encode_ids(
        self, ids: Sequence[Sequence[int]], *, batch_tokens: int | None = None
    ) -> np.ndarray:
        """Like `encode`, from token id lists (special tokens included, each non-empty and at
        most `max_seq_length` long)."""
        limit = self.spec.max_seq_length
        for i, row in enumerate(ids):
            if not 0 < len(row) <= limit:
                raise EncodeInputError(f"ids[{i}]", f"1 to {limit} token ids", f"{len(row)}")
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        budget = self.default_batch_tokens if batch_tokens is None else int(batch_tokens)
        lengths = [self.planned_length(len(r)) for r in ids]
        plan = plan_batches(lengths, budget, self.batch_limit(len(ids)))
        batches = ([list(ids[i]) for i in index] for index in plan)
        for index, vectors in zip(plan, self._forward_batches(batches, budget), strict=True):
            out[index] = vectors
        return out

    def _forward_batches(
        self, batches: Iterable[list[list[int]]], batch_tokens: int
    ) -> Iterable[np.ndarray]:
        """The vectors of each batch, in order (engines that overlap batches override it)."""
        for batch in batches:
            yield self._forward(batch, batch_tokens)

    def batch_limit(self, count: int) -> int:
        """The most texts per batch for a call of `count` texts (engines that run batches
        side by side split small calls so that every worker gets one)."""
        return self.max_batch

    def planned_length(self, length: int) -> int:
        """The length a text of `length` tokens occupies in a batch (engines that compile per
        shape round it up)."""
        return length

    @abc.abstractmethod
    def _forward(self, batch: list[list[int]], batch_tokens: int) -> np.ndarray:
        """Pooled (and normalised, per the model) float32 vectors `[len(batch), dim]` for a
        batch planned under `batch_tokens`."""

    @abc.abstractmethod
    def explain(self, text: str = "attnswitch explains its plan") -> Any:
        """The attnswitch `Plan` of this engine's attention call for `text` (engines whose
        runtime runs attention inside a fused graph say that instead)."""

    def describe(self) -> str:
        """One line: what this encoder runs on (library, precision, how)."""
        return f"{self.engine} engine, {self.precision}"

    def device_label(self) -> str:
        """The device it runs on, named as `observe.cost` prices it ("cpu", a GPU's name)."""
        return "cpu"

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} engine={self.engine} model={self.spec.path.name} "
            f"precision={self.precision}>"
        )


# Runtimes that specialise their kernels per input shape (OpenVINO's CPU plugin keeps an
# executor per shape, up to 5,000; ONNX Runtime's arena) grow by about 1 MiB for every new
# shape they meet: a server fed texts of every length grew without bound (benchmarks/soak.py).
# Their widths are rounded up to this multiple, so a model of 512 positions meets at most
# 32 widths; the padding costs under 16 masked tokens a row.
SHAPE_MULTIPLE = 16


def rounded_width(length: int, multiple: int = SHAPE_MULTIPLE) -> int:
    """`length` rounded up to a multiple of `multiple`."""
    return -(-length // multiple) * multiple


def padded(batch: list[list[int]], pad_id: int, multiple: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded int64 ids `[B, S]` and the int64 mask of real tokens `[B, S]`; S is the
    longest row rounded up to a multiple of `multiple` (spare columns are masked)."""
    width = rounded_width(max(len(row) for row in batch), multiple)
    ids = np.full((len(batch), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    for r, row in enumerate(batch):
        ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
    return ids, mask
