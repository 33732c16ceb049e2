"""Plumbing shared by the Pallas TPU backends (`pallas-flash`, `pallas-splash`).

The interpret switch. On a TPU the kernels run natively. Elsewhere they run only in Pallas
interpret mode (for tests, slow), which `ATTNSWITCH_PALLAS_INTERPRET=1` or
`set_interpret(True)` (or `with interpret():`) switches on: `unavailable()` then says
nothing on a host without a TPU, and a call whose arrays are not on a TPU is interpreted.

The frame. The kernels take `[B, H, L, D]` and tile L in blocks that are multiples of 128
dividing L. A call becomes a dense problem first: packed input is one stream `[1, T]` with
segment ids (one per sequence) when every sequence has as many keys as queries, otherwise
it is left-padded to `[N, max_len]` (`masks.padding_indices`, which keeps each sequence's
bottom-right alignment). With traced `cu_seqlens` (inside `jax.jit`) the lengths are not
known on the host: the call is one stream `[1, Tq] x [1, Tk]` whose segment ids are computed
on the device from `cu_seqlens`; that is exact without causal or a window (segments alone
decide), so backends decline traced packed calls with bounds (`traced_packed_reason`).
The problem is then padded to whole blocks (at the end; at the front too for kernels whose causal is top-left: `front_q`/`front_k` shift queries or keys
so that the kernel's diagonal is the contract's bottom-right one). Padded, padding and
masked-out keys carry segment id 0, which no real query has.

Rows with no allowed key. The kernels mask with a finite number, so such rows come back
as mean(V) (or NaN where a whole block row is skipped). `row_has_key` finds them from the
geometry (bounds, key validity, `attn_mask`) in O(B * (Sq + Sk)) without an attn_mask, and
`execute` zeroes them (lse -inf).

Import this module only from inside a backend's functions (it imports jax).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from attnswitch.kernels import arrays, jax_common, masks, runtime
from attnswitch.kernels.contract import Call, settings

INTERPRET_ENV = runtime.ENVIRONMENT["pallas_interpret"]
NO_TPU = f"needs a TPU; runs here only in Pallas interpret mode for tests ({INTERPRET_ENV}=1)"
BLOCK = 128  # the kernels' block unit (TPU lanes)
MAX_BLOCK = 512  # the largest block chosen for long sequences


def interpret_enabled() -> bool:
    """Whether Pallas interpret mode is switched on in the runtime in force (`set_interpret`,
    `interpret()`, else `ATTNSWITCH_PALLAS_INTERPRET` as read by the runtime)."""
    return settings().pallas_interpret


def set_interpret(enabled: bool | None) -> None:
    """Switch interpret mode on or off in the runtime in force (None: as the environment
    says). Plans are keyed on the settings, so cached plans of the other mode stay apart."""
    if enabled is None:
        enabled = runtime.Settings.from_environment().pallas_interpret
    runtime.current().configure(pallas_interpret=bool(enabled))


@contextlib.contextmanager
def interpret(enabled: bool = True) -> Iterator[None]:
    """Within this block (this context), interpret mode is `enabled`."""
    with runtime.using(runtime.current().view(pallas_interpret=bool(enabled))):
        yield


@functools.cache
def tpu_present() -> bool:
    return any(d.platform == "tpu" for d in jax.devices())


def kernel_import_reason(module: str) -> str | None:
    """None if the kernel module imports, else why not (JAX's Pallas attention kernels are
    moving to the tokamax project and may leave `jax.experimental`)."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as exc:
        return (
            f"{module} is not importable in jax {jax.__version__} ({type(exc).__name__}: {exc}); "
            "JAX's Pallas TPU attention kernels are moving to the tokamax project"
        )
    return None


def device_reason() -> str | None:
    """Why the kernels cannot run in this process (no TPU, interpret mode off), or None."""
    if tpu_present() or interpret_enabled():
        return None
    return NO_TPU


