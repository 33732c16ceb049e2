"""The attention contract: argument validation and the `Call` that describes one request.

Semantics (docs/architecture.md), for every backend:

- Dense layout BSHD: q `[B, Sq, Hq, D]`, k and v `[B, Sk, Hkv, D]`, `Hq % Hkv == 0`; query
  head h reads key/value head `h // (Hq // Hkv)`.
- Packed layout: q `[Tq, Hq, D]`, k and v `[Tk, Hkv, D]`, int32 `cu_seqlens_q/k` `[N + 1]`
  starting at 0, non-decreasing, ending at Tq / Tk; sequence i owns rows `cu[i]:cu[i+1]`.
- `scale` defaults to `1 / sqrt(D)`.
- `causal` is bottom-right aligned: query i attends key j iff `j <= i + (Sk - Sq)`.
- `window=(left, right)`: query i attends key j iff
  `i + (Sk - Sq) - left <= j <= i + (Sk - Sq) + right`; -1 is unbounded. Intersects `causal`.
- `softcap=c`: logits become `c * tanh(logits / c)` after scaling, before masking.
- `key_padding_mask` bool `[B, Sk]` and `attn_mask` bool broadcastable to `[B, Hq, Sq, Sk]`:
  True means "may attend". All masks intersect.
- A query row with no key it may attend gives zeros (and lse `-inf`).
- `return_lse` gives `(out, lse)`, lse float32 `[B, Hq, Sq]` dense or `[Hq, Tq]` packed.

Every check here runs before any kernel; a failure raises `AttentionInputError` naming the
argument, what was expected and what came.

What is checked eagerly, and what is not (packed calls, `cu_seqlens_q/k`):
- always, from metadata alone (no device access): framework, dtype int32, shape `[N + 1]`,
  equal N for q and k, `max_seqlen_q/k` (when given) between 0 and the packed total;
- the values (start 0, non-decreasing, last = T) are read and checked when reading them
  costs no device synchronisation (`arrays.on_host`: numpy, torch CPU tensors, jax arrays in
  host memory), or when no `max_seqlen_q/k` was passed (the longest length is then needed:
  one device-to-host copy), or with `configure(debug=True)` / `ATTNSWITCH_DEBUG=1`;
- a device `cu_seqlens` passed with `max_seqlen_q/k` (FlashAttention's calling convention) is
  not read: no `.item()`/`.tolist()` and no sync on the hot path. Its values and the maxima
  are then the caller's responsibility, as in FlashAttention; the `Call` has
  `seqlens_q/k = None` and `seqlen_q/k` = the given maxima, and backends derive per-sequence
  facts on device (or decline when they need host lengths).

Under jax tracing (`jax.jit`, `grad`, `vmap`: some argument is a `jax.core.Tracer`) shapes,
dtypes and options are known and validated as usual; values are not. Design choice:
- The `Call` gets `traced=True`, so plans are made apart from eager calls and backends that
  need host values decline (`BackendBase` declines traced calls for every non-jax backend).
- A tracer has no placement: its device is jax's default device.
- Traced `cu_seqlens_q/k` are checked for framework, dtype int32, shape `[N + 1]` and equal N;
  their values (start 0, non-decreasing, last = T) cannot be read, so they are not checked
  and stay the caller's responsibility, like any traced index. The packed `Call` then has
  `seqlens_q/k = None` and `seqlen_q/k` = the packed totals Tq / Tk (upper bounds of the
  longest sequence); backends derive per-sequence facts on device (e.g. segment ids from
  cu_seqlens), or decline when they need the lengths on the host. To keep the value checks
  under `jax.jit`, close over concrete cu_seqlens instead of passing them as traced arguments.
  torch fake tensors (`torch.compile` tracing; the fake kernel of the `attnswitch::attention`
  custom op) are handled the same way, except that `traced` stays False.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnswitch.kernels import arrays, runtime
from attnswitch.kernels.arrays import DeviceInfo
from attnswitch.kernels.options import AttentionOptions, keyword_form


class AttentionInputError(ValueError):
    """An argument of `attention` breaks the contract. The message names the argument."""

    def __init__(self, name: str, expected: str, got: Any):
        self.argument = name
        super().__init__(f"{name}: expected {expected}, got {got}")


@dataclass(frozen=True)
class Call:
    """One attention request, validated and described for planning.

    Identity fields (shapes, dtype, features) make the call's planning key; the mask and
    cu_seqlens arrays ride along uncompared. Backends read only this, never raw arguments.
    For the packed layout `batch` is the number of sequences N, `seqlen_q/k` are the
    longest sequence lengths (or the given `max_seqlen_q/k`, or the packed totals when
    traced: see the module docstring) and `total_q/k` the packed totals Tq / Tk.
    `traced`: some argument is a jax tracer; `seqlens_q/k` are None for a traced packed call.
    """

    framework: str
    device: DeviceInfo
    dtype: str
    layout: str
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    scale: float
    causal: bool = False
    window: tuple[int, int] | None = None
    softcap: float | None = None
    key_padding: bool = False
    attn_mask_shape: tuple[int, ...] | None = None
    return_lse: bool = False
    requires_grad: bool = False
    traced: bool = False
    seqlens_q: tuple[int, ...] | None = None
    seqlens_k: tuple[int, ...] | None = None
    total_q: int = 0
    total_k: int = 0
    key_padding_mask: Any = field(default=None, compare=False, repr=False)
    attn_mask: Any = field(default=None, compare=False, repr=False)
    cu_seqlens_q: Any = field(default=None, compare=False, repr=False)
    cu_seqlens_k: Any = field(default=None, compare=False, repr=False)

    @property
    def packed(self) -> bool:
        return self.layout == "packed"

    @property
    def plan_key(self) -> Any:
        """What a plan depends on: the call's geometry. A dense call is its own key (its
        shapes are what kernels compile for). A packed call is keyed on dtype, heads, head dim
        and features with N and the longest lengths rounded up to powers of two (the buckets
        `autotune` orders backends by), plus what decline rules read from the lengths: the
        effective `bounds`, whether host lengths are known, and whether q and k share them.
        The totals are left out: no rule reads them. So a pipeline's packed batches, whose
        make-up never repeats, share a few plans instead of missing on every batch."""
        if not self.packed:
            return self
        return (
            self.framework,
            self.device,
            self.dtype,
            _pow2(self.batch),
            _pow2(self.seqlen_q),
            _pow2(self.seqlen_k),
            self.heads_q,
            self.heads_kv,
            self.head_dim,
            self.scale,
            self.causal,
            self.window,
            self.softcap,
            self.return_lse,
            self.requires_grad,
            self.traced,
            self.bounds,
            self.seqlens_q is not None,
            self.seqlens_q == self.seqlens_k,
        )

    @property
    def gqa(self) -> bool:
        return self.heads_q != self.heads_kv

    @property
    def bounds(self) -> tuple[int, int] | None:
        """`attention_bounds` of this call's options and lengths."""
        return attention_bounds(self.causal, self.window, self.seqlen_q, self.seqlen_k)

    @property
    def has_mask(self) -> bool:
        return self.key_padding or self.attn_mask_shape is not None

    @property
    def features(self) -> tuple[str, ...]:
        """Names of the contract features this call uses, for plans, metrics and warnings."""
        names = []
        if self.packed:
            names.append("packed")
        if self.gqa:
            names.append("gqa")
        if self.causal:
            names.append("causal")
        if self.window is not None:
            names.append("window")
        if self.softcap is not None:
            names.append("softcap")
        if self.key_padding:
            names.append("key_padding_mask")
        if self.attn_mask_shape is not None:
            names.append("attn_mask")
        if self.return_lse:
            names.append("lse")
        if self.requires_grad:
            names.append("grad")
        return tuple(names)

    @property
    def kind(self) -> str:
        """A short label of the call's sort (not its exact shape), e.g.
        "torch/cpu/float32/dense+causal"."""
        feats = "+".join(f for f in self.features if f != "packed")
        return f"{self.framework}/{self.device.kind}/{self.dtype}/{self.layout}" + (
            f"+{feats}" if feats else ""
        )

    def sequence(self, seqlen_q: int, seqlen_k: int) -> Call:
        """One sequence of a packed call as a dense call with batch 1 (no arrays attached)."""
        return dataclasses.replace(
            self,
            layout="dense",
            batch=1,
            seqlen_q=seqlen_q,
            seqlen_k=seqlen_k,
            seqlens_q=None,
            seqlens_k=None,
            total_q=0,
            total_k=0,
            cu_seqlens_q=None,
            cu_seqlens_k=None,
        )

    @property
    def shape_text(self) -> str:
        b = f"N={self.batch}" if self.packed else f"B={self.batch}"
        return (
            f"{b} Sq={self.seqlen_q} Sk={self.seqlen_k} "
            f"Hq={self.heads_q} Hkv={self.heads_kv} D={self.head_dim}"
        )


