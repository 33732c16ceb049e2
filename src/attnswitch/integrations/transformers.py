"""Hugging Face transformers: `attn_implementation="attnswitch"`.

Importing this module registers two functions under the name "attnswitch" (`import
attnswitch` does it lazily, see `attnswitch.integrations`):

- an attention function (`AttentionInterface`) that maps what transformers passes onto the
  attnswitch contract and runs `attnswitch.attention`, so the planner picks the backend;
- a mask function (`AttentionMaskInterface`). Without one, transformers hands a custom
  attention `attention_mask=None` and the causal and padding masks are silently lost. Ours
  builds the same 4D boolean mask as "sdpa" (True = may attend), or None where sdpa would
  rely on `is_causal` or needs no mask at all.

What transformers passes, and what it becomes (q, k, v arrive as `[B, H, S, D]`; GQA key/value
heads are never repeated: the contract serves `Hq % Hkv == 0` itself):

- layout: BSHD views (`transpose(1, 2)`, no copy); the output is `[B, Sq, Hq, D]`, as
  transformers expects from every attention function.
- `scaling` -> `scale`; `softcap` -> `softcap`; `sliding_window=w` -> `window=(w-1, w-1)`,
  intersected with causal for decoders (transformers' convention: `(w-1, 0)` causal, the flash
  path's symmetric window for encoders, matching its masks).
- `attention_mask=None`: causal iff `is_causal` (the kwarg, else `module.is_causal`) and
  `Sq > 1`, as in the sdpa integration; when sdpa's mask skip leaves more keys than queries
  (a static cache's prefill), keys beyond the queries are cropped like sdpa does.
- a 4D mask (boolean, or additive 0 / -inf): matched exactly against the structured forms
  the contract can state, key padding joined with causal and/or a window, so that fast
  kernels (SDPA's `is_causal` path, flash-style kernels) stay eligible. A mask that matches
  none is passed as `attn_mask`. The match is computed once per mask tensor (transformers
  passes the same mask to every layer) and is exact, so it can never change the result.
- packed batches: explicit `cu_seq_lens_q/k` (with `max_length_q/k`), or a batch of one
  row whose `position_ids` restart (the flash path's rule, `_is_packed_sequence`), become the
  packed layout with `cu_seqlens`, so no padding is computed. As in transformers' flash path
  the sequences bound attention even where the 4D mask does not say so (transformers' sdpa
  and eager masks ignore packing when a cache is in use); inside each sequence the mask must
  follow the causal/window pattern, or it is used densely, intersected with the sequences.
- explicit `cu_seq_lens_q/k` come with `max_length_q/k`: given as host ints (FlashAttention's
  convention) they become `max_seqlen_q/k`, so a device `cu_seqlens` is not read on the host.
- under `torch.compile` all of the above runs inside one custom op per attention call
  (`attnswitch::hf_attention`, see "under torch.compile" below): no graph break.
- not in the contract, so refused with a clear error rather than dropped: dropout in
  training mode, attention sinks (`s_aux`), additive position biases (`position_bias`, float
  masks with values other than 0 and -inf). `output_attentions` returns None weights.

`explain_model(model, example_inputs)` runs a model until its first attention call and
returns the attnswitch `Plan` for that call: which backend serves it, and why not the others.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

import torch

from attnswitch.kernels import masks, runtime, torch_op
from attnswitch.kernels.contract import attention_bounds, describe
from attnswitch.kernels.entry import attention
from attnswitch.kernels.options import AttentionOptions
from attnswitch.kernels.plan import Plan, explain
from attnswitch.kernels.torch_backward import attention_backward

NAME = "attnswitch"

_FORMS_ATTR = "_attnswitch_forms"
_PACKED_ATTR = "_attnswitch_packed"


# ---- registration ---------------------------------------------------------------------


def register_attention() -> None:
    """Register the attention function under "attnswitch" (idempotent)."""
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(NAME, attention_forward)


def register_mask() -> None:
    """Register the mask function under "attnswitch" (idempotent)."""
    from transformers.masking_utils import AttentionMaskInterface

    AttentionMaskInterface.register(NAME, mask_function)


def register() -> None:
    """Register both functions; models then accept `attn_implementation="attnswitch"`."""
    register_attention()
    register_mask()


def mask_function(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    """transformers' mask interface for "attnswitch": exactly sdpa's mask (`sdpa_mask`), a bool
    `[B, 1, Sq, Sk]` tensor with True = may attend, or None where sdpa relies on `is_causal`
    (plain causal without padding) or needs no mask (bidirectional without padding)."""
    from transformers.masking_utils import sdpa_mask

    return sdpa_mask(*args, **kwargs)


# ---- mapping onto the contract ----------------------------------------------------------


@dataclass(frozen=True)
class _Form:
    """A structured equivalent of a dense mask: key padding (or None) plus causal/window."""

    causal: bool
    window: tuple[int, int] | None
    key_padding_mask: Any = None


def _window_of(sliding_window: Any) -> tuple[int, int] | None:
    if sliding_window is None:
        return None
    w = int(sliding_window)
    if w <= 0:
        raise ValueError(f"sliding_window: expected a positive int or None, got {sliding_window!r}")
    return (w - 1, w - 1)


def _candidates(causal: bool, window: tuple[int, int] | None) -> list[tuple[bool, Any]]:
    """(causal, window) options to try against a dense mask, the likeliest first."""
    out: list[tuple[bool, Any]] = []
    for c in (causal, not causal):
        for w in (window, None):
            if (c, w) not in out:
                out.append((c, w))
    return out


def _as_bool_mask(mask: torch.Tensor) -> torch.Tensor:
    """A 4D attention mask as bool (True = may attend). Additive float masks must hold only 0
    (attend) and -inf or the dtype's most negative values (masked): any other value is a bias
    the contract has no place for, and is refused rather than dropped."""
    if mask.dtype == torch.bool:
        return mask
    if not mask.is_floating_point():
        raise ValueError(
            f"attention_mask: expected a bool or float 4D mask, got dtype {mask.dtype}"
        )
    allowed = mask == 0
    blocked = mask <= torch.finfo(mask.dtype).min / 2
    if not bool((allowed | blocked).all()):
        raise ValueError(
            "attention_mask: expected a boolean mask or an additive mask of 0 and -inf, got an "
            "additive mask with other values (a bias such as ALiBi is not part of the "
            "attnswitch contract; use attn_implementation='eager' for this model)"
        )
    return allowed


def _dense_form(mask: torch.Tensor, causal: bool, window: tuple[int, int] | None) -> _Form | None:
    """The structured form that reproduces the bool mask `[B, 1, Sq, Sk]` exactly, or None."""
    if mask.shape[1] != 1:
        return None
    b, _, sq, sk = mask.shape
    kp = mask[:, 0].any(dim=1)  # [B, Sk]: keys some query may attend
    arange = lambda n: torch.arange(n, device=mask.device)  # noqa: E731
    for c, w in _candidates(causal, window):
        pos = masks.position_mask(arange, sq, sk, attention_bounds(c, w))
        expect = kp[:, None, None, :] if pos is None else kp[:, None, None, :] & pos
        if torch.equal(expect.expand(b, 1, sq, sk), mask):
            return _Form(c, w, None if bool(kp.all()) else kp)
    return None


def _segment_ids(cu: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per packed row: its sequence index, its position within the sequence, and the
    sequence's length."""
    lengths = cu[1:] - cu[:-1]
    seg = torch.repeat_interleave(torch.arange(len(lengths), device=cu.device), lengths)
    local = torch.arange(total, device=cu.device) - cu[:-1][seg]
    return seg, local, lengths[seg]