def device_kinds() -> tuple[str, ...]:
    """Device kinds a Pallas backend serves: TPU, and CPU (interpreted) when interpret mode is
    on or when there is no TPU here (`unavailable()` then keeps plans off the backend, and
    `conformance.check(..., force=True)` can still run it). A TPU host without the switch
    declines CPU arrays rather than interpret them silently."""
    return ("tpu", "cpu") if interpret_enabled() or not tpu_present() else ("tpu",)


@contextlib.contextmanager
def tpu_interpret_mode(enabled: bool) -> Iterator[None]:
    """Force TPU interpret mode for Pallas calls traced in this block (for kernels without an
    `interpret` argument); after an exception its shared state is reset, as JAX asks."""
    if not enabled:
        yield
        return
    from jax.experimental.pallas import tpu as pltpu

    try:
        with pltpu.force_tpu_interpret_mode():
            yield
    except BaseException:
        pltpu.reset_tpu_interpret_mode_state()
        raise


def interpreted_vjp(fn: Callable[..., Any], enabled: bool) -> Callable[..., Any]:
    """`fn` (a Pallas kernel without an `interpret` argument) traced in TPU interpret mode
    when `enabled`, its backward pass too: JAX traces a VJP after the forward's
    `tpu_interpret_mode` block has closed, so without this the backward kernels would be
    lowered for a TPU. The identity when not `enabled`."""
    if not enabled:
        return fn

    @jax.custom_vjp
    def wrapped(*args: Any) -> Any:
        with tpu_interpret_mode(True):
            return fn(*args)

    def forward(*args: Any) -> tuple[Any, Any]:
        with tpu_interpret_mode(True):
            return jax.vjp(fn, *args)  # (out, the VJP closure: a pytree, kept as residual)

    def backward(vjp: Any, cotangent: Any) -> Any:
        with tpu_interpret_mode(True):
            return vjp(cotangent)

    wrapped.defvjp(forward, backward)
    return wrapped


def interpreted(fn: Callable[..., Any], enabled: bool) -> Callable[..., Any]:
    """`interpreted_vjp(fn)` that also survives `jax.vmap` in interpret mode: a vmapped call
    folds the vmapped axis into the kernel's batch axis (every argument and result of `fn`
    leads with it), forward and backward. JAX's TPU interpreter cannot run a batched
    `pallas_call` (its grid gains a dimension that its dimension semantics lack: jax 0.10
    raises "safe_zip() argument 1 has length 4 but argument 0 has length 5"); Mosaic's TPU
    lowering can, so natively nothing is wrapped. The backward here recomputes the forward
    (interpret mode is for tests: its cost does not matter). The identity when not `enabled`."""
    if not enabled:
        return fn
    forward = fold_vmap(interpreted_vjp(fn, True))

    def cotangents(args: tuple[Any, ...], cotangent: Any) -> Any:
        grads = jax.vjp(interpreted_vjp(fn, True), *args)[1](cotangent)
        # integer arguments (segment ids) have no cotangent: None, not float0 arrays
        return jax.tree.map(lambda g: None if g.dtype == jax.dtypes.float0 else g, grads)

    backward = fold_vmap(cotangents)

    @jax.custom_vjp
    def wrapped(*args: Any) -> Any:
        return forward(*args)

    wrapped.defvjp(lambda *args: (forward(*args), args), backward)
    return wrapped


