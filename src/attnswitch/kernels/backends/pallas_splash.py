"""`pallas-splash`: the splash attention TPU kernel shipped with JAX
(`jax.experimental.pallas.ops.tpu.splash_attention`), block-sparse over a static mask.

How the contract maps onto the kernel (jax 0.10):
- Layout: the kernel runs per example on `[H, L, D]`; the adapter vmaps it over the batch
  (`pallas_common` frames BSHD into `[B, H, L, D]`, sequences padded to whole 128-multiple
  blocks, padded keys masked off with segment id 0).
- scale: the kernel has none, so q is pre-scaled (in float32, stored in q's dtype).
- causal and window: the masks are top-left with an `offset`; `CausalMask(shape, offset)`
  and `LocalMask(shape, (left, right), offset)` with `offset = Sk - Sq` give the
  contract's bottom-right bounds exactly, and blocks outside them are skipped.
- softcap: `attn_logits_soft_cap` (applied after the pre-scaling, before masking) with the
  device's `jnp.tanh`, which is off by up to 4.6 ulp in float32 on XLA:CPU (interpret mode);
  conformance states this (`conformance.kernel_tanh_baseline`; docs/architecture.md).
- GQA/MQA: native (`make_splash_mha` maps query head h to key/value head h // (Hq / Hkv);
  `make_splash_mqa` for one key/value head).
- key_padding_mask and packed input: segment ids (`pallas_common`). Packed with traced
  cu_seqlens: one stream with segment ids computed on the device; causal and windows are
  declined there (`pallas_common.traced_packed_reason`).
- vmap: the kernel is already vmapped over the batch, and an outer `jax.vmap` batches it
  again (interpret mode included).
- attn_mask: folded into the static mask (`NumpyMask` per head, one kernel per example when
  it varies over the batch), so it must be concrete: a traced mask is declined.
- head dim: any, unpadded (this JAX's kernel tiles head dims itself; 32 to 256 and odd ones
  conform in interpret mode and lower for TPU).
- lse: `save_residuals=True` returns the logsumexp in float32.
- Rows with no allowed key: the kernel's mask value is finite (mean(V) comes back) and a
  block row with no block left is 0/0; the adapter zeroes those rows, lse -inf.
- dtypes: bfloat16 and float32 (the TPU's).
- gradients: the kernel's own VJP (dK/dV and dQ kernels), tiled like the forward. A
  `return_lse` kernel (`save_residuals=True`) has no VJP: differentiating it raises a clear
  error (and an unrequested plan falls back).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnswitch.kernels import arrays, masks
from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call

KERNEL_MODULE = "jax.experimental.pallas.ops.tpu.splash_attention"


@dataclass(frozen=True)
class _KernelCall:
    """The kernel call inside the jitted frame (hashable: a jit static argument)."""

    scale: float
    mqa: bool
    per_example: bool

    def __call__(self, framed: Any, kernels: tuple[Any, ...]) -> tuple[Any, Any]:
        import jax
        import jax.numpy as jnp
        from jax.experimental.pallas.ops.tpu import splash_attention as sa

        q = (framed.q.astype(jnp.float32) * self.scale).astype(framed.q.dtype)
        k, v = framed.k, framed.v
        if self.mqa:
            k, v = k[:, 0], v[:, 0]
        segmented = framed.seg_q is not None

        def one(kernel: Any, q: Any, k: Any, v: Any, *seg: Any) -> Any:
            return kernel(q, k, v, sa.SegmentIds(*seg) if segmented else None)

        segs = (framed.seg_q, framed.seg_kv) if segmented else ()
        if self.per_example:
            results = [
                one(kernel, q[b], k[b], v[b], *(s[b] for s in segs))
                for b, kernel in enumerate(kernels)
            ]
            result = jax.tree.map(lambda *xs: jnp.stack(xs), *results)
        else:
            result = jax.vmap(functools.partial(one, kernels[0]))(q, k, v, *segs)
        if isinstance(result, tuple):
            out, (lse,) = result
            return out, lse
        return result, None


class PallasSplash(BackendBase):
    name = "pallas-splash"
    framework = "jax"
    libraries = ("jax", "jaxlib")
    softcap_tanh = "jax"  # the kernel's `attn_logits_soft_cap` is `jnp.tanh`

    @property
    def caps(self) -> Capabilities:  # type: ignore[override]
        from attnswitch.kernels import pallas_common

        return Capabilities(
            device_kinds=pallas_common.device_kinds(), dtypes=("bfloat16", "float32")
        )

    def _probe(self) -> str | None:
        if why := import_reason("jax", "jax"):
            return why
        from attnswitch.kernels import pallas_common

        return pallas_common.kernel_import_reason(KERNEL_MODULE)

    def unavailable(self) -> str | None:
        if why := super().unavailable():
            return why
        from attnswitch.kernels import pallas_common

        return pallas_common.device_reason()

    def extra_declines(self, call: Call) -> list[str]:
        from attnswitch.kernels import pallas_common

        reasons = []
        if call.attn_mask is not None and call.framework == "jax":
            if arrays.is_traced(call.attn_mask):
                reasons.append(
                    "attn_mask is traced (inside jax.jit or vmap): splash builds its block map "
                    "from a concrete mask"
                )
        if why := pallas_common.traced_packed_reason(call):
            reasons.append(why)
        return reasons

    def detail(self, call: Call) -> str | None:
        from attnswitch.kernels import pallas_common

        frame = pallas_common.plan_frame(call, top_left=False)
        mask = _mask_text(frame)
        if call.attn_mask is not None:
            mask += " & attn_mask (NumpyMask)"
        mode = "interpret mode" if frame.interpret else "native"
        return f"{mask}; {frame.text}; {mode}"

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from attnswitch.kernels import jax_common, pallas_common

        if pallas_common.is_empty(q, k):
            return jax_common.empty_result(q, call)
        frame = pallas_common.plan_frame(call, top_left=False)
        settings = _Settings(
            heads=frame.heads_q,
            mqa=frame.heads_kv == 1,
            block_q=frame.block_q,
            block_k=frame.block_k,
            softcap=call.softcap,
            lse=call.return_lse,
            interpret=frame.interpret,
        )
        if call.attn_mask is None:
            kernels = (_kernel(settings, _mask_key(frame)),)
        else:
            kernels = _mask_kernels(settings, frame, arrays.to_numpy(call.attn_mask))
        kernel_call = _KernelCall(call.scale, settings.mqa, len(kernels) > 1)
        return pallas_common.execute(q, k, v, call, frame, kernel_call, kernels)


@dataclass(frozen=True)
class _Settings:
    heads: int
    mqa: bool
    block_q: int
    block_k: int
    softcap: float | None
    lse: bool
    interpret: bool


def _mask_key(frame: Any) -> tuple:
    """A hashable description of the frame's positional mask."""
    shape = (frame.len_q, frame.len_k)
    b = frame.restricted
    if b is None:
        return ("full", shape)
    left, right = b
    if left < 0:
        return ("causal", shape, frame.offset + right)
    return ("local", shape, (left, None if right < 0 else right), frame.offset)