def _packed_pattern(
    cu_q: torch.Tensor,
    cu_k: torch.Tensor,
    tq: int,
    tk: int,
    causal: bool,
    window: tuple[int, int] | None,
) -> torch.Tensor:
    """Bool `[Tq, Tk]`: what the packed layout lets each row attend (same sequence, and
    the bounds aligned bottom-right within the sequence)."""
    seg_q, pos_q, len_q = _segment_ids(cu_q.long(), tq)
    seg_k, pos_k, _ = _segment_ids(cu_k.long(), tk)
    lengths_k = (cu_k[1:] - cu_k[:-1]).long()
    same = seg_q[:, None] == seg_k[None, :]
    diag = pos_q + masks.diagonal_offset(len_q, lengths_k[seg_q])
    inside = masks.bounds_mask(diag[:, None], pos_k[None, :], attention_bounds(causal, window))
    return same if inside is None else same & inside


def _packed_form(
    mask: torch.Tensor,
    cu_q: torch.Tensor,
    cu_k: torch.Tensor,
    causal: bool,
    window: tuple[int, int] | None,
) -> _Form | None:
    """The (causal, window) under which packing reproduces the bool mask `[1, 1, Tq, Tk]`
    inside each sequence (entries across sequences are not looked at)."""
    if mask.shape[0] != 1 or mask.shape[1] != 1:
        return None
    tq, tk = mask.shape[-2:]
    seen = mask[0, 0] & _packed_pattern(cu_q, cu_k, tq, tk, False, None)
    for c, w in _candidates(causal, window):
        if torch.equal(seen, _packed_pattern(cu_q, cu_k, tq, tk, c, w)):
            return _Form(c, w, None)
    return None


