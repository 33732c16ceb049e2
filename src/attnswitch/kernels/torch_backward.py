"""The attention backward in torch ops, from what the forward returned (FlashAttention's
formula): gradients of q, k and v (and through lse) given `out` and `lse`, without running
the forward again and without autograd.

With P the attention probabilities `exp(logits - lse)` (0 where masked) and dO the
gradient of `out`:
    dV = P^T dO,    dP = dO V^T,    dS = P * (dP - rowsum(dO * out) + dlse)
    dQ = scale * dS' K,    dK = scale * dS'^T Q,    dS' = dS * (1 - tanh^2) under softcap
GQA: query head h reads kv head `h // (Hq // Hkv)`; dK and dV sum over the query heads of a
kv head. Fully masked rows (lse -inf) get zero gradients. Computed in float32 (float64 for
float64 input) and cast back; memory O(Hq * Sq * Sk) per batch element (packed: Tq * Tk),
like torch-math's own backward.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from attnswitch.kernels import masks
from attnswitch.kernels.contract import Call

Tensor = torch.Tensor


def attention_backward(
    call: Call,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor | None,
    grad_out: Tensor,
    grad_lse: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) of a validated call. Dense: q, out, grad_out `[B, Sq, Hq, D]`, k, v
    `[B, Sk, Hkv, D]`, lse, grad_lse `[B, Hq, Sq]`. Packed: the same without B (`[Tq, Hq, D]`,
    lse `[Hq, Tq]`). `lse` None: formed from the logits (the forward did not return it);
    `grad_lse` None: lse was not differentiated."""
    if not call.packed:
        arange = functools.partial(torch.arange, device=q.device)
        mask = masks.dense_mask(call, arange, call.key_padding_mask, call.attn_mask)
        return _grads(call, q, k, v, out, lse, grad_out, grad_lse, mask)
    mask = packed_mask(call, q.shape[0], k.shape[0], q.device)[None, None]
    one = lambda x: None if x is None else x[None]  # noqa: E731
    grads = _grads(
        call, q[None], k[None], v[None], out[None], one(lse), grad_out[None], one(grad_lse), mask
    )
    return tuple(g[0] for g in grads)  # type: ignore[return-value]


def packed_mask(call: Call, total_q: int, total_k: int, device: Any) -> Tensor:
    """Bool `[Tq, Tk]`: packed query row r may attend packed key row u (same sequence, and
    within the call's bounds around r's own bottom-right diagonal). Reads no value on the
    host: sequence ids come from `searchsorted` on the device."""
    cu_q, cu_k = call.cu_seqlens_q.long(), call.cu_seqlens_k.long()
    rows_q = torch.arange(total_q, device=device)
    rows_k = torch.arange(total_k, device=device)
    seg_q = torch.searchsorted(cu_q[1:], rows_q, right=True)
    seg_k = torch.searchsorted(cu_k[1:], rows_k, right=True)
    mask = seg_q[:, None] == seg_k[None, :]
    diag = rows_q + masks.diagonal_offset(cu_q[seg_q + 1], cu_k[seg_q + 1])
    inside = masks.bounds_mask(diag[:, None], rows_k[None, :], call.bounds)
    return mask if inside is None else mask & inside


def _grads(
    call: Call,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor | None,
    grad_out: Tensor,
    grad_lse: Tensor | None,
    mask: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The dense formula; `mask` bool broadcastable to `[B, Hq, Sq, Sk]` or None."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    ct = torch.float64 if q.dtype == torch.float64 else torch.float32
    per_kv = lambda x: x.to(ct).permute(0, 2, 1, 3).reshape(b, hkv, g, sq, d)  # noqa: E731
    qh, o, do = per_kv(q), per_kv(out), per_kv(grad_out)
    kh, vh = (x.to(ct).permute(0, 2, 1, 3) for x in (k, v))  # [B, Hkv, Sk, D]

    logits = call.scale * torch.einsum("bhgqd,bhkd->bhgqk", qh, kh)
    tanh = None
    if call.softcap is not None:
        tanh = torch.tanh(logits / call.softcap)
        logits = call.softcap * tanh
    if mask is not None:
        allowed = mask.expand(b, hq, sq, sk).reshape(b, hkv, g, sq, sk)
        logits = logits.masked_fill(~allowed, float("-inf"))
    if lse is None:
        lse_h = torch.logsumexp(logits, dim=-1)
    else:
        lse_h = lse.to(ct).reshape(b, hkv, g, sq)
    has_key = torch.isfinite(lse_h)[..., None]
    p = torch.where(has_key, torch.exp(logits - lse_h[..., None]), 0.0)

    dv = torch.einsum("bhgqk,bhgqd->bhkd", p, do)
    ds = torch.einsum("bhgqd,bhkd->bhgqk", do, vh) - (do * o).sum(-1, keepdim=True)
    if grad_lse is not None:
        ds = ds + grad_lse.to(ct).reshape(b, hkv, g, sq)[..., None]
    ds = p * ds
    if tanh is not None:
        ds = ds * (1 - tanh * tanh)
    dq = call.scale * torch.einsum("bhgqk,bhkd->bhgqd", ds, kh)
    dk = call.scale * torch.einsum("bhgqk,bhgqd->bhkd", ds, qh)
    dq = dq.reshape(b, hq, sq, d).permute(0, 2, 1, 3)
    return (
        dq.to(q.dtype).contiguous(),
        dk.permute(0, 2, 1, 3).to(k.dtype).contiguous(),
        dv.permute(0, 2, 1, 3).to(v.dtype).contiguous(),
    )
