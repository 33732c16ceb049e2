"""Helpers of the engine tests (fixtures are in conftest.py)."""

from __future__ import annotations

import numpy as np


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity, computed in float64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 * b64).sum(1) / np.linalg.norm(a64, axis=1) / np.linalg.norm(b64, axis=1)


def floor32(ref: np.ndarray) -> float:
    """Twice the float32 rounding error around the values of `ref` (FlashAttention 3's
    `fwd_atol`)."""
    r = ref.astype(np.float32)
    return 2.0 * float(np.abs((r + np.float32(0.3)) - np.float32(0.3) - r).max())


def rule(out: np.ndarray, eager: np.ndarray, oracle: np.ndarray) -> tuple[float, float]:
    """(error, bound) of FlashAttention's rule against a float64 oracle:
    max|out - oracle| <= 2 * max|eager_fp32 - oracle| + floor."""
    err = float(np.abs(out.astype(np.float64) - oracle).max())
    base = float(np.abs(eager.astype(np.float64) - oracle).max())
    return err, 2.0 * base + floor32(oracle)


def check_rule(out: np.ndarray, eager: np.ndarray, oracle: np.ndarray) -> None:
    """Assert FlashAttention's rule (`rule`), naming the worst row when it fails."""
    err, bound = rule(out, eager, oracle)
    worst = int(np.abs(out.astype(np.float64) - oracle).max(axis=1).argmax())
    assert err <= bound, (
        f"row {worst}: max|out - oracle| {err:.3g} > {bound:.3g} (2x the "
        f"float32 baseline's error plus the rounding floor)"
    )


def pooled_eager(path, batch: list[list[int]], mode: str) -> np.ndarray:
    """The rule's float32 baseline for `pooled_reference`: the same pooling of the
    transformers model's eager float32 hidden states (one right-padded batch)."""
    hidden = torch_reference(path, batch, "float32").astype(np.float64)
    return _pooled(hidden, batch, mode)


def torch_reference(path, batch: list[list[int]], dtype: str) -> np.ndarray:
    """Last hidden states of the real tokens, rows concatenated in order, from the
    transformers model at `path` with eager attention in `dtype` ("float64": each text run
    alone, the oracle; "float32": one right-padded batch, the naive baseline)."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    pad = model.config.pad_token_id or 0
    with torch.inference_mode():
        if dtype == "float64":
            model = model.double()
            rows = [model(input_ids=torch.tensor([ids])).last_hidden_state[0] for ids in batch]
            return torch.cat(rows).numpy()
        width = max(len(ids) for ids in batch)
        ids = torch.full((len(batch), width), pad)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, row in enumerate(batch):
            ids[r, : len(row)] = torch.tensor(row)
            mask[r, : len(row)] = 1
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        return hidden[mask.bool()].numpy()


def pooled_reference(path, batch: list[list[int]], mode: str) -> np.ndarray:
    """float64 pooled, L2-normalised vectors per text from the oracle's hidden states."""
    return _pooled(torch_reference(path, batch, "float64"), batch, mode)


def _pooled(hidden: np.ndarray, batch: list[list[int]], mode: str) -> np.ndarray:
    """Rows of `hidden` (the texts' real tokens, concatenated) pooled per text ("cls",
    "last" or "mean") and L2-normalised."""
    out, start = [], 0
    for ids in batch:
        h = hidden[start : start + len(ids)]
        start += len(ids)
        v = h[0] if mode == "cls" else h[-1] if mode == "last" else h.mean(0)
        out.append(v / np.linalg.norm(v))
    return np.stack(out)
