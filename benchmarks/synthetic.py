"""Synthetic vectors and helpers shared by the search benchmarks.

Real sentence embeddings are not uniform on the sphere: they gather around topics. The
vectors here do too: `clustered` draws points around 1,000 random centres (a centre plus
Gaussian noise of about the same norm), then L2-normalises them. Uniform random vectors
in 384 dimensions are the worst case for any graph index and describe no real corpus.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

CENTRES = 1000


def clustered(
    n: int, dim: int, *, seed: int, centres_seed: int | None = None, noise: float = 1.0
) -> np.ndarray:
    """`[n, dim]` float32, L2-normalised, around `CENTRES` centres drawn from
    `centres_seed` (default `seed`): queries share the data's centres with the same
    `centres_seed`. Generated in blocks, so 1M x 384 needs no more than its own 1.5 GB."""
    centres = (
        np.random.default_rng(seed if centres_seed is None else centres_seed)
        .normal(size=(CENTRES, dim))
        .astype(np.float32)
    )
    rng = np.random.default_rng(seed + 7919)
    out = np.empty((n, dim), np.float32)
    for start in range(0, n, 65536):
        m = min(65536, n - start)
        block = centres[rng.integers(0, CENTRES, m)]
        block += rng.normal(scale=noise, size=(m, dim)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + m] = block
    return out


def exact_top_k(x: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """`[Q, k]` row indices of the exact top-k inner products (blocked over `x`)."""
    best_s = np.full((len(queries), 0), -np.inf, np.float32)
    best_i = np.zeros((len(queries), 0), np.int64)
    for start in range(0, len(x), 131072):
        scores = queries @ x[start : start + 131072].T
        s = np.concatenate([best_s, scores], axis=1)
        i = np.concatenate(
            [best_i, np.broadcast_to(np.arange(start, start + scores.shape[1]), scores.shape)],
            axis=1,
        )
        top = np.argpartition(-s, k - 1, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(s, top, 1), np.take_along_axis(i, top, 1)
    order = np.argsort(-best_s, axis=1)
    return np.take_along_axis(best_i, order, 1)


def cpu_description() -> str:
    """The CPU model and its vector ISA flags (from /proc/cpuinfo where there is one)."""
    info = Path("/proc/cpuinfo")
    if not info.is_file():
        return platform.processor() or platform.machine()
    model, flags = platform.machine(), []
    for line in info.read_text().splitlines():
        if line.startswith("model name") and model == platform.machine():
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = [
                f
                for f in line.split(":", 1)[1].split()
                if f
                in (
                    "avx2",
                    "fma",
                    "avx512f",
                    "avx512bw",
                    "avx512_vnni",
                    "avx512_bf16",
                    "amx_tile",
                    "amx_bf16",
                    "amx_int8",
                )
            ]
            break
    return f"{model} ({', '.join(flags) or 'no AVX2'})"


def words(seed: int) -> list[str]:
    """A vocabulary for synthetic chunk text: the words of the shipped corpus."""
    import re

    corpus = Path(__file__).resolve().parents[1] / "examples" / "corpus"
    vocab: set[str] = set()
    for path in sorted(corpus.rglob("*.txt"))[:40]:
        vocab.update(re.findall(r"[A-Za-z][A-Za-z_]{2,14}", path.read_text(errors="ignore")))
    out = sorted(vocab)
    np.random.default_rng(seed).shuffle(out)
    return out


def synthetic_documents(
    vectors: np.ndarray, per_doc: int, n_words: int, seed: int, vocab_seed: int = 0
) -> Iterator[tuple[Any, list[Any], np.ndarray]]:
    """(Document, chunks, vectors) for each `per_doc` rows of `vectors`: documents under
    "/synthetic" whose chunks are `n_words` words of the corpus' vocabulary (`words`),
    drawn with `seed`."""
    from attnswitch.documents.ingest import Document
    from attnswitch.indexing.store import ChunkRecord

    vocab = words(vocab_seed)
    rng = np.random.default_rng(seed)
    n = len(vectors)
    for d, start in enumerate(range(0, n, per_doc)):
        m = min(per_doc, n - start)
        picks = rng.integers(0, len(vocab), size=(m, n_words))
        texts = [" ".join(vocab[j] for j in row) for row in picks]
        doc = Document(
            root="/synthetic",
            source=f"doc{d:06d}.txt",
            path=Path(f"/synthetic/doc{d:06d}.txt"),
            size=0,
            mtime_ns=0,
            sha256=f"{d:064d}",
            kind="text",
            text="synthetic",
        )
        yield doc, [ChunkRecord(t, n_words, 0, len(t)) for t in texts], vectors[start : start + m]