def fold_vmap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, whose array arguments and results all lead with a batch axis, batched under
    `jax.vmap` by folding the vmapped axis into that batch axis (`[V, B, ...]` runs as
    `[V * B, ...]`; an unbatched argument is broadcast first) instead of by `fn`'s primitives'
    own batching rules. Not differentiable by itself (`jax.custom_batching.custom_vmap`):
    `interpreted` puts a VJP around it."""
    from jax.custom_batching import custom_vmap

    folded = custom_vmap(fn)

    @folded.def_vmap
    def _rule(axis_size: int, in_batched: Any, *args: Any) -> tuple[Any, Any]:
        leaves, tree = jax.tree.flatten(args)
        batched = jax.tree.leaves(in_batched)

        def fold(x: Any, is_batched: bool) -> Any:
            if not is_batched:
                x = jnp.broadcast_to(x, (axis_size, *x.shape))
            return x.reshape((axis_size * x.shape[1], *x.shape[2:]))

        out = folded(*jax.tree.unflatten(tree, [fold(x, b) for x, b in zip(leaves, batched)]))
        unfold = lambda y: y.reshape((axis_size, y.shape[0] // axis_size, *y.shape[1:]))  # noqa: E731
        return jax.tree.map(unfold, out), jax.tree.map(lambda _: True, out)

    return folded


# ---- the frame -------------------------------------------------------------------------


def _round_up(n: int, m: int) -> int:
    return max(m, -(-n // m) * m)


def block_for(length: int) -> int:
    """The largest block (a multiple of 128, at most MAX_BLOCK) dividing a framed length."""
    for b in range(MAX_BLOCK, BLOCK - 1, -BLOCK):
        if length % b == 0:
            return b
    raise ValueError(f"length: expected a multiple of {BLOCK}, got {length}")


@dataclass(frozen=True)
class Frame:
    """Static geometry of one call in a kernel's layout (hashable: a jit static argument).

    layout: "dense", "stream" (packed, every sequence as long in q as in k, or lengths
    traced: one row with segment ids) or "padded" (packed, left-padded to `[N, max_len]`).
    seqlens_q/k: the packed lengths; None in a stream of traced cu_seqlens (`on_device`).
    batch, seqlen_q, seqlen_k: the dense problem. Real query i sits at frame row
    `front_q + i`, real key j at frame column `front_k + j`; frame lengths `len_q`, `len_k`
    are multiples of 128. `head_dim_pad` >= `head_dim` is the head dim the kernel sees.
    """

    layout: str
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    head_dim_pad: int
    front_q: int
    front_k: int
    len_q: int
    len_k: int
    bounds: tuple[int, int] | None
    key_padding: bool
    interpret: bool
    seqlens_q: tuple[int, ...] | None = None
    seqlens_k: tuple[int, ...] | None = None

    @property
    def on_device(self) -> bool:
        """A stream whose segment ids come from traced cu_seqlens, on the device."""
        return self.layout == "stream" and self.seqlens_q is None

    @property
    def offset(self) -> int:
        """The diagonal in frame coordinates: frame row r is aligned with column r + offset."""
        return masks.diagonal_offset(self.seqlen_q, self.seqlen_k) - self.front_q + self.front_k

    @property
    def block_q(self) -> int:
        return block_for(self.len_q)

    @property
    def block_k(self) -> int:
        return block_for(self.len_k)

    @property
    def segmented(self) -> bool:
        """Whether keys need segment ids (packing, key padding, or padded key columns)."""
        return (
            self.layout != "dense"
            or self.key_padding
            or self.front_k > 0
            or self.len_k != self.seqlen_k
        )

    @property
    def text(self) -> str:
        """How the frame reads in a plan, e.g. "frame stream 128x128 (blocks 128x128)"."""
        source = " of traced cu_seqlens (segment ids on the device)" if self.on_device else ""
        return (
            f"frame {self.layout}{source} {self.len_q}x{self.len_k} "
            f"(blocks {self.block_q}x{self.block_k})"
        )

    @property
    def restricted(self) -> tuple[int, int] | None:
        """`bounds` unless they restrict nothing."""
        b = self.bounds
        return None if b is None or (b[0] < 0 and b[1] < 0) else b


def plan_frame(
    call: Call, *, top_left: bool, head_dim_pad: Callable[[int], int] = lambda d: d
) -> Frame:
    """The frame of `call` for a kernel. `top_left`: the kernel's causal is top-left, so
    queries (Sq < Sk) or keys (Sq > Sk) are shifted to make the diagonals meet.
    `head_dim_pad` maps the head dim to the one the kernel needs (zero padding)."""
    seqlens_q = seqlens_k = None
    if not call.packed:
        layout, batch, sq, sk = "dense", call.batch, call.seqlen_q, call.seqlen_k
    elif call.seqlens_q is None:  # traced cu_seqlens: seqlen_q/k are the totals Tq, Tk
        layout, batch, sq, sk = "stream", 1, call.seqlen_q, call.seqlen_k
    elif call.seqlens_q == call.seqlens_k:
        layout, batch = "stream", 1
        sq = sk = sum(call.seqlens_q)
        seqlens_q, seqlens_k = call.seqlens_q, call.seqlens_k
    else:
        layout, batch, sq, sk = "padded", call.batch, call.seqlen_q, call.seqlen_k
        seqlens_q, seqlens_k = call.seqlens_q, call.seqlens_k
    bounds = call.bounds
    restricted = bounds is not None and not (bounds[0] < 0 and bounds[1] < 0)
    front_q = front_k = 0
    if top_left and restricted:
        offset = masks.diagonal_offset(sq, sk)
        front_q, front_k = max(0, offset), max(0, -offset)
    return Frame(
        layout=layout,
        batch=batch,
        seqlen_q=sq,
        seqlen_k=sk,
        heads_q=call.heads_q,
        heads_kv=call.heads_kv,
        head_dim=call.head_dim,
        head_dim_pad=head_dim_pad(call.head_dim),
        front_q=front_q,
        front_k=front_k,
        len_q=_round_up(front_q + sq, BLOCK),
        len_k=_round_up(front_k + sk, BLOCK),
        bounds=bounds,
        key_padding=call.key_padding or layout == "padded",
        interpret=call.device.kind != "tpu",
        seqlens_q=seqlens_q,
        seqlens_k=seqlens_k,
    )


def traced_packed_reason(call: Call) -> str | None:
    """Why a packed call with traced cu_seqlens cannot be framed, or None. The stream frame
    has one diagonal; each sequence's own diagonal (`Sk_i - Sq_i`) needs lengths that are
    on the device only, so causal and windows are declined (no bounds: segments decide)."""
    if call.packed and call.seqlens_q is None and call.bounds is not None:
        return (
            "causal/window on packed input with traced cu_seqlens (inside jax.jit): the "
            "kernel's one diagonal needs each sequence's lengths on the host; close over "
            "concrete cu_seqlens, or jax-blockwise serves traced ones"
        )
    return None


def is_empty(q: Any, k: Any) -> bool:
    """No query, or no key at all: the result is zeros (lse -inf) without a kernel."""
    return 0 in tuple(q.shape)[:-2] or 0 in tuple(k.shape)[:-2]


@dataclass(frozen=True)
class FramedArrays:
    """A call's arrays in the frame: q `[B, Hq, Lq, Dp]`, k/v `[B, Hkv, Lk, Dp]`, segment ids
    `[B, Lq]`/`[B, Lk]` int32 (None when not `frame.segmented`), and the dense problem's key
    validity `[B, Sk]` (None: all valid)."""

    q: Any
    k: Any
    v: Any
    seg_q: Any
    seg_kv: Any
    kv_valid: Any


def _packed_to_padded(x: Any, seqlens: tuple[int, ...], max_len: int) -> tuple[Any, np.ndarray]:
    flat, valid = masks.padding_indices(seqlens, max_len)
    n = len(seqlens)
    out = jnp.zeros((n * max_len,) + tuple(x.shape[1:]), x.dtype).at[flat].set(x)
    return out.reshape((n, max_len) + tuple(x.shape[1:])), valid


def _stream_ids(seqlens: tuple[int, ...]) -> np.ndarray:
    return np.repeat(np.arange(1, len(seqlens) + 1, dtype=np.int32), seqlens)[None]


def _device_stream_ids(cu_seqlens: Any, total: int) -> Any:
    """int32 `[1, total]` segment ids (sequence index + 1) from traced cu_seqlens."""
    return (jax_common.segment_ids(cu_seqlens, total) + 1)[None]


def to_frame(
    q: Any,
    k: Any,
    v: Any,
    key_padding_mask: Any,
    frame: Frame,
    cu_seqlens: tuple[Any, Any] | None = None,
) -> FramedArrays:
    """Put contract-layout arrays into `frame` (traceable). `cu_seqlens` (q, k): the
    call's, needed only when `frame.on_device`."""
    ids_q = ids_k = kv_valid = None
    if frame.layout == "dense":
        kv_valid = key_padding_mask
    elif frame.on_device:
        q, k, v = q[None], k[None], v[None]
        ids_q = _device_stream_ids(cu_seqlens[0], frame.seqlen_q)
        ids_k = _device_stream_ids(cu_seqlens[1], frame.seqlen_k)
    elif frame.layout == "stream":
        q, k, v = q[None], k[None], v[None]
        ids_q, ids_k = _stream_ids(frame.seqlens_q), _stream_ids(frame.seqlens_k)
    else:
        q, _ = _packed_to_padded(q, frame.seqlens_q, frame.seqlen_q)
        k, valid = _packed_to_padded(k, frame.seqlens_k, frame.seqlen_k)
        v, _ = _packed_to_padded(v, frame.seqlens_k, frame.seqlen_k)
        kv_valid = jnp.asarray(valid)

    def place(x: Any, front: int, length: int) -> Any:
        rows = (front, length - front - x.shape[1])
        return jax_common.bshd_to_bhsd(
            jnp.pad(x, ((0, 0), rows, (0, 0), (0, frame.head_dim_pad - x.shape[3])))
        )

    def place_ids(ids: Any, front: int, length: int) -> Any:
        return jnp.pad(jnp.asarray(ids), ((0, 0), (front, length - front - ids.shape[1])))

    qf, kf, vf = (
        place(q, frame.front_q, frame.len_q),
        place(k, frame.front_k, frame.len_k),
        place(v, frame.front_k, frame.len_k),
    )
    seg_q = seg_kv = None
    if frame.segmented:
        b = frame.batch
        if ids_q is None:
            ids_q = jnp.ones((b, frame.seqlen_q), jnp.int32)
            ids_k = (
                jnp.ones((b, frame.seqlen_k), jnp.int32)
                if kv_valid is None
                else kv_valid.astype(jnp.int32)
            )
        seg_q = place_ids(ids_q, frame.front_q, frame.len_q)
        seg_kv = place_ids(ids_k, frame.front_k, frame.len_k)
    return FramedArrays(qf, kf, vf, seg_q, seg_kv, kv_valid)


