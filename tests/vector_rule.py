"""Stored vectors by the conformance rule (docs/architecture.md, "Conformance"): against a
float64 oracle, the same transformers model with eager attention in float64, each text run
alone, mean-pooled over its tokens and L2-normalised, a run's vectors may be off by at most
twice what the plain float32 computation of the same model is off, plus the float32
rounding floor. Never a bare cosine threshold: a mask that leaks a few padding keys moves a
vector by far more than float32 rounding and still has a cosine above 0.9999."""

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


def floor32(ref: np.ndarray) -> float:
    """Twice the float32 rounding error around the values of `ref`."""
    r = ref.astype(np.float32)
    return 2.0 * float(np.abs((r + np.float32(0.3)) - np.float32(0.3) - r).max())


def assert_within_rule(got: np.ndarray, ref: np.ndarray, naive: np.ndarray,
                       what: str = "vectors") -> None:
    """max|got - ref| <= 2 max|naive - ref| + floor32(ref)."""
    assert got.shape == ref.shape, f"{what}: expected shape {ref.shape}, got {got.shape}"
    err = float(np.abs(got.astype(np.float64) - ref).max())
    bound = 2.0 * float(np.abs(naive - ref).max()) + floor32(ref)
    assert err <= bound, f"{what}: error {err:.3g} > bound {bound:.3g}"
