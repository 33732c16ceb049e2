"""The public entry: encode(), engine choice and cache, engines_status()."""

from __future__ import annotations

import numpy as np
import pytest

from attnswitch.engines import EncodeInputError, encode, engines_status, get_engine, runtime

TEXTS = [
    "The quick brown fox.",
    "A much longer sentence about databases, transactions and logs.",
    "Short.",
    "Embeddings turn text into vectors.",
]


def test_encode_returns_one_float32_row_per_text_in_input_order():
    out = encode(TEXTS, engine="torch")
    assert out.shape == (4, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    backwards = encode(TEXTS[::-1], engine="torch")
    np.testing.assert_allclose(backwards[::-1], out, atol=1e-6)


def test_encode_of_nothing_is_empty():
    assert encode([], engine="torch").shape == (0, 384)


def test_engines_are_cached_per_model_engine_and_precision():
    a = get_engine(engine="torch")
    assert get_engine(None, "torch", "fp32") is a
    assert get_engine(engine="torch", precision="bf16") is not a


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"engine": "tpu"},
            "engine: expected one of auto, torch, jax, openvino, onnxruntime, got 'tpu'",
        ),
        ({"precision": "fp16"}, "precision: expected one of auto, fp32, bf16, int8, got 'fp16'"),
    ],
)
def test_bad_options_are_named(kwargs, message):
    with pytest.raises(EncodeInputError, match=message):
        encode(TEXTS, **kwargs)


def test_empty_text_is_named_by_index():
    with pytest.raises(EncodeInputError, match=r"texts\[1\]: expected a non-empty text"):
        encode(["fine", ""], engine="torch")


def test_engines_status_lists_every_engine_with_reasons(cache_dir, monkeypatch):
    monkeypatch.setenv("ATTNSWITCH_ENGINE", "onnxruntime")
    status = {s.name: s for s in engines_status()}
    assert set(status) == {"torch", "jax", "openvino", "onnxruntime"}
    for s in status.values():
        assert (s.reason is None) == s.available and s.detail
    assert [s.name for s in status.values() if s.auto] == ["onnxruntime"]
    monkeypatch.delenv("ATTNSWITCH_ENGINE")
    runtime.current().reset(encoders=False)  # the environment is read again
    # nothing measured in this cache yet, and asking for the status measures nothing
    assert all(s.auto is None for s in engines_status())