def row_has_key(
    frame: Frame, kv_valid: Any, attn_mask: Any, cu_seqlens: tuple[Any, Any] | None = None
) -> Any:
    """Bool `[B|1, H|1, Sq]`: dense-problem query rows with at least one allowed key, or None
    when every row has one. Without attn_mask this costs O(B * (Sq + Sk)): each row's
    allowed keys form an interval (bounds), and a prefix sum of key validity counts them.
    A stream from traced `cu_seqlens` (q, k) has no bounds: a row has a key when its
    sequence has one."""
    if frame.on_device:
        cu_q, cu_k = cu_seqlens
        seq = jax_common.segment_ids(cu_q, frame.seqlen_q)
        return (cu_k[seq + 1] > cu_k[seq])[None, None]
    if frame.layout == "stream":
        return None  # every sequence has its diagonal key, which any bounds allow
    sq, sk = frame.seqlen_q, frame.seqlen_k
    if attn_mask is not None:  # the frame answers seqlen_q, seqlen_k and bounds like a Call
        return jnp.any(masks.dense_mask(frame, jnp.arange, kv_valid, attn_mask), axis=-1)
    rows = np.arange(sq)
    lo, hi = np.zeros(sq, np.int64), np.full(sq, sk, np.int64)
    lowest, highest = masks.key_range(rows + masks.diagonal_offset(sq, sk), frame.restricted)
    if lowest is not None:
        lo = np.clip(lowest, 0, sk)
    if highest is not None:
        hi = np.clip(highest + 1, 0, sk)
    if kv_valid is None:
        ok = hi > lo
        return None if ok.all() else jnp.asarray(ok)[None, None]
    valid = kv_valid.astype(jnp.int32)
    counts = jnp.concatenate([jnp.zeros_like(valid[:, :1]), jnp.cumsum(valid, axis=1)], axis=1)
    return (counts[:, hi] - counts[:, lo] > 0)[:, None, :]


