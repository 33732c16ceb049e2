"""The torch engine against sentence-transformers (real MiniLM, real text) and against a
float64 oracle (random models)."""

from __future__ import annotations

import numpy as np
import pytest
from engine_testing import cosines, pooled_reference

from attnswitch.engines import get_engine
from attnswitch.engines.model import ModelSpec
from attnswitch.engines.torch_hf import TorchEncoder


def test_matches_sentence_transformers_on_real_text(chunks, st_vectors):
    vectors = get_engine(engine="torch").encode(chunks)
    assert vectors.shape == st_vectors.shape and vectors.dtype == np.float32
    worst = cosines(vectors, st_vectors)
    assert worst.min() >= 0.9999, f"chunk {worst.argmin()}: cosine {worst.min():.6f}"


@pytest.mark.parametrize("options, floor", [
    ({"linear": "torch"}, 0.9999),       # plain nn.Linear (no oneDNN packing)
    ({"layout": "packed"}, 0.9999),      # one row, position_ids restarting, cu_seqlens
    ({"precision": "bf16"}, 0.999),
])
def test_variants_match_sentence_transformers(chunks, st_vectors, options, floor):
    precision = options.pop("precision", "fp32")
    engine = TorchEncoder(ModelSpec.load(None), precision, **options)
    subset = slice(0, 120)
    worst = cosines(engine.encode(chunks[subset]), st_vectors[subset])
    assert worst.min() >= floor, f"chunk {worst.argmin()}: cosine {worst.min():.6f}"


@pytest.mark.parametrize("layout", ["padded", "packed"])
@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_pooling_matches_float64_oracle(random_model, pooling, layout):
    path = random_model("bert", pooling)
    engine = TorchEncoder(ModelSpec.load(path), layout=layout)
    texts = ["a short one", "a somewhat longer text with more words in it", "mid length text"]
    batch = engine.tokenize(texts)
    worst = cosines(engine.encode(texts), pooled_reference(path, batch, pooling))
    assert worst.min() >= 0.99999


def test_explain_shows_the_backend_serving_the_model():
    plan = get_engine(engine="torch").explain("how does attnswitch pick a kernel?")
    assert plan.call.framework == "torch" and plan.chosen in plan.candidates
    assert (plan.call.heads_q, plan.call.head_dim) == (12, 32)


def test_packed_layout_reaches_attention_as_packed():
    engine = TorchEncoder(ModelSpec.load(None), layout="packed")
    from attnswitch.integrations.transformers import explain_model

    batch = engine.tokenize(["one text", "and another text"])
    plan = explain_model(engine.model, engine.inputs(batch))
    assert plan.call.layout == "packed" and plan.call.seqlens_q == (4, 5)
