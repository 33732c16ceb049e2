"""The static model made from a transformer (`engines/static_model.py`): each token's row is
the model's own vector of that token alone, weighted by its rarity; a text's vector is the
normalised mean of its tokens' rows (model2vec's encoder over the saved folder); made once
per model and found again by its key; on the default model it finds candidates the
transformer agrees with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnswitch.engines import get_engine
from attnswitch.engines.model import ModelSpec
from attnswitch.engines.static_model import (
    SIF_COEFFICIENT,
    distill,
    load_static,
    special_frame,
    static_fingerprint,
)


@pytest.fixture(scope="module")
def small_model(random_model) -> Path:
    """A random-initialised BERT (hidden 32) with MiniLM's tokenizer: distilled in seconds."""
    return random_model("bert", "mean")


def test_each_row_is_the_models_vector_of_its_token_alone(small_model: Path) -> None:
    encoder = get_engine(small_model, "torch", "fp32")
    vectors, tokenizer = distill(encoder)
    vocabulary = tokenizer.get_vocab()
    before, after = special_frame(tokenizer)
    assert (before, after) == ([vocabulary["[CLS]"]], [vocabulary["[SEP]"]])
    picked = [vocabulary[t] for t in ("table", "vacuum", "##ing", "the", "##ment")]
    alone = encoder.encode_ids([[*before, i, *after] for i in picked])
    weights = SIF_COEFFICIENT / (SIF_COEFFICIENT + 1.0 / (np.array(picked) + 1.0))
    np.testing.assert_allclose(vectors[picked], alone * weights[:, None], rtol=1e-6, atol=1e-7)
    for special in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"):
        assert not vectors[vocabulary[special]].any(), special
    assert vectors.shape == (len(vocabulary), encoder.dim)


@pytest.mark.parametrize(
    "text",
    ["how do I update rows in a table", "Vacuum", "naïve café ünïcode", "rows " * 900, "a b c"],
    ids=["question", "one word", "accents", "past the model's limit", "letters"],
)
def test_a_text_is_the_normalised_mean_of_its_tokens(small_model: Path, text: str) -> None:
    static, _ = load_static(ModelSpec.load(small_model))
    encoder = get_engine(small_model, "torch", "fp32")
    rows, tokenizer = distill(encoder)
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    expected = rows[ids].mean(axis=0)
    expected /= np.linalg.norm(expected)
    (got,) = static.encode([text])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_texts_without_known_tokens_give_zero_rows(small_model: Path) -> None:
    static, _ = load_static(ModelSpec.load(small_model))
    out = static.encode(["", "   ", "x" * 300, "vacuum"])  # a 300-letter word is [UNK]
    assert out.shape == (4, static.dim) and out.dtype == np.float32
    assert not out[:3].any()
    assert np.linalg.norm(out[3]) == pytest.approx(1.0, abs=1e-6)
    assert static.encode([]).shape == (0, static.dim)


def test_made_once_per_model_and_found_by_its_key(
    small_model: Path, tmp_path: Path, random_model
) -> None:
    spec = ModelSpec.load(small_model)
    first, how = load_static(spec)
    again, how_again = load_static(spec)
    assert how_again == "cached"
    assert first.fingerprint == again.fingerprint == static_fingerprint(spec)
    other = ModelSpec.load(random_model("roberta", "mean"))
    assert static_fingerprint(other) != static_fingerprint(spec)


def test_on_the_default_model_it_finds_what_the_transformer_finds(chunks: list[str]) -> None:
    """Over 600 real chunks and 12 questions, the static model's 50 best hold at least a
    third of the transformer's 10 best (measured on the corpus index: about half; random
    vectors hold 50/600 of them)."""
    spec = ModelSpec.load()
    static, _ = load_static(spec)
    encoder = get_engine(None, "torch", "fp32")
    questions = [
        "how do I update rows in a table",
        "write-ahead log checkpoint",
        "install a package from the archive",
        "configure the network interface",
        "regular expressions",
        "copyright and license of the software",
        "report a bug",
        "compile the program from source",
        "documentation in HTML format",
        "keyboard shortcuts",
        "upgrade to a new release",
        "mailing list for users",
    ]
    full, quick = encoder.encode(chunks), static.encode(chunks)
    full_q, quick_q = encoder.encode(questions), static.encode(questions)
    held = []
    for i in range(len(questions)):
        best = set(np.argsort(-(full @ full_q[i]))[:10])
        candidates = set(np.argsort(-(quick @ quick_q[i]))[:50])
        held.append(len(best & candidates) / 10)
    assert np.mean(held) >= 1 / 3, held
