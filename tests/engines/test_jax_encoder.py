"""The jax engine against sentence-transformers (real MiniLM, real text) and against a
float64 oracle (random BERT and RoBERTa models)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from engine_testing import (
    check_rule,
    cosines,
    pooled_eager,
    pooled_reference,
    rule,
    torch_reference,
)

import attnswitch
from attnswitch.engines import get_engine
from attnswitch.engines.jax_encoder import BUCKETS, JaxEncoder, bucket
from attnswitch.engines.model import ModelError, ModelSpec

pytestmark = pytest.mark.skipif(
    "jax-xla" not in [b.name for b in attnswitch.backends()],
    reason="no jax attention backend registered",
)


def test_float32_is_within_the_rule_on_real_text(oracle_set):
    """max|engine - float64 oracle| <= 2x sentence-transformers' float32 error + floor."""
    texts, oracle, baseline = oracle_set
    vectors = get_engine(engine="jax").encode(texts)
    assert vectors.shape == oracle.shape and vectors.dtype == np.float32
    check_rule(vectors, baseline, oracle)


def test_bf16_keeps_the_parity_of_its_precision(chunks, st_vectors):
    """bf16 is held to the parity a precision pick requires (`autopick.PARITY`, the
    product's own rule for bf16, a cosine to float32)."""
    from attnswitch.engines.autopick import PARITY

    engine = get_engine(engine="jax", precision="bf16")
    worst = cosines(engine.encode(chunks[:120]), st_vectors[:120])
    assert worst.min() >= PARITY["bf16"], f"chunk {worst.argmin()}: cosine {worst.min():.6f}"


TEXTS = [
    "a short one",
    "a somewhat longer text, with more words in it than the others",
    "mid length text here",
    "x",
]


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_hidden_states_match_float64_oracle(random_model, family):
    path = random_model(family)
    engine = JaxEncoder(ModelSpec.load(path))
    batch = engine.tokenize(TEXTS)
    hidden = engine.hidden(batch)
    out = np.concatenate([hidden[r, : len(ids)] for r, ids in enumerate(batch)])
    eager, oracle = (torch_reference(path, batch, dtype) for dtype in ("float32", "float64"))
    err, bound = rule(out, eager, oracle)
    assert err <= bound, f"{family}: error {err:.3g} > bound {bound:.3g}"


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_pooling_matches_float64_oracle(random_model, pooling):
    path = random_model("roberta", pooling)
    engine = JaxEncoder(ModelSpec.load(path))
    batch = engine.tokenize(TEXTS)
    check_rule(
        engine.encode(TEXTS),
        pooled_eager(path, batch, pooling),
        pooled_reference(path, batch, pooling),
    )


def test_explain_shows_the_jax_backend_inside_jit():
    plan = get_engine(engine="jax").explain("how does attnswitch pick a kernel?")
    assert plan.call.framework == "jax" and plan.call.traced
    assert plan.chosen is not None and attnswitch.Plan is type(plan)
    assert "key_padding_mask" in plan.call.features


def test_shapes_are_bucketed():
    assert [bucket(n) for n in (1, 16, 17, 250, 256, 513)] == [16, 16, 32, 256, 256, 576]
    assert list(BUCKETS) == sorted(BUCKETS)


def test_other_model_types_are_refused(random_model, tmp_path):
    path = tmp_path / "llama"
    shutil.copytree(random_model("bert"), path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(ModelError, match="model: expected a model_type among bert, roberta"):
        JaxEncoder(ModelSpec.load(path))
