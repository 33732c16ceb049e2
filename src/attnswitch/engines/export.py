"""Exported models for the fused CPU runtimes, built once and cached on disk.

`export_onnx(spec, folder)` writes the whole sentence-embedding computation as one ONNX graph:
the unmodified transformers model (eager attention, the pattern runtimes fuse), then the
model's pooling over real tokens and its L2 normalisation. Inputs: int64 `input_ids` and
`attention_mask`, `[batch, seq]` (right-padded); output: float32 `embedding`,
`[batch, dim]`. The runtime engines (`onnx_runtime`, `openvino_runtime`) start from it.

`Artifacts` is the cache: one folder per key under `<cache dir>/engines/`. The key hashes the
model files' fingerprint, the engine, the precision and every library version that shapes
the result (torch, transformers, the runtime), so an upgrade rebuilds. A folder is built
under a temporary name and renamed into place; its `manifest.json`, written last, holds the
sha256 of every file; a file lock beside the folder lets one process build an entry while
others wait for it (two workers, or `serve` and `run`, starting on a fresh cache build
once). An entry whose manifest is missing or unreadable, from another key, or
whose files do not match their hashes (a half-written or corrupted entry) is deleted and
rebuilt, never loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnswitch.engines.model import ModelSpec, model_fingerprint
from attnswitch.provenance import provenance_key

FORMAT = 1  # bump when the exported graph changes
MANIFEST = "manifest.json"
VERIFIED = "verified.json"
STAMP_AFTER_S = 2.0
ONNX_OPSET = 17


def cache_root() -> Path:
    from attnswitch.kernels.cache import cache_file

    return cache_file("engines")


def _state(path: Path) -> list[int]:
    """What a file's state on disk is known by: size, mtime, ctime, inode."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Artifacts:
    """The cache entry for `key` (a dict of everything the files depend on)."""

    def __init__(self, key: dict[str, Any]):
        self.key = {**key, "format": FORMAT}
        digest = provenance_key(self.key)
        self.folder = cache_root() / f"{key.get('engine', 'model')}-{digest}"

    def _files(self) -> dict[str, str] | str:
        """The manifest's files and their hashes, or why the entry cannot be used without
        reading the files (missing, half-written, another key, a file missing)."""
        manifest = self.folder / MANIFEST
        if not manifest.is_file():
            return "no cache entry" if not self.folder.exists() else "no manifest (half-written)"
        try:
            data = json.loads(manifest.read_text())
            files, key = data["files"], data["key"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return f"unreadable manifest ({type(exc).__name__})"
        if key != self.key:
            return "built for another key (versions or model changed)"
        for name in files:
            if not (self.folder / name).is_file():
                return f"{name} is missing"
        return files

    def present(self) -> bool:
        """Whether the entry is built for this key with all its files (not hashed: `problem`
        checks them)."""
        return isinstance(self._files(), dict)

    def problem(self) -> str | None:
        """Why the entry cannot be used (missing, half-written, another key, corrupt). Each
        file is hashed unless its state is the one stamped after its hash last matched."""
        files = self._files()
        if isinstance(files, str):
            return files
        stamps = self._stamps()
        fresh = {}
        for name, digest in files.items():
            path = self.folder / name
            state = _state(path)
            if stamps.get(name) == [digest, *state]:
                continue
            if _sha256(path) != digest:
                return f"{name} does not match its hash (corrupt)"
            if time.time_ns() - max(state[1], state[2]) > STAMP_AFTER_S * 1e9:
                fresh[name] = [digest, *state]
        if fresh:
            self._stamp({**stamps, **fresh})
        return None

    def _stamps(self) -> dict[str, list[Any]]:
        try:
            data = json.loads((self.folder / VERIFIED).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _stamp(self, stamps: dict[str, list[Any]]) -> None:
        """Write `verified.json` (write then rename); a folder that cannot be written is
        left as it is (the files are hashed again next time)."""
        try:
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".verified-")
            with os.fdopen(fd, "w") as f:
                json.dump(stamps, f)
            os.replace(tmp, self.folder / VERIFIED)
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)

    def ensure(self, build: Callable[[Path], None]) -> tuple[Path, str]:
        """The entry's folder, built by `build(folder)` when it cannot be used; returns the
        folder and what happened ("cached", or "built (<why the entry was not used>)")."""
        if self.problem() is None:
            return self.folder, "cached"
        from filelock import FileLock  # only to build: a cached entry is read without it

        self.folder.parent.mkdir(parents=True, exist_ok=True)
        # one build of an entry at a time: a process that meets another's build waits for it
        # and uses its entry (an OS file lock, released if the process holding it dies)
        with FileLock(f"{self.folder}.lock"):
            why = self.problem()
            if why is None:
                return self.folder, "cached"
            self._build(build)
        return self.folder, f"built ({why})"

    def _build(self, build: Callable[[Path], None]) -> None:
        staging = Path(tempfile.mkdtemp(dir=self.folder.parent, prefix=".build-"))
        try:
            build(staging)
            files = {p.name: _sha256(p) for p in sorted(staging.iterdir()) if p.is_file()}
            (staging / MANIFEST).write_text(
                json.dumps({"key": self.key, "files": files}, indent=1, sort_keys=True)
            )
            if self.folder.exists():
                shutil.rmtree(self.folder, ignore_errors=True)
            try:
                os.rename(staging, self.folder)
            except OSError:
                # another process renamed its build into place first: use it if it is sound
                if self.problem() is not None:
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def base_key(
    spec: ModelSpec, engine: str, precision: str, versions: dict[str, str]
) -> dict[str, Any]:
    """What an exported model depends on: the model, the engine, the precision, libraries."""
    from attnswitch._version import __version__
    from attnswitch.engines.registry import library_version

    return {
        "model": model_fingerprint(spec.path),
        "pooling": spec.pooling,
        "normalize": spec.normalize,
        "engine": engine,
        "precision": precision,
        "attnswitch": __version__,
        "torch": library_version("torch"),
        "transformers": library_version("transformers"),
        **versions,
    }


