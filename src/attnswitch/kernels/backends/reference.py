"""`reference`: the float64 numpy oracle. Every feature, any input kind, slow by design.

Conformance measures every other backend against this one, so it is written for clarity:
explicit scores, explicit masks, an explicit safe softmax.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnswitch.kernels import arrays, masks
from attnswitch.kernels.backend import BackendBase, Capabilities
from attnswitch.kernels.contract import Call


def attention_f64(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, call: Call, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Dense float64 attention. q `[B, Sq, Hq, D]`, k/v `[B, Sk, Hkv, D]`, mask bool
    broadcastable to `[B, Hq, Sq, Sk]` or None. Returns out `[B, Sq, Hq, D]` and lse
    `[B, Hq, Sq]` (-inf for rows with no allowed key, whose output is 0)."""
    groups = call.heads_q // call.heads_kv
    k = np.repeat(k, groups, axis=2)
    v = np.repeat(v, groups, axis=2)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) * call.scale
    if call.softcap is not None:
        scores = call.softcap * np.tanh(scores / call.softcap)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    p = np.exp(scores - row_max)
    total = p.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = (np.log(total) + row_max)[..., 0]
    p = p / np.where(total == 0, 1.0, total)
    out = np.einsum("bhqk,bkhd->bqhd", p, v)
    return out, lse


class Reference(BackendBase):
    name = "reference"
    framework = "numpy"
    caps = Capabilities(
        device_kinds=("cpu", "cuda", "rocm", "tpu", "mps"),
        dtypes=("float16", "bfloat16", "float32", "float64"),
        accepts_all_frameworks=True,
    )
    libraries = ("numpy",)

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        q64, k64, v64 = (arrays.to_numpy(x).astype(np.float64) for x in (q, k, v))
        if call.packed:
            out, lse = self._packed(q64, k64, v64, call)
        else:
            kp = None if call.key_padding_mask is None else arrays.to_numpy(call.key_padding_mask)
            am = None if call.attn_mask is None else arrays.to_numpy(call.attn_mask)
            out, lse = attention_f64(q64, k64, v64, call, masks.dense_mask(call, np.arange, kp, am))
        out = arrays.numpy_to(out.astype(arrays.to_numpy(q).dtype), call.framework, like=q)
        if not call.return_lse:
            return out
        return out, arrays.numpy_to(lse.astype(np.float32), call.framework, like=q)

    @staticmethod
    def _packed(
        q: np.ndarray, k: np.ndarray, v: np.ndarray, call: Call
    ) -> tuple[np.ndarray, np.ndarray]:
        out = np.zeros_like(q)
        lse = np.full((call.heads_q, q.shape[0]), -np.inf)
        start_q = start_k = 0
        lens_q, lens_k = call.seqlens_q, call.seqlens_k
        if lens_q is None:  # lengths left on device: the oracle reads them (it syncs anyway)
            lens_q, lens_k = (
                np.diff(arrays.to_numpy(cu)).tolist()
                for cu in (call.cu_seqlens_q, call.cu_seqlens_k)
            )
        for len_q, len_k in zip(lens_q, lens_k):
            sq, sk = slice(start_q, start_q + len_q), slice(start_k, start_k + len_k)
            start_q, start_k = start_q + len_q, start_k + len_k
            if len_q == 0:
                continue
            if len_k == 0:
                continue  # no keys: zeros and -inf already in place
            sub = call.sequence(len_q, len_k)
            mask = masks.dense_mask(sub, np.arange)
            o, sub_lse = attention_f64(q[None, sq], k[None, sk], v[None, sk], sub, mask)
            out[sq], lse[:, sq] = o[0], sub_lse[0]
        return out, lse


BACKEND = Reference()