def attention_bounds(
    causal: bool,
    window: tuple[int, int] | None,
    seqlen_q: int | None = None,
    seqlen_k: int | None = None,
) -> tuple[int, int] | None:
    """The (left, right) key range around the aligned diagonal that `causal` and `window`
    allow together, -1 meaning unbounded on that side; None when nothing is restricted.
    Given the lengths, a bound that no query of `seqlen_q` and key of `seqlen_k` can reach
    counts as unbounded: causal with one query (a decode step) restricts nothing, so kernels
    need no mask for it."""
    if not causal and window is None:
        return None
    left, right = window if window is not None else (-1, -1)
    if causal:
        right = 0 if right == -1 else min(right, 0)
    if seqlen_q is not None and right >= seqlen_q - 1:
        right = -1
    if seqlen_k is not None and left >= seqlen_k - 1:
        left = -1
    return None if (left, right) == (-1, -1) else (left, right)


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _describe(x: Any) -> str:
    fw = arrays.framework_of(x)
    if fw is None:
        return type(x).__name__
    return f"{fw} array of shape {tuple(x.shape)} and dtype {arrays.dtype_name(x)}"


def _check_jax_available(name: str, x: Any) -> None:
    try:
        import jax  # noqa: F401
    except ImportError:
        raise AttentionInputError(
            name,
            "an array of an installed framework (the jax extra is not installed:"
            " pip install 'attnswitch[jax]')",
            _describe(x),
        ) from None