def _cached(tensor: torch.Tensor, attr: str, key: tuple, compute: Any) -> Any:
    """`compute()` memoised on the tensor object itself (transformers passes the same mask and
    position_ids tensors to every layer; a new or sliced tensor starts afresh), keyed on the
    tensor's version counter, so a tensor changed in place is analysed again. Inference
    tensors (`torch.inference_mode`) keep no version counter: theirs is kept per object."""
    version = _version(tensor)
    held = getattr(tensor, attr, None)
    if held is None or held[0] != version:
        held = (version, {})
        try:
            setattr(tensor, attr, held)
        except (AttributeError, RuntimeError):
            return compute()
    table = held[1]
    if key not in table:
        table[key] = compute()
    return table[key]


def _version(tensor: torch.Tensor) -> int | None:
    """The tensor's in-place version counter; None for an inference tensor (it has none)."""
    try:
        return tensor._version
    except RuntimeError:
        return None


def _packing_from_position_ids(position_ids: torch.Tensor) -> torch.Tensor | None:
    """cu_seqlens (int32) for a batch-1 packed `position_ids` (sequences restart at the
    minimum position, transformers' flash rule), or None when it is one sequence."""
    if position_ids.ndim > 2 or (position_ids.ndim == 2 and position_ids.shape[0] != 1):
        return None  # e.g. multimodal rope positions [3, B, S]: not a packing signal
    pos = position_ids.reshape(-1)
    if pos.numel() <= 1:
        return None
    if bool((pos == torch.arange(pos.numel(), device=pos.device) + pos.min()).all()):
        return None
    starts = (pos == pos.min()).nonzero().view(-1).to(torch.int32)
    total = torch.tensor([pos.numel()], dtype=torch.int32, device=pos.device)
    if starts.numel() == 0 or int(starts[0]) != 0:
        return None
    return torch.cat([starts, total])


def _host_int(x: Any) -> int | None:
    """A maximum length given as a host int (FlashAttention's `max_seqlen`), else None: a
    tensor is not read, since that would synchronise a device."""
    return int(x) if isinstance(x, int) and not isinstance(x, bool) else None


