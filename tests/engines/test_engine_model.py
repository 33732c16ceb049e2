"""ModelSpec: reading a model directory and its sentence-transformers files."""

from __future__ import annotations

import json
import shutil

import pytest

from attnswitch.engines.model import ModelError, ModelSpec


def test_default_model_reads_sentence_transformers_files(minilm_path):
    spec = ModelSpec.load(None)
    assert spec.path == minilm_path
    assert (spec.pooling, spec.normalize, spec.max_seq_length, spec.dim) == ("mean", True, 256, 384)
    assert spec.model_type == "bert" and not spec.do_lower_case


def test_tokenizer_drops_the_files_padding_and_truncates_at_max_seq_length():
    """all-MiniLM-L6-v2's tokenizer.json pads and truncates at 128 by itself."""
    tok = ModelSpec.load(None).tokenizer()
    short = tok.encode("a short text").ids
    assert len(short) == 5 and short[0] == 101 and short[-1] == 102  # [CLS] ... [SEP], no [PAD]
    long = tok.encode("word " * 600).ids
    assert len(long) == 256 and long[-1] == 102


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_pooling_mode_and_limits_from_the_model_files(random_model, pooling):
    spec = ModelSpec.load(random_model("bert", pooling))
    assert (spec.pooling, spec.normalize, spec.max_seq_length) == (pooling, True, 64)


@pytest.mark.parametrize("family, limit", [("bert", 512), ("roberta", 512)])
def test_plain_transformers_model_is_mean_pooled_unnormalised(random_model, family, limit):
    spec = ModelSpec.load(random_model(family))
    assert (spec.pooling, spec.normalize, spec.max_seq_length) == ("mean", False, limit)


def test_unsupported_pooling_is_refused(random_model, tmp_path):
    path = tmp_path / "model"
    shutil.copytree(random_model("bert", "mean"), path)
    (path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_max_tokens": True}))
    with pytest.raises(ModelError, match="pooling: expected exactly one of mean, cls or last"):
        ModelSpec.load(path)


def test_directory_without_config_is_refused(tmp_path):
    with pytest.raises(ModelError, match="model: expected a directory with a transformers config"):
        ModelSpec.load(tmp_path)


def test_directory_without_fast_tokenizer_is_refused(random_model, tmp_path):
    path = tmp_path / "model"
    shutil.copytree(random_model("bert"), path)
    (path / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="model: expected a fast tokenizer file tokenizer.json"):
        ModelSpec.load(path)


def test_a_spec_is_read_once_per_state_of_its_files(minilm_path, tmp_path):
    """A query per search asks for the spec each time: the same files give the same spec
    object (read once), and a file changed in place is read again."""
    folder = tmp_path / "model"
    shutil.copytree(minilm_path, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    first = ModelSpec.load(folder)
    assert ModelSpec.load(folder) is first
    assert first.languages == ("en",)
    card = folder / "README.md"
    card.write_text(card.read_text().replace("language: en", "language: de", 1))
    again = ModelSpec.load(folder)
    assert again is not first and again.languages == ("de",)