def describe(q: Any, k: Any, v: Any, options: AttentionOptions) -> Call:
    """Check every argument against the contract and describe the request as a `Call`.
    `validate` is its keyword form (`validate(q, k, v, causal=..., ...)`).

    `max_seqlen_q/k` (packed layout only): upper bounds of the sequence lengths, as
    FlashAttention's varlen functions take them; with them a device `cu_seqlens` is never
    read on the host (see the module docstring). `backend` is the planner's: not read here.
    The checks run in order: the arrays' framework, dtype and device; their shapes; the
    scalar options; then the layout's own arguments (packed or dense)."""
    framework, dtype, device = _check_arrays(q, k, v)
    packed = options.cu_seqlens_q is not None or options.cu_seqlens_k is not None
    heads_q, heads_kv, head_dim = _check_shapes(q, k, v, packed)
    common = dict(
        framework=framework,
        device=device,
        dtype=dtype,
        heads_q=heads_q,
        heads_kv=heads_kv,
        head_dim=head_dim,
        return_lse=bool(options.return_lse),
        requires_grad=_requires_grad(framework, q, k, v),
        traced=_traced(framework, q, k, v, options),
        **_check_scalars(options, head_dim),
    )
    layout = (
        _packed_layout(q, k, options, framework)
        if packed
        else _dense_layout(q, k, options, framework, device, heads_q)
    )
    return Call(**layout, **common)


