"""`torch-math`: plain matmul-softmax-matmul in torch, every feature, float32 softmax.

Materialises the `[B, Hq, Sq, Sk]` scores, so it is the portable fallback, not the fast
path. Matmuls run in the input dtype; the softmax and lse run in float32. Differentiable.
"""

from __future__ import annotations

from typing import Any

from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call


class TorchMath(BackendBase):
    name = "torch-math"
    framework = "torch"
    caps = Capabilities(
        device_kinds=("cpu", "cuda", "rocm", "mps", "xpu"),
        dtypes=("float16", "bfloat16", "float32", "float64"),
        grad=True,
    )
    libraries = ("torch",)

    def _probe(self) -> str | None:
        return import_reason("torch", "torch")

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from attnswitch.kernels import torch_common

        if call.packed:
            return torch_common.run_padded(self._dense, q, k, v, call)
        return self._dense(q, k, v, call)

    @staticmethod
    def _dense(q: Any, k: Any, v: Any, call: Call) -> Any:
        import torch

        from attnswitch.kernels import torch_common

        groups = call.heads_q // call.heads_kv
        qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))  # [B, H, S, D]
        if groups > 1:
            kh = kh.repeat_interleave(groups, dim=1)
            vh = vh.repeat_interleave(groups, dim=1)
        # Scale q before the matmul (as FlashAttention's reference does): float16 scores of
        # large inputs would overflow before the scale could shrink them.
        scores = torch.matmul(qh * call.scale, kh.transpose(-1, -2))
        scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
        if call.softcap is not None:
            scores = call.softcap * torch.tanh(scores / call.softcap)
        mask = torch_common.dense_mask(call, q.device)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        row_max = scores.amax(dim=-1, keepdim=True)
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        p = torch.exp(scores - row_max)
        total = p.sum(dim=-1, keepdim=True)
        p = p / torch.where(total == 0, torch.ones_like(total), total)
        out = torch.matmul(p.to(v.dtype), vh).transpose(1, 2)
        if not call.return_lse:
            return out
        lse = (torch.log(total) + row_max).squeeze(-1)
        return out, lse


BACKEND = TorchMath()
