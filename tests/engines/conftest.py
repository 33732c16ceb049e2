"""Fixtures of the engine tests: real text shipped in the repository, sentence-transformers'
vectors for it (the reference), and small random-initialised model directories."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"


@pytest.fixture(scope="session")
def chunks() -> list[str]:
    """600+ real text chunks of mixed lengths (a few words to past the model's 256-token
    limit): every third paragraph of the plain-text and Markdown documents of the example
    corpus (Debian documentation packages; licences in examples/corpus-licenses)."""
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in (".txt", ".md"))
    paragraphs = []
    for path in files:
        for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace")):
            text = " ".join(block.split())
            if len(text.split()) >= 3:
                paragraphs.append(text)
    out = paragraphs[::3]
    assert len(out) >= 500, f"expected 500+ chunks from {CORPUS}, got {len(out)}"
    return out


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    from attnswitch.engines.model import default_model_path

    return default_model_path()


@pytest.fixture(scope="session")
def st_vectors(
    chunks: list[str], minilm_path: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> np.ndarray:
    """sentence-transformers' float32 vectors of `chunks` with all-MiniLM-L6-v2.

    Computed once per test run: xdist workers share the run's temporary root and wait on a
    file lock while one of them computes (the `xdist_group` marks do not keep these tests in
    one worker with the installed pytest-xdist)."""
    import sentence_transformers
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # shared by the workers of this run
    text = "\0".join([sentence_transformers.__version__, *chunks])
    key = hashlib.sha256(text.encode()).hexdigest()
    path = root / f"st-minilm-{key[:16]}.npy"
    with FileLock(str(path) + ".lock"):
        if path.is_file():
            return np.load(path)
        model = sentence_transformers.SentenceTransformer(str(minilm_path), device="cpu")
        vectors = model.encode(chunks, batch_size=32, convert_to_numpy=True)
        np.save(path, vectors)
    return vectors


@pytest.fixture(scope="session")
def oracle_set(
    chunks: list[str], st_vectors: np.ndarray, minilm_path: Path
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(texts, oracle, baseline) for the conformance rule on real text: every tenth chunk
    (a few words to past the 256-token limit), their float64 vectors (MiniLM in float64,
    each text alone, mean-pooled, normalised: `pooled_reference`) and sentence-transformers'
    float32 vectors of them (the plain float32 computation the rule's bound is made of)."""
    from engine_testing import pooled_reference

    from attnswitch.engines import get_engine

    picked = list(range(0, len(chunks), 10))
    texts = [chunks[i] for i in picked]
    batch = get_engine(None, "torch", "fp32").tokenize(texts)
    return texts, pooled_reference(minilm_path, batch, "mean"), st_vectors[picked]


def _random_model(root: Path, family: str, minilm: Path, pooling: str | None) -> Path:
    import torch
    from transformers import AutoModel, BertConfig, RobertaConfig

    torch.manual_seed(0)
    small = dict(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
    )
    if family == "bert":
        config = BertConfig(**small)
    else:
        config = RobertaConfig(max_position_embeddings=514, pad_token_id=1, **small)
    path = root / f"{family}-{pooling or 'plain'}"
    AutoModel.from_config(config).save_pretrained(path)
    shutil.copy(minilm / "tokenizer.json", path / "tokenizer.json")
    if pooling is not None:
        (path / "1_Pooling").mkdir()
        flags = {
            "pooling_mode_mean_tokens": pooling == "mean",
            "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_lasttoken": pooling == "last",
        }
        (path / "1_Pooling" / "config.json").write_text(json.dumps(flags))
        modules = [
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
        (path / "modules.json").write_text(json.dumps(modules))
        (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64}))
    return path


@pytest.fixture(scope="session")
def random_model(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path):
    """`random_model(family, pooling)`: a saved random-initialised "bert" or "roberta" model
    (hidden 32, 2 layers) with MiniLM's tokenizer; with `pooling` ("mean", "cls", "last") also
    sentence-transformers files (that pooling, normalised, max_seq_length 64)."""
    root = tmp_path_factory.mktemp("models")
    made: dict[tuple, Path] = {}

    def make(family: str, pooling: str | None = None) -> Path:
        key = (family, pooling)
        if key not in made:
            made[key] = _random_model(root, family, minilm_path, pooling)
        return made[key]

    return make