validate = keyword_form(describe, "validate")


def _check_arrays(q: Any, k: Any, v: Any) -> tuple[str, str, DeviceInfo]:
    """q, k and v: one installed framework, one supported dtype, one device; returns them."""
    framework = arrays.framework_of(q)
    if framework is None:
        raise AttentionInputError("q", "a numpy, torch or jax array", type(q).__name__)
    if framework == "jax":
        _check_jax_available("q", q)
    for name, x in (("k", k), ("v", v)):
        if arrays.framework_of(x) != framework:
            raise AttentionInputError(name, f"a {framework} array like q", _describe(x))
    dtype = arrays.dtype_name(q)
    if dtype not in arrays.DTYPES:
        raise AttentionInputError("q", f"a dtype among {', '.join(arrays.DTYPES)}", dtype)
    for name, x in (("k", k), ("v", v)):
        if arrays.dtype_name(x) != dtype:
            raise AttentionInputError(name, f"dtype {dtype} like q", arrays.dtype_name(x))
    device = arrays.device_of(q, framework)
    for name, x in (("k", k), ("v", v)):
        dev = arrays.device_of(x, framework)
        if dev != device:
            raise AttentionInputError(name, f"device {device.label} like q", dev.label)
    return framework, dtype, device


def _check_shapes(q: Any, k: Any, v: Any, packed: bool) -> tuple[int, int, int]:
    """Ranks of the layout, v shaped like k, equal head dims, heads of k dividing those of q,
    equal batch (dense); returns (heads_q, heads_kv, head_dim)."""
    rank = 3 if packed else 4
    layout_text = "[T, H, D] (packed)" if packed else "[B, S, H, D] (BSHD)"
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim != rank:
            raise AttentionInputError(name, f"rank {rank} {layout_text}", f"shape {tuple(x.shape)}")
    if 0 in tuple(q.shape)[-2:] or 0 in tuple(k.shape)[-2:]:
        raise AttentionInputError("q", "non-zero heads and head dim", f"shape {tuple(q.shape)}")
    heads_q, head_dim = q.shape[-2], q.shape[-1]
    heads_kv = k.shape[-2]
    if tuple(v.shape) != tuple(k.shape):
        raise AttentionInputError("v", f"the shape of k {tuple(k.shape)}", f"{tuple(v.shape)}")
    if k.shape[-1] != head_dim:
        raise AttentionInputError("k", f"head dim {head_dim} like q", f"{k.shape[-1]}")
    if heads_q % heads_kv != 0:
        raise AttentionInputError(
            "k", f"a number of heads dividing q's {heads_q} (MQA/GQA)", f"{heads_kv}"
        )
    if not packed and q.shape[0] != k.shape[0]:
        raise AttentionInputError("k", f"batch size {q.shape[0]} like q", f"{k.shape[0]}")
    return heads_q, heads_kv, head_dim


def _check_scalars(options: AttentionOptions, head_dim: int) -> dict[str, Any]:
    """scale (default 1 / sqrt(D)), softcap, window and causal, checked and normalised as
    the `Call`'s fields of those names."""
    scale, softcap, causal = options.scale, options.softcap, options.causal
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    elif not _positive_finite(scale):
        raise AttentionInputError("scale", "a positive finite number", repr(scale))
    if softcap is not None and not _positive_finite(softcap):
        raise AttentionInputError("softcap", "a positive finite number or None", repr(softcap))
    window = None if options.window is None else _check_window(options.window)
    if not isinstance(causal, (bool, np.bool_)):
        raise AttentionInputError("causal", "a bool", repr(causal))
    return dict(
        scale=float(scale),
        softcap=None if softcap is None else float(softcap),
        window=window,
        causal=bool(causal),
    )


def _positive_finite(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _requires_grad(framework: str, q: Any, k: Any, v: Any) -> bool:
    if framework != "torch":
        return False
    import torch

    return torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))