def from_frame(
    out: Any,
    lse: Any,
    frame: Frame,
    framed: FramedArrays,
    attn_mask: Any,
    cu_seqlens: tuple[Any, Any] | None = None,
) -> Any:
    """Kernel output `[B, Hq, Lq, Dp]` (and lse `[B, Hq, Lq]`) back to the contract's layout,
    with rows that have no allowed key zeroed (lse -inf). Returns out or (out, lse)."""
    rows = slice(frame.front_q, frame.front_q + frame.seqlen_q)
    out = jax_common.bhsd_to_bshd(out[:, :, rows, : frame.head_dim])
    lse = None if lse is None else lse[:, :, rows].astype(jnp.float32)
    ok = row_has_key(frame, framed.kv_valid, attn_mask, cu_seqlens)
    if ok is not None:
        b, sq, hq, _ = out.shape
        ok = jnp.broadcast_to(ok, (b, hq, sq))
        out = jnp.where(jnp.swapaxes(ok, 1, 2)[..., None], out, jnp.zeros((), out.dtype))
        if lse is not None:
            lse = jnp.where(ok, lse, -jnp.inf)
    if frame.layout == "stream":
        out, lse = out[0], None if lse is None else lse[0]
    elif frame.layout == "padded":
        flat, _ = masks.padding_indices(frame.seqlens_q, frame.seqlen_q)
        out = masks.unpad(out, flat)
        if lse is not None:
            lse = jnp.swapaxes(lse, 0, 1).reshape(frame.heads_q, -1)[:, flat]
    return out if lse is None else (out, lse)


