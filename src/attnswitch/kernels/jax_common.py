"""Helpers shared by the jax backends: layout transforms, packed-sequence metadata, masks.

Everything here is traceable: it runs on tracers inside `jax.jit`, so per-sequence facts of a
packed call are derived on device from `cu_seqlens`, never read on the host. Import it only
from inside a backend's functions (it imports jax).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from attnswitch.kernels import masks
from attnswitch.kernels.contract import Call


def bshd_to_bhsd(x: Any) -> Any:
    """`[B, S, H, D]` -> `[B, H, S, D]` (and back: the transform is its own inverse)."""
    return jnp.swapaxes(x, 1, 2)


bhsd_to_bshd = bshd_to_bhsd


def segment_ids(cu_seqlens: Any, total: int) -> Any:
    """int32 `[total]`: the sequence each packed row belongs to (zero-length sequences own
    no row)."""
    rows = jnp.arange(total, dtype=jnp.int32)
    return (jnp.searchsorted(cu_seqlens, rows, side="right") - 1).astype(jnp.int32)


def packed_positions(cu_q: Any, cu_k: Any, total_q: int) -> tuple[Any, Any]:
    """For packed queries: (segment id `[Tq]`, aligned key row `[Tq]`).

    The aligned key row is the bottom-right diagonal of each query in absolute packed key
    rows: query row `r` of sequence s (local index `r - cu_q[s]`) aligns with local key
    `r - cu_q[s] + len_k(s) - len_q(s)`, i.e. absolute key row `r + cu_k[s+1] - cu_q[s+1]`.
    With key rows as positions, `masks.bounds_mask` then applies causal/window per sequence.
    """
    seg_q = segment_ids(cu_q, total_q)
    rows = jnp.arange(total_q, dtype=jnp.int32)
    diag = rows + masks.diagonal_offset(cu_q[seg_q + 1], cu_k[seg_q + 1])
    return seg_q, diag


def packed_mask(call: Call, cu_q: Any, cu_k: Any, total_q: int, total_k: int) -> Any:
    """Bool `[Tq, Tk]`: packed query row may attend packed key row (same sequence, within
    the call's bottom-right bounds)."""
    seg_q, diag = packed_positions(cu_q, cu_k, total_q)
    seg_k = segment_ids(cu_k, total_k)
    mask = seg_q[:, None] == seg_k[None, :]
    key_rows = jnp.arange(total_k, dtype=jnp.int32)
    bounded = masks.bounds_mask(diag[:, None], key_rows[None, :], call.bounds)
    return mask if bounded is None else mask & bounded


# tanh's odd Taylor series (x - x^3/3 + 2x^5/15 - ...): coefficients of x^3, x^5, ..., x^13.
_TANH_SERIES = (-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075)
_TANH_SERIES_BELOW = 0.3  # |x| where the series (to x^13) is exact in float32
_TANH_ONE_FROM = 9.1  # tanh(|x|) rounds to 1 in float32 from here


def accurate_tanh(x: Any) -> Any:
    """tanh of float32 `x` within 1.5 ulp (measured over |x| in [1e-30, 30]; numpy's float32
    tanh: 1.4; XLA:CPU's `jnp.tanh`: 4.6, see docs/architecture.md, "Softcap in float32").

    XLA's tanh is a fast rational approximation; softcap's logits inherit its error, which
    made float32 softcap miss the conformance rule. Hand-written because no JAX function
    offers an accurate float32 tanh: below |x| = 0.3 the odd Taylor series to x^13 (its
    truncation is under 1e-9 relative there), above it `e / (e + 2)` with
    `e = expm1(2|x|)`, whose cancellation-free form is accurate where the series is not.
    Both branches are evaluated (jnp.where); their inputs are clamped so that neither
    overflows, which keeps gradients finite."""
    a = jnp.abs(x)
    small = a < _TANH_SERIES_BELOW
    xs = jnp.where(small, x, jnp.zeros_like(x))
    x2 = xs * xs
    poly = jnp.full_like(x2, _TANH_SERIES[-1])
    for c in reversed(_TANH_SERIES[:-1]):
        poly = poly * x2 + jnp.asarray(c, x2.dtype)
    series = xs + xs * (x2 * poly)
    e = jnp.expm1(2 * jnp.minimum(a, _TANH_ONE_FROM))
    return jnp.where(small, series, jnp.copysign(e / (e + 2), x))


def softcap(scores: Any, cap: float, accurate: bool = True) -> Any:
    """The contract's softcap `cap * tanh(scores / cap)` on float32 scores, with
    `accurate_tanh` when `accurate` (float32 outputs), else XLA's faster tanh, whose error
    is far below what rounding to float16/bfloat16 adds."""
    c = jnp.float32(cap)
    return c * (accurate_tanh if accurate else jnp.tanh)(scores / c)


def dense_mask(call: Call) -> Any:
    """Bool mask broadcastable to `[B, Hq, Sq, Sk]` for a dense call (bounds, key padding,
    attn_mask), or None when nothing is masked."""
    return masks.dense_mask(call, jnp.arange, call.key_padding_mask, call.attn_mask)


def zero_empty_rows(out: Any, lse: Any, mask: Any) -> tuple[Any, Any]:
    """Apply the contract to query rows whose `mask` allows no key: out `[B, Sq, Hq, D]`
    becomes 0 there and lse `[B, Hq, Sq]` (or None) -inf. Kernels that mask with a finite
    large negative number return mean(V) for such rows instead."""
    b, sq, hq, _ = out.shape
    any_key = jnp.broadcast_to(jnp.any(mask, axis=-1), (b, hq, sq))
    out = jnp.where(jnp.transpose(any_key, (0, 2, 1))[..., None], out, jnp.zeros((), out.dtype))
    if lse is not None:
        lse = jnp.where(any_key, lse, -jnp.inf)
    return out, lse


def empty_result(q: Any, call: Call) -> Any:
    """The result for calls with no key at all (Sk = 0 or Tk = 0) or no query: zeros and
    lse -inf in the contract's shapes."""
    out = jnp.zeros_like(q)
    if not call.return_lse:
        return out
    if call.packed:
        return out, jnp.full((call.heads_q, q.shape[0]), -jnp.inf, jnp.float32)
    return out, jnp.full((q.shape[0], call.heads_q, q.shape[1]), -jnp.inf, jnp.float32)


def run_jitted(fn: Callable[..., Any], q: Any, k: Any, v: Any, call: Call, *static: Any) -> Any:
    """Run `fn(q, k, v, call, *static)` compiled once per static configuration: the call's
    arrays (masks, cu_seqlens) become traced arguments, its other fields and `static` are
    compile-time constants. Works inside an outer `jax.jit` too (the inner one inlines)."""
    key = dataclasses.replace(
        call,
        key_padding_mask=None,
        attn_mask=None,
        cu_seqlens_q=None,
        cu_seqlens_k=None,
        seqlens_q=None,
        seqlens_k=None,
        traced=False,
    )
    if call.packed:  # the longest lengths don't shape the program: share it across batches
        key = dataclasses.replace(key, seqlen_q=q.shape[0], seqlen_k=k.shape[0])
    compiled = _compiled(fn, key, static)
    return compiled(
        q, k, v, call.key_padding_mask, call.attn_mask, call.cu_seqlens_q, call.cu_seqlens_k
    )


@functools.lru_cache(maxsize=256)
def _compiled(fn: Callable[..., Any], key: Call, static: tuple[Any, ...]) -> Callable[..., Any]:
    def body(q: Any, k: Any, v: Any, kp: Any, am: Any, cu_q: Any, cu_k: Any) -> Any:
        call = dataclasses.replace(
            key, key_padding_mask=kp, attn_mask=am, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k
        )
        return fn(q, k, v, call, *static)

    return jax.jit(body)
