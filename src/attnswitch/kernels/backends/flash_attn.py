"""`flash-attn`: Dao-AILab FlashAttention 2 on NVIDIA GPUs (extra `attnswitch[cuda]`).

Native conventions match the contract: BSHD, bottom-right causal, `window_size=(left,
right)` around the aligned diagonal, softcap, GQA, natural-log lse. Dense calls use
`flash_attn_func`, packed calls `flash_attn_varlen_func`; a key padding mask without causal
or window runs varlen over the kept keys, with causal or window it is declined (the
dispatch, shared with `flash-attn-3`, is in `kernels/flash_common.py`).

Rules (flash_attn 2.x): CUDA compute capability 8.0 or newer (Ampere, Ada, Hopper, Blackwell),
float16 or bfloat16, head dim at most 256 (padded to a multiple of 8 by the library), no
arbitrary `attn_mask`. Rows with no key give zeros; the library's lse there is `+inf`, which
is mapped to the contract's `-inf`.
"""

from __future__ import annotations

from typing import Any

from attnswitch.kernels import flash_common
from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call

MIN_CAPABILITY = (8, 0)
HEAD_DIM_MAX = 256


class FlashAttn(BackendBase):
    name = "flash-attn"
    framework = "torch"
    caps = Capabilities(
        device_kinds=("cuda",),
        dtypes=("float16", "bfloat16"),
        head_dim_max=HEAD_DIM_MAX,
        attn_mask=False,
        grad=True,
    )
    libraries = ("flash-attn", "torch")

    def _probe(self) -> str | None:
        if why := import_reason("torch", "torch"):
            return why
        import torch

        if not torch.cuda.is_available():
            return "needs an NVIDIA GPU with CUDA (none visible to torch)"
        if why := import_reason("flash_attn", "cuda"):
            return why
        cap = torch.cuda.get_device_capability()
        if cap < MIN_CAPABILITY:
            return f"needs compute capability >= 8.0, this GPU has {cap[0]}.{cap[1]}"
        return None

    def extra_declines(self, call: Call) -> list[str]:
        reasons = []
        cap = call.device.capability
        if call.device.kind == "cuda" and cap is not None and cap < MIN_CAPABILITY:
            reasons.append(
                f"compute capability {cap[0]}.{cap[1]} < 8.0 (FlashAttention 2 needs Ampere or newer)"
            )
        reasons.extend(flash_common.key_padding_declines(call))
        return reasons

    def detail(self, call: Call) -> str | None:
        return flash_common.detail(call)

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from flash_attn import flash_attn_func, flash_attn_varlen_func

        return flash_common.run(flash_attn_func, flash_attn_varlen_func, q, k, v, call)


BACKEND = FlashAttn()