def _int32(cu: Any, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(cu, device=device).to(torch.int32).reshape(-1)


def _refuse_outside_contract(module: Any, dropout: float, s_aux: Any, position_bias: Any) -> None:
    """Features transformers may ask for that the contract has not: refused, never dropped."""
    if dropout and getattr(module, "training", False):
        raise ValueError(
            f"dropout: expected 0.0 (attnswitch attention has no dropout; call model.eval() "
            f"for inference), got {dropout}"
        )
    if s_aux is not None:
        raise ValueError(
            "s_aux: expected None (attention sinks are not part of the attnswitch contract)"
        )
    if position_bias is not None:
        raise ValueError(
            "position_bias: expected None (additive position biases are not part of the "
            "attnswitch contract; use attn_implementation='eager' for this model)"
        )


def contract_arguments(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    position_ids: torch.Tensor | None = None,
    cu_seq_lens_q: Any = None,
    cu_seq_lens_k: Any = None,
    max_length_q: Any = None,
    max_length_k: Any = None,
    s_aux: Any = None,
    position_bias: Any = None,
    **_: Any,
) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], dict[str, Any], tuple[int, ...]]:
    """What transformers passes (q `[B, Hq, Sq, D]`, k/v `[B, Hkv, Sk, D]`) as arguments of
    `attnswitch.attention`: `((q, k, v), options, out_shape)`, where the result reshaped to
    `out_shape` is the `[B, Sq, Hq, D]` transformers expects. See the module docstring."""
    _refuse_outside_contract(module, dropout, s_aux, position_bias)
    b, hq, sq, d = query.shape
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    window = _window_of(sliding_window)
    base = dict(scale=None if scaling is None else float(scaling), softcap=softcap)
    qkv = tuple(x.transpose(1, 2) for x in (query, key, value))  # BSHD views
    out_shape = (b, sq, hq, d)
    mask = _bool_mask(attention_mask, key.shape[2])
    packing = _packing(qkv, mask, position_ids, cu_seq_lens_q, cu_seq_lens_k)
    if packing is not None:
        form = (
            _Form(causal, window, None)
            if mask is None
            else _cached(
                attention_mask,
                _FORMS_ATTR,
                ("packed", causal, window, packing.key),
                lambda: _packed_form(mask, packing.cu_q, packing.cu_k, causal, window),
            )
        )
        if form is not None:
            qkv, options = _packed_arguments(qkv, form, packing, max_length_q, max_length_k)
            return qkv, base | options, out_shape
        # the sequences bound attention even where the mask does not say so
        tq, tk = b * sq, b * key.shape[2]
        mask = mask & _packed_pattern(packing.cu_q, packing.cu_k, tq, tk, False, None)[None, None]
    qkv, options = _dense_arguments(qkv, attention_mask, mask, causal, window)
    return qkv, base | options, out_shape


@dataclass(frozen=True)
class _Packing:
    """Packed sequences of a batch: int32 `cu_q`/`cu_k` on the tensors' device, and `key`,
    what identifies them on the host without reading a device tensor (the tensors
    transformers passes to every layer of a forward, by identity and version)."""

    cu_q: torch.Tensor
    cu_k: torch.Tensor
    key: tuple


class _Same:
    """A dict key that is equal only to the very same object (held, so its id stays its
    own while the key lives)."""

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


def _host_key(x: Any) -> tuple:
    """`x` as a cache key: a tensor by identity and in-place version (never read), host
    values (a list of ints) by value."""
    if isinstance(x, torch.Tensor):
        return (_Same(x), _version(x))
    return ("values", tuple(int(n) for n in x))


def _bool_mask(attention_mask: torch.Tensor | None, sk: int) -> torch.Tensor | None:
    """transformers' 4D mask as bool (True = may attend), cropped to the `sk` keys there
    are (as eager does with a cache longer than its content); None stays None."""
    if attention_mask is None:
        return None
    if attention_mask.ndim != 4:
        raise ValueError(
            f"attention_mask: expected a 4D mask from the 'attnswitch' mask function, got "
            f"shape {tuple(attention_mask.shape)}"
        )
    mask = _cached(attention_mask, _FORMS_ATTR, ("bool",), lambda: _as_bool_mask(attention_mask))
    return mask[..., :sk] if mask.shape[-1] > sk else mask


