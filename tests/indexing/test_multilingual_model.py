"""A multilingual model given by `--model` works end to end, and the hybrid search knows
which languages a model declares: a sentence-transformers folder of a tiny random-
initialised XLM-R with a SentencePiece-style (Unigram) tokenizer trained here on the test's
own text, indexed and searched through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_keyword_languages import FILES, QUERIES, root  # noqa: F401 (a fixture)
from typer.testing import CliRunner

from attnswitch.engines.model import ModelSpec, card_languages
from attnswitch.indexing.config import stored_config
from attnswitch.indexing.location import open_store
from attnswitch.indexing.search import DENSE_WEIGHT, FOREIGN_DENSE_WEIGHT, dense_weights, fuse
from attnswitch.indexing.store import ChunkRow

pytest.importorskip("transformers", reason="the models extra is not installed")


def invoke(*args: str):
    from attnswitch.cli import app

    return CliRunner().invoke(app, list(args))


def xlmr_folder(path: Path, card: str | None) -> Path:
    """A sentence-transformers folder (mean pooling, normalised) of a random XLM-R (hidden
    32, 2 layers) whose tokenizer is trained on `FILES`, with `card` as its README.md."""
    import torch
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import AutoModel, XLMRobertaConfig

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(
        list(FILES.values()),
        trainers.UnigramTrainer(
            vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"
        ),
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    path.mkdir(parents=True)
    tok.save(str(path / "tokenizer.json"))
    torch.manual_seed(0)
    AutoModel.from_config(
        XLMRobertaConfig(
            vocab_size=tok.get_vocab_size(),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=130,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
        )
    ).save_pretrained(path)
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (path / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": i,
                    "name": str(i),
                    "path": folder,
                    "type": f"sentence_transformers.models.{kind}",
                }
                for i, (folder, kind) in enumerate(
                    [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
                )
            ]
        )
    )
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    if card is not None:
        (path / "README.md").write_text(card, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "card, languages",
    [
        ("---\nlanguage: en\nlicense: mit\n---\n# A model\n", ("en",)),
        ("---\nlanguage:\n- de\n- zh-CN\n- en\n---\n", ("de", "en", "zh")),
        ("---\nlanguage: multilingual\n---\n", None),
        ("---\nlicense: mit\n---\n", None),
        ("# A model card without front matter\nlanguage: en\n", None),
        ("---\nlanguage: [unclosed\n---\n", None),
        (None, None),
    ],
)
def test_a_model_card_declares_its_languages(
    tmp_path: Path, card: str | None, languages: tuple[str, ...] | None
) -> None:
    path = tmp_path / "README.md"
    if card is not None:
        path.write_text(card, encoding="utf-8")
    assert card_languages(path) == languages


def test_the_default_model_declares_english() -> None:
    assert ModelSpec.load().languages == ("en",)


def test_a_multilingual_model_indexes_and_finds_every_language_through_the_cli(
    tmp_path: Path,
    root: Path,  # noqa: F811 (the fixture imported above)
) -> None:
    """The XLM-R folder runs end to end: the files of seven languages indexed by its
    tokenizer and vectors, and searched through the CLI. Its random vectors are noise, and
    its card declares English only: the hybrid search lets the keyword half decide for the
    six other languages, and still finds every file first; dense search answers too."""
    model = xlmr_folder(tmp_path / "xlmr", "---\nlanguage:\n- en\n---\n")
    db = tmp_path / "db"
    ran = invoke(
        "run",
        str(root),
        "--model",
        str(model),
        "--engine",
        "torch",
        "--precision",
        "fp32",
        "--db",
        str(db),
    )
    assert ran.exit_code == 0, ran.output
    with open_store(db) as store:
        config = stored_config(store)
        assert config is not None and config.languages == ("en",)
        assert store.count() == len(FILES)
    status = json.loads(invoke("status", "--db", str(db), "--json").output)
    assert status["languages"] == ["de", "en", "fr", "hi", "ja", "ko", "zh"]
    assert status["model"]["languages"] == ["en"]
    for query, answer in QUERIES:
        found = invoke("search", query, "--model", str(model), "--db", str(db), "--json", "-k", "3")
        assert found.exit_code == 0, found.output
        hits = json.loads(found.output)["data"]
        assert hits[0]["path"] == answer, (query, [h["path"] for h in hits])
    dense = invoke(
        "search",
        "하드웨어",
        "--model",
        str(model),
        "--db",
        str(db),
        "--json",
        "--mode",
        "dense",
        "-k",
        "3",
    )
    assert dense.exit_code == 0 and len(json.loads(dense.output)["data"]) == 3


def row(cid: int, language: str) -> ChunkRow:
    return ChunkRow(cid, "/r", f"{cid}.txt", 0, "text", 1, 0, 4, language=language)


def test_the_dense_part_counts_less_outside_the_model_s_languages() -> None:
    rows = {1: row(1, "en"), 2: row(2, "ko"), 3: row(3, "")}
    english = "how do I restore a backup of the home folders"
    korean = "서버실에 새 하드웨어를 설치하는 방법"
    assert dense_weights(("en",), english, rows) == {
        1: DENSE_WEIGHT,
        2: FOREIGN_DENSE_WEIGHT,
        3: DENSE_WEIGHT,
    }
    assert set(dense_weights(("en",), korean, rows).values()) == {FOREIGN_DENSE_WEIGHT}
    assert set(dense_weights(None, korean, rows).values()) == {DENSE_WEIGHT}
    # a query too short to know its language is taken as the model's
    assert dense_weights(("en",), "vacuum", rows)[1] == DENSE_WEIGHT


def test_per_chunk_weights_let_the_keyword_list_decide_for_a_foreign_chunk() -> None:
    """Chunk 2 is first by keywords and second by the model: at the English weight the
    model's first wins, at the foreign weight the keywords' first does."""
    dense = [(1, 1.0), (2, 0.5), (3, 0.0)]
    keyword = [(2, 9.0), (1, 1.0)]
    assert fuse(dense, keyword)[0][0] == 1
    assert (
        fuse(dense, keyword, {1: DENSE_WEIGHT, 2: FOREIGN_DENSE_WEIGHT, 3: DENSE_WEIGHT})[0][0] == 2
    )
    scores = dict(fuse(dense, keyword, {2: FOREIGN_DENSE_WEIGHT}))
    assert np.isclose(scores[2], FOREIGN_DENSE_WEIGHT * 0.5 + (1 - FOREIGN_DENSE_WEIGHT))
    assert np.isclose(scores[1], DENSE_WEIGHT)  # an id the mapping lacks: the default