def export_onnx(spec: ModelSpec, path: Path) -> None:
    """Write the float32 sentence-embedding graph of `spec` to `path` (see the module doc)."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(
        spec.path, attn_implementation="eager", dtype=torch.float32
    ).eval()
    wrapper = _sentence_embedding_module()(
        model, spec.pooling, spec.normalize, token_types="type_vocab_size" in spec.config
    )
    ids = torch.full((2, 8), spec.pad_token_id + 5, dtype=torch.int64)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    axes = {0: "batch", 1: "sequence"}
    with torch.inference_mode(), warnings.catch_warnings():
        # the tracer's notes on Python-side shape checks and index lowering: the graph is
        # checked against torch by the parity test of engines.autopick, not by them
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            (ids, mask),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding"],
            opset_version=ONNX_OPSET,
            dynamo=False,
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "embedding": {0: "batch"}},
        )


def _sentence_embedding_module() -> type:
    import torch

    class SentenceEmbedding(torch.nn.Module):
        """model -> pooled (and normalised) float32 vectors `[B, dim]`."""

        def __init__(self, model: Any, pooling: str, normalize: bool, token_types: bool):
            super().__init__()
            self.model, self.pooling, self.normalize = model, pooling, normalize
            self.token_types = token_types

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            extra = {"token_type_ids": torch.zeros_like(input_ids)} if self.token_types else {}
            hidden = self.model(
                input_ids=input_ids, attention_mask=attention_mask, **extra
            ).last_hidden_state
            if self.pooling == "cls":
                vectors = hidden[:, 0]
            elif self.pooling == "last":
                last = attention_mask.sum(dim=1) - 1
                vectors = hidden[torch.arange(hidden.shape[0]), last]
            else:
                real = attention_mask.unsqueeze(-1).to(hidden.dtype)
                vectors = (hidden * real).sum(dim=1) / real.sum(dim=1).clamp(min=1e-9)
            if self.normalize:
                vectors = torch.nn.functional.normalize(vectors, p=2.0, dim=1)
            return vectors

    return SentenceEmbedding