def _traced(framework: str, q: Any, k: Any, v: Any, options: AttentionOptions) -> bool:
    return framework == "jax" and any(
        arrays.is_traced(x)
        for x in (
            q,
            k,
            v,
            options.key_padding_mask,
            options.attn_mask,
            options.cu_seqlens_q,
            options.cu_seqlens_k,
        )
    )


def _packed_layout(q: Any, k: Any, options: AttentionOptions, framework: str) -> dict[str, Any]:
    """The packed `Call`'s layout fields: no dense masks, checked maxima and cu_seqlens, the
    lengths when they were read (else the maxima, or the totals; module docstring)."""
    for name in ("key_padding_mask", "attn_mask"):
        if getattr(options, name) is not None:
            raise AttentionInputError(
                name,
                "None with the packed layout (cu_seqlens bound the sequences)",
                _describe(getattr(options, name)),
            )
    cu_q, cu_k = options.cu_seqlens_q, options.cu_seqlens_k
    total_q, total_k = q.shape[0], k.shape[0]
    max_q = _check_max_seqlen("max_seqlen_q", options.max_seqlen_q, total_q)
    max_k = _check_max_seqlen("max_seqlen_k", options.max_seqlen_k, total_k)
    lens_q = _check_cu_seqlens("cu_seqlens_q", cu_q, framework, total_q, max_q)
    lens_k = _check_cu_seqlens("cu_seqlens_k", cu_k, framework, total_k, max_k)
    if cu_q.shape[0] != cu_k.shape[0]:
        raise AttentionInputError(
            "cu_seqlens_k", f"{cu_q.shape[0]} entries like cu_seqlens_q", f"{cu_k.shape[0]}"
        )
    layout = dict(
        layout="packed",
        batch=cu_q.shape[0] - 1,
        total_q=total_q,
        total_k=total_k,
        cu_seqlens_q=cu_q,
        cu_seqlens_k=cu_k,
    )
    if lens_q is None or lens_k is None:
        return layout | dict(
            seqlen_q=total_q if max_q is None else max_q,
            seqlen_k=total_k if max_k is None else max_k,
        )
    return layout | dict(
        seqlen_q=max(lens_q, default=0),
        seqlen_k=max(lens_k, default=0),
        seqlens_q=lens_q,
        seqlens_k=lens_k,
    )


def _dense_layout(
    q: Any, k: Any, options: AttentionOptions, framework: str, device: DeviceInfo, heads_q: int
) -> dict[str, Any]:
    """The dense `Call`'s layout fields: no packed maxima, masks of the right framework,
    dtype, device and shape."""
    for name in ("max_seqlen_q", "max_seqlen_k"):
        if getattr(options, name) is not None:
            raise AttentionInputError(
                name,
                "None with the dense layout (it bounds packed sequences)",
                repr(getattr(options, name)),
            )
    batch, seqlen_q, seqlen_k = q.shape[0], q.shape[1], k.shape[1]
    key_padding_mask, attn_mask = options.key_padding_mask, options.attn_mask
    if key_padding_mask is not None:
        _check_mask("key_padding_mask", key_padding_mask, framework, device)
        if tuple(key_padding_mask.shape) != (batch, seqlen_k):
            raise AttentionInputError(
                "key_padding_mask",
                f"shape [B, Sk] = {(batch, seqlen_k)}",
                f"{tuple(key_padding_mask.shape)}",
            )
    attn_mask_shape = None
    if attn_mask is not None:
        _check_mask("attn_mask", attn_mask, framework, device)
        attn_mask_shape = tuple(attn_mask.shape)
        target = (batch, heads_q, seqlen_q, seqlen_k)
        if len(attn_mask_shape) > 4 or any(
            m not in (1, t) for m, t in zip(reversed(attn_mask_shape), reversed(target))
        ):
            raise AttentionInputError(
                "attn_mask",
                f"a shape broadcastable to [B, Hq, Sq, Sk] = {target}",
                f"{attn_mask_shape}",
            )
    return dict(
        layout="dense",
        batch=batch,
        seqlen_q=seqlen_q,
        seqlen_k=seqlen_k,
        key_padding=key_padding_mask is not None,
        attn_mask_shape=attn_mask_shape,
        key_padding_mask=key_padding_mask,
        attn_mask=attn_mask,
    )


