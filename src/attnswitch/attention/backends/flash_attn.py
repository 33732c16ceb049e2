"""`flash-attn`: Dao-AILab FlashAttention 2 on NVIDIA GPUs (extra `attnswitch[cuda]`).

Native conventions match the contract: BSHD, bottom-right causal, `window_size=(left,
right)` around the aligned diagonal, softcap, GQA, natural-log lse. Dense calls use
`flash_attn_func`, packed calls `flash_attn_varlen_func`. A key padding mask without causal
or window gathers the real keys into a varlen call (FlashAttention has no mask input); with
causal or window it is declined, because varlen aligns the diagonal to each sequence's real
key count while the contract aligns it to the padded length.

Rules (flash_attn 2.x): CUDA compute capability 8.0 or newer (Ampere, Ada, Hopper, Blackwell),
float16 or bfloat16, head dim at most 256 (padded to a multiple of 8 by the library), no
arbitrary `attn_mask`. Rows with no key give zeros; the library's lse there is `+inf`, which
is mapped to the contract's `-inf`.
"""

from __future__ import annotations

from typing import Any

from attnswitch.attention.backend import BackendBase, Capabilities, import_reason
from attnswitch.attention.contract import Call

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
            reasons.append(f"compute capability {cap[0]}.{cap[1]} < 8.0 (FlashAttention 2 needs Ampere or newer)")
        if call.key_padding and call.bounds is not None:
            reasons.append(
                "key_padding_mask with causal/window: varlen would align the diagonal to each "
                "sequence's real length, not the padded one"
            )
        return reasons

    def detail(self, call: Call) -> str | None:
        if call.packed:
            return "flash_attn_varlen_func"
        if call.key_padding:
            return "flash_attn_varlen_func over the unpadded keys"
        return "flash_attn_func"

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        import torch
        from flash_attn import flash_attn_func, flash_attn_varlen_func

        common = dict(
            softmax_scale=call.scale, causal=call.causal, window_size=call.window or (-1, -1),
            softcap=call.softcap or 0.0, return_attn_probs=call.return_lse,
        )
        if call.packed:
            result = flash_attn_varlen_func(
                q, k, v, call.cu_seqlens_q, call.cu_seqlens_k, call.seqlen_q, call.seqlen_k,
                **common,
            )
        elif call.key_padding:
            result = _varlen_over_padded_keys(flash_attn_varlen_func, q, k, v, call, common)
        else:
            result = flash_attn_func(q, k, v, **common)
        if not call.return_lse:
            return result
        out, lse = result[0], result[1]
        return out, torch.where(torch.isposinf(lse), torch.full_like(lse, float("-inf")), lse)


def _varlen_over_padded_keys(varlen: Any, q: Any, k: Any, v: Any, call: Call, common: dict) -> Any:
    """Gather the keys a `[B, Sk]` padding mask keeps into packed rows and run varlen: every
    query row stays, each example's keys are its kept keys in order."""
    import torch

    mask = call.key_padding_mask
    b, sq = call.batch, call.seqlen_q
    counts = mask.sum(dim=1, dtype=torch.int32)
    cu_k = torch.nn.functional.pad(counts.cumsum(0, dtype=torch.int32), (1, 0))
    cu_q = torch.arange(0, (b + 1) * sq, sq, dtype=torch.int32, device=q.device)
    keep = mask.reshape(-1).nonzero(as_tuple=True)[0]
    kk = k.reshape(b * call.seqlen_k, call.heads_kv, call.head_dim)[keep]
    vv = v.reshape(b * call.seqlen_k, call.heads_kv, call.head_dim)[keep]
    qq = q.reshape(b * sq, call.heads_q, call.head_dim)
    result = varlen(qq, kk, vv, cu_q, cu_k, sq, call.seqlen_k, **common)
    if not call.return_lse:
        return result.reshape(q.shape)
    out, lse = result[0], result[1]  # lse [Hq, B*Sq]
    return out.reshape(q.shape), lse.reshape(call.heads_q, b, sq).transpose(0, 1)


BACKEND = FlashAttn()
