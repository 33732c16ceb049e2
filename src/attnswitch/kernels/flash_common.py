"""What the two FlashAttention backends (`flash-attn`, `flash-attn-3`) share.

Both libraries answer one calling convention, which matches the contract: BSHD q/k/v,
`softmax_scale`, bottom-right `causal`, `window_size=(left, right)` around the aligned
diagonal (-1 unbounded), `softcap` (0 = off), GQA by fewer k/v heads, `return_attn_probs`
to get the natural-log lse (`[B, Hq, Sq]` dense, `[Hq, Tq]` varlen) as the second item, and
a varlen function taking `(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)`
first. Neither has a mask input. So the dispatch lives here once:

- packed calls go to the varlen function;
- a key padding mask without causal or window gathers the kept keys of each example into a
  varlen call (every query row stays); with causal or window it is declined, because varlen
  aligns the diagonal to each example's real key count, the contract to the padded length;
- head dims that are not a multiple of the kernel's alignment are zero-padded (exact: zero
  columns add nothing to q.k and give zero output columns, which are cut off; the scale is
  passed explicitly, from the real head dim);
- an lse of `+inf` (FlashAttention 2's value for a row with no key) becomes the contract's
  `-inf`.

No torch import at module level: backends import this module when they are loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attnswitch.kernels.contract import Call


def key_padding_declines(call: Call) -> list[str]:
    """The rule the key padding path adds (see the module docstring)."""
    if call.key_padding and call.bounds is not None:
        return [
            "key_padding_mask with causal/window: varlen would align the diagonal to each "
            "sequence's real length, not the padded one"
        ]
    return []


def padded_head_dim(head_dim: int, multiple: int) -> int:
    return -(-head_dim // multiple) * multiple


def detail(call: Call, head_dim_multiple: int = 1) -> str:
    """Which library function serves `call`, for plans."""
    if call.packed:
        text = "flash_attn_varlen_func"
    elif call.key_padding:
        text = "flash_attn_varlen_func over the unpadded keys"
    else:
        text = "flash_attn_func"
    padded = padded_head_dim(call.head_dim, head_dim_multiple)
    if padded != call.head_dim:
        text += f", head dim {call.head_dim} padded to {padded}"
    return text


def run(
    dense: Callable[..., Any],
    varlen: Callable[..., Any],
    q: Any,
    k: Any,
    v: Any,
    call: Call,
    *,
    head_dim_multiple: int = 1,
) -> Any:
    """Serve `call` with a library's `flash_attn_func` / `flash_attn_varlen_func` pair.

    `head_dim_multiple`: pad the head dim up to this multiple first (1 = the library pads
    itself). Returns out like q, or `(out, lse)` with `call.return_lse`.
    """
    import torch

    head_dim = call.head_dim
    pad = padded_head_dim(head_dim, head_dim_multiple) - head_dim
    if pad:
        q, k, v = (torch.nn.functional.pad(x, (0, pad)) for x in (q, k, v))
    common = dict(
        softmax_scale=call.scale,
        causal=call.causal,
        window_size=call.window or (-1, -1),
        softcap=call.softcap or 0.0,
        return_attn_probs=call.return_lse,
    )
    if call.packed:
        cu_q, cu_k = (cu.to(q.device) for cu in (call.cu_seqlens_q, call.cu_seqlens_k))
        result = varlen(q, k, v, cu_q, cu_k, call.seqlen_q, call.seqlen_k, **common)
    elif call.key_padding:
        result = _varlen_over_padded_keys(varlen, q, k, v, call, common)
    else:
        result = dense(q, k, v, **common)
    out, lse = (result[0], result[1]) if call.return_lse else (result, None)
    if pad:
        out = out[..., :head_dim]
    if lse is None:
        return out
    return out, torch.where(torch.isposinf(lse), torch.full_like(lse, float("-inf")), lse)


def _varlen_over_padded_keys(
    varlen: Callable[..., Any],
    q: Any,
    k: Any,
    v: Any,
    call: Call,
    common: dict[str, Any],
) -> Any:
    """Gather the keys a `[B, Sk]` padding mask keeps into packed rows and run varlen: every
    query row stays, each example's keys are its kept keys in order. Returns what `varlen`
    returns, with out reshaped like q and lse as `[B, Hq, Sq]`."""
    import torch

    mask = call.key_padding_mask
    b, sq, sk, d = call.batch, call.seqlen_q, call.seqlen_k, q.shape[-1]
    counts = mask.sum(dim=1, dtype=torch.int32)
    cu_k = torch.nn.functional.pad(counts.cumsum(0, dtype=torch.int32), (1, 0))
    cu_q = torch.arange(0, (b + 1) * sq, sq, dtype=torch.int32, device=q.device)
    keep = mask.reshape(-1).nonzero(as_tuple=True)[0]
    kk = k.reshape(b * sk, call.heads_kv, d)[keep]
    vv = v.reshape(b * sk, call.heads_kv, d)[keep]
    qq = q.reshape(b * sq, call.heads_q, d)
    result = varlen(qq, kk, vv, cu_q, cu_k, sq, sk, **common)
    if not call.return_lse:
        return result.reshape(q.shape)
    out, lse = result[0], result[1]  # lse [Hq, B*Sq]
    return out.reshape(q.shape), lse.reshape(call.heads_q, b, sq).transpose(0, 1)