def _check_window(window: Any) -> tuple[int, int]:
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise AttentionInputError("window", "a pair (left, right)", repr(window))
    out = []
    for w in window:
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < -1:
            raise AttentionInputError("window", "integers >= -1 (-1 = unbounded)", repr(window))
        out.append(int(w))
    return out[0], out[1]


def _check_mask(name: str, mask: Any, framework: str, device: DeviceInfo) -> None:
    fw = arrays.framework_of(mask)
    if fw != framework:
        raise AttentionInputError(name, f"a {framework} array like q", _describe(mask))
    if arrays.dtype_name(mask) != "bool":
        raise AttentionInputError(name, "dtype bool (True = may attend)", arrays.dtype_name(mask))
    dev = arrays.device_of(mask, fw)
    if dev != device:
        raise AttentionInputError(name, f"device {device.label} like q", dev.label)


def _check_max_seqlen(name: str, value: Any, total: int) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or not (0 <= value <= total)
    ):
        raise AttentionInputError(
            name, f"None or an int from 0 to the packed length {total}", repr(value)
        )
    return int(value)


def settings() -> runtime.Settings:
    """The settings of the runtime in force (`kernels/runtime.py`); a bad environment
    variable is an `AttentionInputError` naming it."""
    try:
        return runtime.current().settings
    except runtime.SettingError as exc:
        raise AttentionInputError(exc.argument, exc.expected, exc.got) from None


def _check_cu_seqlens(
    name: str, cu: Any, framework: str, total: int, max_seqlen: int | None
) -> tuple[int, ...] | None:
    """Check cu_seqlens and return the sequence lengths, or None when its values are not
    read: a tracer or fake tensor (unknown values), or a device array given with its
    `max_seqlen` (reading would synchronise). Only framework, dtype and shape are checked
    then; see the module docstring."""
    if cu is None:
        other = "cu_seqlens_k" if name == "cu_seqlens_q" else "cu_seqlens_q"
        raise AttentionInputError(name, f"an int32 array when {other} is given", "None")
    fw = arrays.framework_of(cu)
    if fw != framework:
        raise AttentionInputError(name, f"a {framework} array like q", _describe(cu))
    if arrays.dtype_name(cu) != "int32":
        raise AttentionInputError(name, "dtype int32", arrays.dtype_name(cu))
    if cu.ndim != 1 or cu.shape[0] < 1:
        raise AttentionInputError(name, "shape [N + 1]", f"shape {tuple(cu.shape)}")
    if arrays.is_symbolic(cu):
        return None
    # `configure(debug=True)` (or ATTNSWITCH_DEBUG=1): read and check device values even
    # when that synchronises (see the module docstring)
    if max_seqlen is not None and not arrays.on_host(cu) and not settings().debug:
        return None
    host = arrays.to_numpy(cu).astype(np.int64)
    if host[0] != 0:
        raise AttentionInputError(name, "a first entry of 0", int(host[0]))
    if np.any(np.diff(host) < 0):
        raise AttentionInputError(name, "non-decreasing entries", host.tolist())
    if host[-1] != total:
        raise AttentionInputError(
            name, f"a last entry equal to the packed length {total}", int(host[-1])
        )
    lengths = tuple(int(n) for n in np.diff(host))
    if max_seqlen is not None and max(lengths, default=0) > max_seqlen:
        raise AttentionInputError(
            f"max_seqlen_{name[-1]}",
            f"at least the longest sequence of {name} ({max(lengths)})",
            max_seqlen,
        )
    return lengths
