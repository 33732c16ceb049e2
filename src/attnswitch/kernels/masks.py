"""Masks and packing shared by backends, written once for numpy, torch and jax.

Functions take `arange`, a callable `n -> int array` of the backend's framework and device
(`np.arange`, `functools.partial(torch.arange, device=d)`, `jnp.arange`), so the same rule
builds the mask for every framework: the contract's alignment exists in one place only.

The alignment itself is two functions, used by every backend and the transformers
integration: `diagonal_offset` (bottom-right: query i is aligned with key `i + Sk - Sq`) and
`key_range` (the keys `causal`/`window` bounds allow around that diagonal key). Both work on
Python ints and on arrays of any framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnswitch.kernels.contract import Call

Arange = Callable[[int], Any]


def diagonal_offset(seqlen_q: Any, seqlen_k: Any) -> Any:
    """Bottom-right alignment: query position i is aligned with key position
    `i + diagonal_offset(Sq, Sk)`, i.e. `Sk - Sq`.

    Any coordinates in which the query and key sequences *end* at `seqlen_q` and `seqlen_k`
    work: lengths for positions within a sequence, `cu_seqlens_q/k[s + 1]` for absolute
    packed rows of sequence s. Ints or arrays (broadcasting)."""
    return seqlen_k - seqlen_q


def key_range(diag: Any, bounds: tuple[int, int] | None) -> tuple[Any, Any]:
    """The keys `bounds` (`Call.bounds`: (left, right), -1 unbounded) allow around the
    aligned key `diag`: inclusive `(lowest, highest)`, each None where unbounded. `diag` is
    an int or an array (the result has its shape)."""
    if bounds is None:
        return None, None
    left, right = bounds
    return (diag - left if left >= 0 else None), (diag + right if right >= 0 else None)


def position_mask(
    arange: Arange, seqlen_q: int, seqlen_k: int, bounds: tuple[int, int] | None
) -> Any:
    """Bool `[Sq, Sk]`: query i may attend key j under bottom-right aligned `bounds`
    (`Call.bounds`), or None when `bounds` restricts nothing."""
    if bounds is None or (bounds[0] < 0 and bounds[1] < 0):
        return None
    diag = arange(seqlen_q)[:, None] + diagonal_offset(seqlen_q, seqlen_k)
    return bounds_mask(diag, arange(seqlen_k)[None, :], bounds)


def bounds_mask(diag: Any, key: Any, bounds: tuple[int, int] | None) -> Any:
    """Bool: key position `key` lies within `bounds` (`Call.bounds`) around `diag`, the key
    position each query is aligned to (`i + diagonal_offset(Sq, Sk)`). `diag` and `key` are int
    arrays broadcasting together (e.g. `[Sq, 1]` and `[1, Sk]`); packed and blockwise
    backends pass per-token positions. None when `bounds` restricts nothing."""
    lowest, highest = key_range(diag, bounds)
    upper = None if highest is None else key <= highest
    lower = None if lowest is None else key >= lowest
    if upper is None or lower is None:
        return lower if upper is None else upper
    return upper & lower


def dense_mask(
    call: Call, arange: Arange, key_padding_mask: Any = None, attn_mask: Any = None
) -> Any:
    """Bool mask broadcastable to `[B, Hq, Sq, Sk]` joining alignment bounds, key padding and
    `attn_mask` (arrays of the backend's framework), or None when nothing is masked."""
    mask = position_mask(arange, call.seqlen_q, call.seqlen_k, call.bounds)
    if mask is not None:
        mask = mask[None, None]
    if key_padding_mask is not None:
        kp = key_padding_mask[:, None, None, :]
        mask = kp if mask is None else mask & kp
    if attn_mask is not None:
        am = attn_mask.reshape((1,) * (4 - attn_mask.ndim) + tuple(attn_mask.shape))
        mask = am if mask is None else mask & am
    return mask


def padding_indices(seqlens: tuple[int, ...], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """For packed sequences of `seqlens` laid out as padded `[N, max_len]` rows: the flat
    padded position of each packed row (int64 `[T]`) and the validity of each padded slot
    (bool `[N, max_len]`).

    Sequences sit at the *end* of their padded row (left padding). Then the dense bottom-right
    alignment over `[max_len_q, max_len_k]` equals each sequence's own bottom-right alignment
    (`Sk_i - Sq_i`), so a padded dense call honours `causal` and `window` exactly.
    """
    n = len(seqlens)
    lens = np.asarray(seqlens, dtype=np.int64)[:, None]
    valid = np.arange(max_len)[None, :] >= max_len - lens
    flat = np.flatnonzero(valid.reshape(n * max_len))
    return flat, valid.reshape(n, max_len)


def unpad(x: Any, flat_index: Any) -> Any:
    """Gather the real rows of padded `x [N, S, ...]` back into packed `[T, ...]`."""
    return x.reshape((x.shape[0] * x.shape[1],) + tuple(x.shape[2:]))[flat_index]
