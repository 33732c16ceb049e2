"""Engines: the same sentence-embedding model run natively on each chip, behind one interface.

- "torch": a transformers `AutoModel` with `attn_implementation="attnswitch"` (`torch_hf`).
- "jax": the BERT encoder family written in JAX, same safetensors weights (`jax_encoder`);
  the TPU path.

`encode(texts)` is the one-call entry; `get_engine` returns the cached `Encoder` behind it;
`engines_status()` says which engines can run here and why not. Importing this package
imports neither torch nor jax.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from attnswitch.engines.base import (
    PRECISIONS,
    EncodeInputError,
    Encoder,
    check_precision,
)
from attnswitch.engines.model import ModelError, ModelSpec, default_model_path

ENGINES = ("torch", "jax")
# module -> the extra of attnswitch that installs it
_EXTRAS = {"torch": "torch", "jax": "jax", "jaxlib": "jax", "transformers": "models",
           "tokenizers": "models", "safetensors": "models"}
_REQUIREMENTS = {
    "torch": ("torch", "transformers", "tokenizers"),
    "jax": ("jax", "jaxlib", "safetensors", "tokenizers"),
}


@dataclass(frozen=True)
class EngineStatus:
    """Whether an engine can run here. `reason` says why not (None when it can); `detail`
    says what it would run on; `auto` marks the engine `engine="auto"` picks."""

    name: str
    available: bool
    reason: str | None
    detail: str
    auto: bool = False


def _missing(engine: str) -> list[str]:
    return [m for m in _REQUIREMENTS[engine] if importlib.util.find_spec(m) is None]


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


@functools.cache
def _tpu_host() -> bool:
    """True on a host whose jax sees a TPU. Only imports jax where a TPU is plausible."""
    if importlib.util.find_spec("jax") is None:
        return False
    hints = (
        glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")
        or any(os.environ.get(v) for v in ("TPU_NAME", "TPU_ACCELERATOR_TYPE", "COLAB_TPU_ADDR"))
    )
    if not hints:
        return False
    try:
        import jax

        return jax.default_backend() == "tpu"
    except Exception:
        return False


def choose(engine: str = "auto") -> str:
    """The engine name that `engine` resolves to: "auto" is jax on a TPU host, else torch."""
    if engine == "auto":
        return "jax" if _tpu_host() and not _missing("jax") else "torch"
    if engine not in ENGINES:
        raise EncodeInputError("engine", f"one of auto, {', '.join(ENGINES)}", repr(engine))
    return engine


def engines_status() -> list[EngineStatus]:
    """Every engine with whether it can run here and why not (for `attnswitch doctor`)."""
    auto = choose("auto")
    out = []
    for name in ENGINES:
        missing = _missing(name)
        reason = None
        if missing:
            extras = ",".join(sorted({_EXTRAS[m] for m in missing}))
            reason = f"not installed: {', '.join(missing)} (pip install 'attnswitch[{extras}]')"
        if name == "torch":
            detail = (f"transformers {_version('transformers')} AutoModel, "
                      f"attn_implementation='attnswitch', torch {_version('torch')}")
        else:
            detail = f"BERT-family encoder in JAX {_version('jax')} (jit), safetensors weights"
            if reason is None:
                reason = _jax_attention_reason()
        out.append(EngineStatus(name, reason is None, reason, detail, auto=name == auto))
    return out


def _jax_attention_reason() -> str | None:
    from attnswitch.attention import registry

    found = [b for b in registry.backends() if b.framework == "jax"]
    if not found:
        return "no jax attention backend is registered"
    if all(b.unavailable() is not None for b in found):
        return "no jax attention backend is available: " + "; ".join(
            f"{b.name}: {b.unavailable()}" for b in found)
    return None


_cache: dict[tuple[str, str, str], Encoder] = {}
_cache_lock = threading.Lock()


def get_engine(model: str | os.PathLike | None = None, engine: str = "auto",
               precision: str = "fp32") -> Encoder:
    """The loaded `Encoder` for (model, engine, precision), loaded once per process.

    model: a local directory with a transformers model (None: all-MiniLM-L6-v2).
    engine: "auto" (jax on a TPU host, torch elsewhere), "torch" or "jax".
    precision: "fp32" (exact float32) or "bf16" (bfloat16 matmuls)."""
    check_precision(precision)
    name = choose(engine)
    if missing := _missing(name):
        raise EncodeInputError(
            "engine", f"an installed engine ({name} needs {', '.join(missing)})", repr(engine))
    path = default_model_path() if model is None else Path(model)
    key = (str(path.resolve()), name, precision)
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None:
            return cached
        spec = ModelSpec.load(path)
        if name == "torch":
            from attnswitch.engines.torch_hf import TorchEncoder

            encoder: Encoder = TorchEncoder(spec, precision)
        else:
            from attnswitch.engines.jax_encoder import JaxEncoder

            encoder = JaxEncoder(spec, precision)
        _cache[key] = encoder
        return encoder


def encode(texts: Sequence[str], *, model: str | os.PathLike | None = None,
           engine: str = "auto", precision: str = "fp32", batch_tokens: int | None = None,
           truncate: bool = True) -> np.ndarray:
    """Embed `texts`: float32 `[len(texts), dim]`, one row per text in input order.

    Texts longer than the model's `max_seq_length` tokens are truncated, or refused with
    `EncodeInputError` when `truncate=False`; an empty text is an error naming its index.
    `batch_tokens` bounds the padded tokens per batch (engine default when None). The engine
    is loaded once per (model, engine, precision) and reused."""
    return get_engine(model, engine, precision).encode(
        texts, batch_tokens=batch_tokens, truncate=truncate)


__all__ = [
    "ENGINES",
    "PRECISIONS",
    "EncodeInputError",
    "Encoder",
    "EngineStatus",
    "ModelError",
    "ModelSpec",
    "choose",
    "encode",
    "engines_status",
    "get_engine",
]