def _packing(
    qkv: tuple,
    mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    cu_seq_lens_q: Any,
    cu_seq_lens_k: Any,
) -> _Packing | None:
    """The packed sequences: explicit `cu_seq_lens_q/k`, or restarts in a batch-1
    `position_ids` (transformers' flash rule); None for a batch that is not packed."""
    q, k, _ = qkv
    b, sq = q.shape[:2]
    if cu_seq_lens_q is not None or cu_seq_lens_k is not None:
        if cu_seq_lens_q is None or cu_seq_lens_k is None:
            raise ValueError("cu_seq_lens_q/k: expected both or neither, got one of them")
        if mask is not None and b != 1:
            raise ValueError(
                f"cu_seq_lens_q: expected batch size 1 when a mask is passed with packed "
                f"sequences, got batch size {b}"
            )
        return _Packing(
            _int32(cu_seq_lens_q, q.device),
            _int32(cu_seq_lens_k, q.device),
            ("explicit", _host_key(cu_seq_lens_q), _host_key(cu_seq_lens_k)),
        )
    if position_ids is None or b != 1 or sq != k.shape[1] or sq <= 1:
        return None
    cu = _cached(
        position_ids, _PACKED_ATTR, ("cu",), lambda: _packing_from_position_ids(position_ids)
    )
    return None if cu is None else _Packing(cu, cu, ("position_ids", _host_key(position_ids)))


def _packed_arguments(
    qkv: tuple, form: _Form, packing: _Packing, max_length_q: Any, max_length_k: Any
) -> tuple[tuple, dict[str, Any]]:
    """The packed layout's `(q, k, v)` `[T, H, D]` and options."""
    q, k, v = qkv
    d = q.shape[-1]
    packed = (
        q.reshape(-1, q.shape[2], d),
        k.reshape(-1, k.shape[2], d),
        v.reshape(-1, v.shape[2], d),
    )
    return packed, dict(
        causal=form.causal,
        window=form.window,
        cu_seqlens_q=packing.cu_q,
        cu_seqlens_k=packing.cu_k,
        max_seqlen_q=_host_int(max_length_q),
        max_seqlen_k=_host_int(max_length_k),
    )


def _dense_arguments(
    qkv: tuple,
    attention_mask: torch.Tensor | None,
    mask: torch.Tensor | None,
    causal: bool,
    window: tuple[int, int] | None,
) -> tuple[tuple, dict[str, Any]]:
    """The dense layout's `(q, k, v)` and mask options: no mask is causal as sdpa reads it;
    a mask is its structured form when one reproduces it exactly, else `attn_mask`."""
    q, k, v = qkv
    b, sq = q.shape[:2]
    sk = k.shape[1]
    if mask is None:
        causal = causal and sq > 1
        if causal and sk > sq:  # sdpa's skip with keys beyond the queries: static-cache prefill
            k, v = k[:, :sq], v[:, :sq]
        return (q, k, v), dict(causal=causal, window=window)
    form = None
    if mask.shape[-2:] == (sq, sk) and mask.shape[0] in (1, b):
        form = _cached(
            attention_mask,
            _FORMS_ATTR,
            ("dense", causal, window, sq, sk),
            lambda: _dense_form(mask, causal, window),
        )
    if form is None:
        return (q, k, v), dict(attn_mask=mask)
    kp = form.key_padding_mask
    if kp is not None and kp.shape[0] != b:
        kp = kp.expand(b, sk)
    return (q, k, v), dict(causal=form.causal, window=form.window, key_padding_mask=kp)


# ---- the attention function -------------------------------------------------------------

_capture: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "attnswitch_capture", default=None
)


class _Captured(Exception):
    """Stops a forward pass at its first attention call (see `explain_model`)."""


