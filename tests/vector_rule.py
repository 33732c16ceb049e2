"""Stored vectors by the conformance rule (docs/architecture.md, "Conformance"): against a
float64 oracle, the same transformers model with eager attention in float64, each text run
alone, mean-pooled over its tokens and L2-normalised, a run's vectors may be off by at most
twice what the plain float32 computation of the same model is off, plus the rounding floor
of the precision they are kept in: float32 for vectors an engine returns, float16 for
vectors read back from a store (`records.VECTOR_DTYPE`). Never a bare cosine threshold: a
mask that leaks a few padding keys moves a vector by far more than float32 rounding and
still has a cosine above 0.9999."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def oracle(model_path: Path, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(float64 oracle, plain float32) vectors `[N, D]` of `texts` (each text alone, mean
    pooling over its real tokens, L2-normalised)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path, attn_implementation="eager").eval()
    out = []
    for dtype in (torch.float64, torch.float32):
        m = model.to(dtype)
        rows = []
        with torch.inference_mode():
            for text in texts:
                ids = tokenizer(text, truncation=True, return_tensors="pt")["input_ids"]
                v = m(input_ids=ids).last_hidden_state[0].mean(0).double()
                rows.append((v / v.norm()).numpy())
        out.append(np.stack(rows))
    return out[0], out[1]


def rounding_floor(ref: np.ndarray, dtype: type = np.float32) -> float:
    """Twice the rounding error in `dtype` (float32 by default) around the values of
    `ref`."""
    r = ref.astype(dtype)
    return 2.0 * float(np.abs((r + dtype(0.3)) - dtype(0.3) - r).astype(np.float64).max())


def assert_within_rule(
    got: np.ndarray, ref: np.ndarray, naive: np.ndarray, what: str = "vectors", stored: bool = False
) -> None:
    """max|got - ref| <= 2 max|naive - ref| + rounding_floor(ref); with `stored` (vectors
    read back from a store, kept in float16) the floor is float16's."""
    assert got.shape == ref.shape, f"{what}: expected shape {ref.shape}, got {got.shape}"
    err = float(np.abs(got.astype(np.float64) - ref).max())
    bound = 2.0 * float(np.abs(naive - ref).max()) + rounding_floor(
        ref, np.float16 if stored else np.float32
    )
    assert err <= bound, f"{what}: error {err:.3g} > bound {bound:.3g}"