def _mask_text(frame: Any) -> str:
    key = _mask_key(frame)
    if key[0] == "full":
        return "FullMask"
    if key[0] == "causal":
        return f"CausalMask(offset={key[2]})"
    return f"LocalMask(window={key[2]}, offset={key[3]})"


def _positional_mask(key: tuple) -> Any:
    from jax.experimental.pallas.ops.tpu import splash_attention as sa

    if key[0] == "full":
        return sa.FullMask(key[1])
    if key[0] == "causal":
        return sa.CausalMask(key[1], offset=key[2])
    return sa.LocalMask(key[1], window_size=key[2], offset=key[3])


def _make(settings: _Settings, head_masks: list[Any]) -> Any:
    """A splash kernel. Built with concrete arrays even when called inside a trace (a call
    under `jax.jit`): the kernel holds its block map as arrays and is cached across traces,
    so a tracer inside it would leak into the next one."""
    import jax
    from jax.experimental.pallas.ops.tpu import splash_attention as sa

    make = sa.make_splash_mqa if settings.mqa else sa.make_splash_mha
    with jax.ensure_compile_time_eval():
        return make(
            sa.MultiHeadMask(head_masks),
            block_sizes=sa.BlockSizes(  # backward (dK/dV, dQ) tiled like the forward
                block_q=settings.block_q,
                block_kv=settings.block_k,
                block_kv_compute=settings.block_k,
                block_q_dkv=settings.block_q,
                block_kv_dkv=settings.block_k,
                block_kv_dkv_compute=settings.block_k,
                block_q_dq=settings.block_q,
                block_kv_dq=settings.block_k,
            ),
            head_shards=1,
            q_seq_shards=1,
            attn_logits_soft_cap=settings.softcap,
            save_residuals=settings.lse,
            interpret=settings.interpret,
        )


@functools.lru_cache(maxsize=64)
def _kernel(settings: _Settings, key: tuple) -> Any:
    """The kernel for a positional mask (cached: building it walks the mask's blocks)."""
    mask = _positional_mask(key)
    return _make(settings, [mask] * settings.heads)


def _mask_kernels(settings: _Settings, frame: Any, attn_mask: np.ndarray) -> tuple[Any, ...]:
    """Kernels whose static masks are the frame's bounds & `attn_mask` (`[B|1, H|1, Sq, Sk]`
    after broadcasting): one for the batch, or one per example when it varies."""
    from jax.experimental.pallas.ops.tpu import splash_attention as sa

    am = attn_mask.reshape((1,) * (4 - attn_mask.ndim) + attn_mask.shape)
    rows = np.arange(frame.len_q)[:, None] + frame.offset
    cols = np.arange(frame.len_k)[None, :]
    bounded = masks.bounds_mask(rows, cols, frame.restricted)
    kernels = []
    for b in range(am.shape[0] if am.shape[0] > 1 else 1):
        heads = []
        for h in range(am.shape[1]):
            full = np.zeros((frame.len_q, frame.len_k), dtype=bool)
            full[: frame.seqlen_q, : frame.seqlen_k] = np.broadcast_to(
                am[b, h], (frame.seqlen_q, frame.seqlen_k)
            )
            if bounded is not None:
                full &= bounded
            heads.append(sa.NumpyMask(full))
        if len(heads) == 1:
            heads = heads * settings.heads
        kernels.append(_make(settings, heads))
    return tuple(kernels)


BACKEND = PallasSplash()