def attention_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface for "attnswitch": q `[B, Hq, S, D]`, k/v
    `[B, Hkv, S, D]` in, `(out [B, S, Hq, D], None)` out, through `attnswitch.attention`."""
    if torch.compiler.is_compiling():
        return _compiled_forward(
            module, query, key, value, attention_mask, dropout, scaling, **kwargs
        ), None
    if kwargs.get("output_attentions"):
        runtime.current().warn_once(
            ("transformers", "output_attentions"),
            "attnswitch attention does not return attention weights (None instead)",
        )
    (q, k, v), options, out_shape = contract_arguments(
        module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
    )
    sink = _capture.get()
    if sink is not None:
        sink.append(explain(q, k, v, **options))
        raise _Captured()
    out = attention(q, k, v, **options)
    return out.reshape(out_shape), None


# ---- under torch.compile: one custom op ---------------------------------------------------
#
# Mapping transformers' arguments reads tensors on the host (matching a 4D mask against the
# structured forms, finding packed sequences in position_ids), which dynamo cannot trace
# without graph breaks. Under torch.compile the whole mapping and the attention call run
# inside one custom op, `attnswitch::hf_attention`, so the compiled model sees one opaque
# node per layer and the mapping is exactly the eager one (see `kernels/torch_op.py` for
# the op pattern: shapes validated on fake tensors at trace time; the backward maps the
# arguments again and applies the contract's backward formula to the saved output).


def _compiled_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float,
    scaling: float | None,
    **kwargs: Any,
) -> torch.Tensor:
    """`attention_forward` under torch.compile: module attributes and plain options are
    resolved here (traceable), tensors go to the op."""
    _refuse_outside_contract(module, dropout, kwargs.get("s_aux"), kwargs.get("position_bias"))
    is_causal = kwargs.get("is_causal")
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    b, _, sq, _ = query.shape
    packable = b == 1 and sq == key.shape[2] and sq > 1
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    window = kwargs.get("sliding_window")
    softcap = kwargs.get("softcap")
    return torch.ops.attnswitch.hf_attention(
        query,
        key,
        value,
        attention_mask,
        kwargs.get("position_ids") if packable else None,
        None if cu_q is None else torch.as_tensor(cu_q),
        None if cu_k is None else torch.as_tensor(cu_k),
        _host_int(kwargs.get("max_length_q")),
        _host_int(kwargs.get("max_length_k")),
        None if scaling is None else float(scaling),
        causal,
        None if window is None else int(window),
        None if softcap is None else float(softcap),
    )


def _hf_eager(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    cu_seq_lens_q: torch.Tensor | None,
    cu_seq_lens_k: torch.Tensor | None,
    max_length_q: int | None,
    max_length_k: int | None,
    scaling: float | None,
    is_causal: bool,
    sliding_window: int | None,
    softcap: float | None,
) -> torch.Tensor:
    """The eager mapping and call, `[B, Sq, Hq, D]` out."""
    (q, k, v), options, out_shape = contract_arguments(
        None,
        query,
        key,
        value,
        attention_mask,
        scaling=scaling,
        is_causal=is_causal,
        sliding_window=sliding_window,
        softcap=softcap,
        position_ids=position_ids,
        cu_seq_lens_q=cu_seq_lens_q,
        cu_seq_lens_k=cu_seq_lens_k,
        max_length_q=max_length_q,
        max_length_k=max_length_k,
    )
    return attention(q, k, v, **options).reshape(out_shape)


@torch.library.custom_op("attnswitch::hf_attention", mutates_args=())
def _hf_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    cu_seq_lens_q: torch.Tensor | None,
    cu_seq_lens_k: torch.Tensor | None,
    max_length_q: int | None,
    max_length_k: int | None,
    scaling: float | None,
    is_causal: bool,
    sliding_window: int | None,
    softcap: float | None,
) -> torch.Tensor:
    inputs = (query, key, value, attention_mask, position_ids, cu_seq_lens_q, cu_seq_lens_k)
    out = _hf_eager(
        *inputs, max_length_q, max_length_k, scaling, is_causal, sliding_window, softcap
    )
    return torch_op.fresh(out, inputs)


@_hf_attention.register_fake
def _hf_attention_fake(query, key, value, attention_mask, *rest):
    from attnswitch.kernels.contract import validate

    validate(*(x.transpose(1, 2) for x in (query, key, value)))  # shapes, heads, dtypes
    if attention_mask is not None and attention_mask.ndim != 4:
        raise ValueError(
            f"attention_mask: expected a 4D mask from the 'attnswitch' mask function, got "
            f"shape {tuple(attention_mask.shape)}"
        )
    b, hq, sq, _ = query.shape
    return query.new_empty((b, sq, hq, value.shape[-1]))


@torch.library.custom_op("attnswitch::hf_attention_backward", mutates_args=())
def _hf_attention_backward(
    grad_out: torch.Tensor,
    out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    cu_seq_lens_q: torch.Tensor | None,
    cu_seq_lens_k: torch.Tensor | None,
    max_length_q: int | None,
    max_length_k: int | None,
    scaling: float | None,
    is_causal: bool,
    sliding_window: int | None,
    softcap: float | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of query, key and value from the forward's `out` (`[B, Sq, Hq, D]`): the
    eager mapping again (no forward), then the contract's backward formula
    (`kernels/torch_backward.py`), mapped back to transformers' `[B, H, S, D]`."""
    (q, k, v), options, _ = contract_arguments(
        None,
        query,
        key,
        value,
        attention_mask,
        scaling=scaling,
        is_causal=is_causal,
        sliding_window=sliding_window,
        softcap=softcap,
        position_ids=position_ids,
        cu_seq_lens_q=cu_seq_lens_q,
        cu_seq_lens_k=cu_seq_lens_k,
        max_length_q=max_length_q,
        max_length_k=max_length_k,
    )
    call = describe(q, k, v, AttentionOptions(**options))
    shape = (*q.shape[:-1], v.shape[-1])
    dq, dk, dv = attention_backward(
        call, q, k, v, out.reshape(shape), None, grad_out.reshape(shape), None
    )
    return _as_hf(dq, query), _as_hf(dk, key), _as_hf(dv, value)


