"""The engine-independent part of encoding: input checks, tokenising, batching."""

from __future__ import annotations

import numpy as np
import pytest

from attnswitch.engines import get_engine
from attnswitch.engines.base import EncodeInputError, check_texts, plan_batches


@pytest.mark.parametrize(
    "texts, message",
    [
        ("one string", "texts: expected a list of strings, got str"),
        (["fine", 3], "texts[1]: expected a string, got int"),
        (["fine", "also fine", ""], "texts[2]: expected a non-empty text, got ''"),
        (["  \n\t "], "texts[0]: expected a non-empty text, got"),
    ],
)
def test_bad_texts_are_named(texts, message):
    with pytest.raises(EncodeInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_texts(texts)


@pytest.mark.parametrize("budget, max_batch", [(64, 4), (300, 16), (2048, 16), (10, 8)])
def test_plan_batches_sorts_and_respects_the_budget(budget, max_batch):
    lengths = np.random.default_rng(budget).integers(1, 200, size=137)
    batches = plan_batches(lengths, budget, max_batch)
    order = np.concatenate(batches)
    assert sorted(order.tolist()) == list(range(len(lengths)))  # every text exactly once
    assert np.all(np.diff(lengths[order]) <= 0)  # longest first
    for batch in batches:
        assert len(batch) <= max_batch
        assert len(batch) == 1 or len(batch) * lengths[batch].max() <= budget


def test_too_long_text_is_refused_when_truncation_is_off():
    engine = get_engine(engine="torch")
    message = r"texts\[1\]: expected at most 256 tokens .* got 602 tokens"
    with pytest.raises(EncodeInputError, match=message):
        engine.tokenize(["short", "word " * 600], truncate=False)
    assert len(engine.tokenize(["word " * 600])[0]) == 256  # truncated by default


@pytest.mark.parametrize(
    "ids, message",
    [
        ([[101, 102], []], r"ids\[1\]: expected 1 to 256 token ids, got 0"),
        ([[101] * 257], r"ids\[0\]: expected 1 to 256 token ids, got 257"),
    ],
)
def test_bad_token_ids_are_named(ids, message):
    with pytest.raises(EncodeInputError, match=message):
        get_engine(engine="torch").encode_ids(ids)
