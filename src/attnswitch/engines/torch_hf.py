"""The torch engine: an unmodified transformers `AutoModel` whose attention runs through
attnswitch (`attn_implementation="attnswitch"`), so the planner picks the kernel.

Speed on CPU comes from avoiding redundant work and from the faster GEMM:
- texts sorted by token count and cut into small token-budget batches (`base.plan_batches`):
  padding almost vanishes and activations stay in cache;
- a batch whose texts have one length is sent without a mask, so attention runs unmasked;
  otherwise the 2D padding mask becomes a key padding mask (see the transformers
  integration), which keeps the fused SDPA kernel;
- `torch.inference_mode()`;
- on CPU, linear layers run on oneDNN with prepacked weights (`onednn.pack_linears`;
  `linear="torch"` keeps `nn.Linear`): torch's default MKL GEMM was 2-3x slower on the
  machine this was measured on.
`compile=True` runs the model under `torch.compile` (inductor, dynamic shapes, freezing,
which prepacks the linears its own way): on 300 corpus chunks it was faster than the eager
engine (docs/results/e2e_vs_sentence_transformers.md, variant `asw-torch-fp32-compile`),
but its first call compiles for about 30 s per process, so it is asked for, not the default.
Precision "fp32" is float32 throughout. "bf16" runs under `torch.autocast` with bfloat16
(attention and any other matmul in bfloat16) with the linear layers multiplying in bfloat16
and returning float32, so residuals and LayerNorm stay float32: more accurate than bfloat16
outputs, and faster on CPU (bfloat16 elementwise kernels are slow there).
`layout="packed"` concatenates a batch into one row with `position_ids` restarting per text:
no padding token is computed, and attention gets the packed layout (`cu_seqlens`).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import numpy as np

from attnswitch.engines.base import EncodeInputError, Encoder, padded
from attnswitch.engines.model import ModelSpec
from attnswitch.engines.registry import Engine, library_version

LAYOUTS = ("padded", "packed")
LINEARS = ("auto", "onednn", "torch")
# RoBERTa-style models number positions from padding_idx + 1
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert")


class TorchEncoder(Encoder):
    engine = "torch"
    # Measured with all-MiniLM-L6-v2 on 617 real chunks, 2-core CPU: with one torch thread
    # batches of 16 and 32 tie (8 and 64 are slower); with two threads on a busy machine each
    # parallel op pays for thread wake-ups, so fewer, larger ops (32) won clearly.
    default_batch_tokens = 4096
    max_batch = 32

    def __init__(
        self,
        spec: ModelSpec,
        precision: str = "fp32",
        *,
        device: str | None = None,
        layout: str = "padded",
        linear: str = "auto",
        compile: bool = False,
    ):
        super().__init__(spec, precision)
        if layout not in LAYOUTS:
            raise EncodeInputError("layout", f"one of {', '.join(LAYOUTS)}", repr(layout))
        if linear not in LINEARS:
            raise EncodeInputError("linear", f"one of {', '.join(LINEARS)}", repr(linear))
        if compile and linear == "onednn":
            raise EncodeInputError(
                "linear",
                "'auto' or 'torch' with compile=True (inductor prepacks the linears itself)",
                repr(linear),
            )
        start = time.perf_counter()
        import torch
        from transformers import AutoModel

        from attnswitch.integrations import transformers as hf

        hf.register()
        self.load_times["import_s"] = time.perf_counter() - start
        start = time.perf_counter()
        self.layout = layout
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = (
            AutoModel.from_pretrained(spec.path, attn_implementation=hf.NAME, dtype=torch.float32)
            .to(self.device)
            .eval()
        )
        self.compiled = compile
        self.linear = self._pack_linears("torch" if compile else linear)
        if compile:
            # freezing: inductor folds the weights as constants and prepacks the linears
            # with oneDNN itself; dynamic: one graph for every batch shape
            self.model = torch.compile(self.model, dynamic=True, options={"freezing": True})
        self._position_offset = spec.pad_token_id + 1 if spec.model_type in _OFFSET_POSITIONS else 0
        self.load_times["model_s"] = time.perf_counter() - start

    def _pack_linears(self, linear: str) -> str:
        """Swap in oneDNN linears where asked and usable; returns what the linears run on."""
        import torch

        if linear == "torch" or self.device.type != "cpu":
            return "nn.Linear"
        from attnswitch.engines import onednn

        compute = torch.bfloat16 if self.precision == "bf16" else torch.float32
        why = onednn.unavailable(compute)
        if why is not None:
            if linear == "onednn":
                raise EncodeInputError("linear", "usable oneDNN linears", why)
            return f"nn.Linear (oneDNN linears unavailable: {why})"
        n = onednn.pack_linears(self.model, compute, out_dtype=torch.float32)
        return f"oneDNN prepacked linears ({n})"

    def _autocast(self) -> Any:
        import torch

        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def inputs(self, batch: list[list[int]]) -> dict[str, Any]:
        """The model's keyword inputs for a batch of token id lists."""
        import torch

        if self.layout == "packed":
            flat = np.concatenate([np.asarray(row, dtype=np.int64) for row in batch])
            positions = np.concatenate([np.arange(len(row)) for row in batch])
            positions += self._position_offset
            return {
                "input_ids": torch.from_numpy(flat)[None].to(self.device),
                "position_ids": torch.from_numpy(positions.astype(np.int64))[None].to(self.device),
            }
        ids, mask = padded(batch, self.spec.pad_token_id)
        inputs = {"input_ids": torch.from_numpy(ids).to(self.device)}
        if not mask.all():
            inputs["attention_mask"] = torch.from_numpy(mask).to(self.device)
        return inputs

    def _forward(self, batch: list[list[int]], batch_tokens: int) -> np.ndarray:
        import torch

        lengths = torch.tensor([len(row) for row in batch], device=self.device)
        with torch.inference_mode(), self._autocast():
            hidden = self.model(**self.inputs(batch)).last_hidden_state.float()
            if self.layout == "packed":
                vectors = _pool_packed(hidden[0], lengths, self.spec.pooling)
            else:
                vectors = _pool_padded(hidden, lengths, self.spec.pooling)
            if self.spec.normalize:
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return vectors.cpu().numpy()

    def explain(self, text: str = "attnswitch explains its plan") -> Any:
        from attnswitch.integrations.transformers import explain_model

        return explain_model(self.model, self.inputs(self.tokenize([text])))

    def device_label(self) -> str:
        if self.device.type == "cuda":
            import torch

            return torch.cuda.get_device_name(self.device)
        return self.device.type

    def describe(self) -> str:
        return (
            f"transformers {library_version('transformers')} AutoModel on torch "
            f"{library_version('torch')} ({self.device.type}), attention through "
            f"attnswitch, {self.linear}, {self.precision}, {self.layout} batches"
            + ("; torch.compile (inductor, dynamic shapes, freezing)" if self.compiled else "")
        )