def _as_hf(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """The gradient of a contract argument (a BSHD view of `like [B, H, S, D]`, maybe packed
    into `[B * S, H, D]` or with keys cropped to the first n) as `like`'s gradient."""
    b, h, s, d = like.shape
    full = grad.new_zeros(b, s, h, d)
    n = grad.numel() // (b * h * d)
    full[:, :n] = grad.reshape(b, n, h, d)
    return full.transpose(1, 2).contiguous()


@_hf_attention_backward.register_fake
def _hf_attention_backward_fake(grad_out, out, query, key, value, *rest):
    return tuple(x.new_empty(x.shape) for x in (query, key, value))


def _hf_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(output, *inputs[:7])
    ctx.options = inputs[7:]


def _hf_backward(ctx: Any, grad_out: torch.Tensor) -> tuple:
    grads = torch.ops.attnswitch.hf_attention_backward(grad_out, *ctx.saved_tensors, *ctx.options)
    return (*grads, *(None,) * 10)


_hf_attention.register_autograd(_hf_backward, setup_context=_hf_setup_context)


def explain_model(model: Any, example_inputs: dict[str, Any]) -> Plan:
    """The attnswitch plan for the first attention call of `model(**example_inputs)`: which
    backend serves it and why the others don't. The forward pass stops at that call.

    `model` must use `attn_implementation="attnswitch"`."""
    sink: list[Plan] = []
    token = _capture.set(sink)
    try:
        with torch.inference_mode():
            model(**example_inputs)
    except _Captured:
        pass
    finally:
        _capture.reset(token)
    if not sink:
        impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
        raise ValueError(
            f"model: expected a model whose attention runs through attnswitch "
            f"(attn_implementation='{NAME}'), got attn_implementation={impl!r}"
        )
    return sink[0]


register()

__all__ = [
    "NAME",
    "attention_forward",
    "contract_arguments",
    "explain_model",
    "mask_function",
    "register",
]
