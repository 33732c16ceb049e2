"""Pieces the torch backends share: masks on the tensors' device, and running a packed call
through a dense kernel by padding. Imported only by torch backends, after torch is."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from attnswitch.attention import masks
from attnswitch.attention.contract import Call


def dense_mask(call: Call, device: torch.device) -> torch.Tensor | None:
    """The call's joined bool mask, broadcastable to `[B, Hq, Sq, Sk]`, or None."""
    arange = functools.partial(torch.arange, device=device)
    return masks.dense_mask(call, arange, call.key_padding_mask, call.attn_mask)


def run_padded(
    dense: Callable[[Any, Any, Any, Call], Any], q: torch.Tensor, k: torch.Tensor,
    v: torch.Tensor, call: Call,
) -> Any:
    """Serve a packed call with a dense kernel: scatter the sequences into left-padded
    `[N, S, H, D]` batches with a key padding mask, run `dense`, gather the real rows back.
    Rows of zero-length sequences never exist; sequences with no keys give zeros (lse -inf)."""
    n = call.batch
    sq, sk = max(call.seqlen_q, 1), max(call.seqlen_k, 1)
    flat_q, _ = masks.padding_indices(call.seqlens_q, sq)
    flat_k, valid_k = masks.padding_indices(call.seqlens_k, sk)
    idx_q = torch.from_numpy(flat_q).to(q.device)
    idx_k = torch.from_numpy(flat_k).to(q.device)
    zeros = functools.partial(torch.zeros, dtype=q.dtype, device=q.device)
    qp = masks.pad_packed(q, idx_q, n, sq, zeros)
    kp = masks.pad_packed(k, idx_k, n, sk, zeros)
    vp = masks.pad_packed(v, idx_k, n, sk, zeros)
    sub = dataclasses.replace(
        call, layout="dense", seqlen_q=sq, seqlen_k=sk, key_padding=True,
        key_padding_mask=torch.from_numpy(valid_k).to(q.device), seqlens_q=None,
        seqlens_k=None, cu_seqlens_q=None, cu_seqlens_k=None,
    )
    result = dense(qp, kp, vp, sub)
    if not call.return_lse:
        return masks.unpad(result, idx_q)
    out, lse = result
    lse = lse.permute(0, 2, 1)  # [N, Sq, H] so packed rows gather along one axis
    return masks.unpad(out, idx_q), masks.unpad(lse, idx_q).transpose(0, 1)
