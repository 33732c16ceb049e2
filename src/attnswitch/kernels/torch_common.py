"""Pieces the torch backends share: masks on the tensors' device, and running a packed call
through a dense kernel by padding. Imported only by torch backends, after torch is."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from attnswitch.kernels import masks
from attnswitch.kernels.contract import Call


def dense_mask(call: Call, device: torch.device) -> torch.Tensor | None:
    """The call's joined bool mask, broadcastable to `[B, Hq, Sq, Sk]`, or None."""
    arange = functools.partial(torch.arange, device=device)
    return masks.dense_mask(call, arange, call.key_padding_mask, call.attn_mask)


def run_padded(
    dense: Callable[[Any, Any, Any, Call], Any],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    call: Call,
) -> Any:
    """Serve a packed call with a dense kernel: scatter the sequences into left-padded
    `[N, S, H, D]` batches with a key padding mask, run `dense`, gather the real rows back.
    Rows of zero-length sequences never exist; sequences with no keys give zeros (lse -inf).

    Everything is computed on the tensors' device from `cu_seqlens` and the call's maxima
    (`seqlen_q/k`, host ints): fixed-shape gathers only, so no value is read on the host
    and nothing synchronises a device."""
    n = call.batch
    sq, sk = max(call.seqlen_q, 1), max(call.seqlen_k, 1)
    cu_q = call.cu_seqlens_q.to(device=q.device, dtype=torch.long)
    cu_k = call.cu_seqlens_k.to(device=q.device, dtype=torch.long)
    rows_q, valid_q = _left_padded_rows(cu_q, sq)
    rows_k, valid_k = _left_padded_rows(cu_k, sk)
    qp = _gather_rows(q, rows_q, valid_q)
    kp, vp = _gather_rows(k, rows_k, valid_k), _gather_rows(v, rows_k, valid_k)
    sub = dataclasses.replace(
        call,
        layout="dense",
        seqlen_q=sq,
        seqlen_k=sk,
        key_padding=True,
        key_padding_mask=valid_k,
        seqlens_q=None,
        seqlens_k=None,
        total_q=0,
        total_k=0,
        cu_seqlens_q=None,
        cu_seqlens_k=None,
    )
    result = dense(qp, kp, vp, sub)
    back = _packed_rows(cu_q, q.shape[0], sq)  # [Tq]: each packed row's padded row
    if not call.return_lse:
        return result.reshape(n * sq, *result.shape[2:])[back]
    out, lse = result
    lse = lse.permute(0, 2, 1).reshape(n * sq, -1)  # [N*Sq, H] so rows gather along one axis
    return out.reshape(n * sq, *out.shape[2:])[back], lse[back].transpose(0, 1)


def _left_padded_rows(cu: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For `[N, width]` left-padded slots: the packed row each slot holds (clamped for
    padding) and whether it is real. Sequence i ends at `cu[i+1]`, so slot p holds row
    `cu[i+1] - width + p`, real iff `p >= width - len_i`."""
    ends, lengths = cu[1:, None], (cu[1:] - cu[:-1])[:, None]
    pos = torch.arange(width, device=cu.device)
    valid = pos >= width - lengths
    return (ends - width + pos).clamp(min=0), valid


def _gather_rows(x: torch.Tensor, rows: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """`x [T, H, D]` gathered into `[N, S, H, D]` at `rows`, zero where not `valid`."""
    if x.shape[0] == 0:
        return x.new_zeros((*rows.shape, *x.shape[1:]))
    picked = x[rows.clamp(max=x.shape[0] - 1)]
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    return torch.where(valid[..., None, None], picked, zero)


def _packed_rows(cu: torch.Tensor, total: int, width: int) -> torch.Tensor:
    """`[total]`: for each packed row, its slot in the flattened `[N * width]` left-padded
    batch (the inverse of `_left_padded_rows`)."""
    rows = torch.arange(total, device=cu.device)
    seq = torch.searchsorted(cu[1:], rows, right=True)
    return seq * width + rows - cu[1:][seq] + width