class TorchEngine(Engine):
    name = "torch"
    requires = ("torch", "transformers", "tokenizers")
    runtime = ("torch", "transformers")
    extra = "torch,models"
    devices = ("cpu", "cuda")
    precisions = ("fp32", "bf16")
    layouts = LAYOUTS
    reference = True

    def detail(self) -> str:
        return (
            f"transformers {library_version('transformers')} AutoModel, "
            f"attn_implementation='attnswitch', torch {library_version('torch')}"
        )

    def load(self, spec: ModelSpec, precision: str, layout: str = "padded") -> Encoder:
        return TorchEncoder(spec, precision, layout=layout)


ENGINE = TorchEngine()


def _pool_padded(hidden: Any, lengths: Any, mode: str) -> Any:
    """Pool right-padded `[B, S, H]` hidden states over each row's first `lengths` tokens."""
    import torch

    if mode == "cls":
        return hidden[:, 0]
    if mode == "last":
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), lengths - 1]
    real = torch.arange(hidden.shape[1], device=hidden.device)[None] < lengths[:, None]
    real = real.to(hidden.dtype)[..., None]
    return (hidden * real).sum(dim=1) / real.sum(dim=1).clamp(min=1e-9)


def _pool_packed(hidden: Any, lengths: Any, mode: str) -> Any:
    """Pool packed `[T, H]` hidden states of sequences of `lengths` laid end to end."""
    import torch

    ends = torch.cumsum(lengths, 0)
    starts = ends - lengths
    if mode == "cls":
        return hidden[starts]
    if mode == "last":
        return hidden[ends - 1]
    seg = torch.repeat_interleave(torch.arange(len(lengths), device=hidden.device), lengths)
    sums = torch.zeros((len(lengths), hidden.shape[1]), dtype=hidden.dtype, device=hidden.device)
    sums.index_add_(0, seg, hidden)
    return sums / lengths[:, None].to(hidden.dtype)