Kernel = Callable[[FramedArrays, Any], tuple[Any, Any]]


def _execute(
    q: Any,
    k: Any,
    v: Any,
    key_padding_mask: Any,
    attn_mask: Any,
    cu_seqlens: Any,
    extra: Any,
    *,
    frame: Frame,
    kernel: Kernel,
) -> Any:
    framed = to_frame(q, k, v, key_padding_mask, frame, cu_seqlens)
    out, lse = kernel(framed, extra)
    return from_frame(out, lse, frame, framed, attn_mask, cu_seqlens)


# Interpret mode compiles every shape anew for small test shapes, where compile time
# dominates: XLA's cheaper optimisation level shortens it.
_INTERPRET_COMPILER_OPTIONS = MappingProxyType(
    {
        "xla_backend_optimization_level": 0,
        "xla_llvm_disable_expensive_passes": True,
    }
)


@functools.cache
def _jitted(interpret: bool) -> Callable[..., Any]:
    options = dict(_INTERPRET_COMPILER_OPTIONS) if interpret else None
    return jax.jit(_execute, static_argnames=("frame", "kernel"), compiler_options=options)


def execute(
    q: Any, k: Any, v: Any, call: Call, frame: Frame, kernel: Kernel, extra: Any = None
) -> Any:
    """Run `kernel` (hashable: a jit static argument) on `call` framed by `frame` and return
    the contract's result. `kernel(framed, extra)` returns out `[B, Hq, Lq, Dp]` in q's dtype
    and lse `[B, Hq, Lq]` (or None); `extra` is a pytree of arrays it needs."""
    if is_empty(q, k):
        return jax_common.empty_result(q, call)
    cu_seqlens = (call.cu_seqlens_q, call.cu_seqlens_k) if frame.on_device else None
    args = (q, k, v, call.key_padding_mask, call.attn_mask, cu_seqlens, extra)
    # compiler options are for a top-level jit only, not one nested in the caller's trace
    top_level = not any(arrays.is_traced(x) for x in jax.tree.leaves(args))
    try:
        return _jitted(frame.interpret and top_level)(*args, frame=frame, kernel=kernel)
    except NotImplementedError as exc:
        if not call.return_lse:
            raise
        # The kernels return lse only from their residual-saving forward, which JAX's
        # kernels refuse to differentiate ("Higher-order AD not supported").
        raise NotImplementedError(
            f"return_lse: expected a call that is not differentiated, got one under jax "
            f"differentiation; the Pallas kernel returns lse only from a forward pass without "
            f"a VJP ({exc})"
        ) from exc
