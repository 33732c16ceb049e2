"""`pallas-flash`: the FlashAttention TPU kernel shipped with JAX
(`jax.experimental.pallas.ops.tpu.flash_attention`).

How the contract maps onto the kernel (jax 0.10):
- Layout `[B, H, L, D]`; `pallas_common` frames BSHD into it with sequences padded to whole
  128-multiple blocks and padded keys masked off with segment id 0.
- scale: passed as `sm_scale` (the kernel's default is 1.0).
- causal: the kernel's is top-left. The adapter translates: for Sq < Sk it shifts the queries
  down by Sk - Sq rows (front padding), for Sq > Sk it shifts the keys right by Sq - Sk
  masked columns, so the kernel's diagonal is the contract's bottom-right one. The shift
  costs its rows or columns in work (see `detail`).
- window and softcap: the kernel has neither: declined (`pallas-splash` serves both).
- GQA/MQA: the kernel wants as many key/value heads as query heads: they are repeated.
- key_padding_mask and packed input: segment ids. Packed with traced cu_seqlens (inside
  `jax.jit`): one stream with segment ids computed on the device, so causal and windows are
  declined there (`pallas_common.traced_packed_reason`). attn_mask: the kernel's additive bias
  `ab` (a `[B, Hq, Lq, Lk]` array: memory grows with Sq * Sk); traced masks work too.
- head dim: above 128 it must be a multiple of 128: zero-padded (scores unchanged; the extra
  output columns are sliced off).
- lse: the kernel's forward keeps l (row sums) and m (row maxima) when asked for residuals
  (`_flash_attention(..., save_residuals=True)`, a private entry point of the module);
  lse = m + log(l). If a JAX version drops it, return_lse is declined.
- Rows with no allowed key: the mask value is finite (mean(V) comes back); the adapter
  zeroes those rows, lse -inf.
- dtypes: bfloat16 and float32 (the TPU's).
- gradients: the kernel's own VJP (dK/dV and dQ kernels), tiled like the forward. In
  interpret mode `pallas_common.interpreted` traces the backward in interpret mode too.
  lse comes from the residual entry, which has no VJP: differentiating a `return_lse` call
  raises a clear error (and an unrequested plan falls back).
- vmap: natively the kernel's `pallas_call` batches (Mosaic lowers the extra grid dimension);
  JAX's TPU interpreter cannot, so in interpret mode `pallas_common.fold_vmap` folds the
  vmapped axis into the batch axis (forward, lse and backward).
- No `interpret` argument: off a TPU the call is traced under
  `pltpu.force_tpu_interpret_mode()` (slow: tests only).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call

KERNEL_MODULE = "jax.experimental.pallas.ops.tpu.flash_attention"
MASK_BIAS = -1e30  # a masked key's bias (added before sm_scale): finite, and exp gives 0


def _head_dim_pad(d: int) -> int:
    """The kernel's rule: a head dim above 128 must be a multiple of 128."""
    return d if d <= 128 else -(-d // 128) * 128


def _residuals_entry() -> Any:
    """The kernel's forward with residuals (l, m), or None when this JAX lacks it."""
    try:
        from jax.experimental.pallas.ops.tpu import flash_attention as fa
    except ImportError:
        return None
    return getattr(fa, "_flash_attention", None)


@dataclass(frozen=True)
class _KernelCall:
    """The kernel call inside the jitted frame (hashable: a jit static argument)."""

    causal: bool
    scale: float
    block_q: int
    block_k: int
    lse: bool
    interpret: bool

    def __call__(self, framed: Any, attn_mask: Any) -> tuple[Any, Any]:
        import jax.numpy as jnp
        from jax.experimental.pallas.ops.tpu import flash_attention as fa

        from attnswitch.kernels import pallas_common

        q, k, v = framed.q, framed.k, framed.v
        groups = q.shape[1] // k.shape[1]
        if groups > 1:
            k, v = jnp.repeat(k, groups, axis=1), jnp.repeat(v, groups, axis=1)
        segments = None if framed.seg_q is None else fa.SegmentIds(q=framed.seg_q, kv=framed.seg_kv)
        bq, bk = self.block_q, self.block_k
        # The backward kernels (dK/dV, dQ) tile like the forward: the frame is padded to
        # whole blocks of these sizes, so they divide every length.
        blocks = fa.BlockSizes(
            block_q=bq,
            block_k_major=bk,
            block_k=bk,
            block_b=1,
            block_q_major_dkv=bq,
            block_k_major_dkv=bk,
            block_k_dkv=bk,
            block_q_dkv=bq,
            block_k_major_dq=bk,
            block_k_dq=bk,
            block_q_dq=bq,
        )
        if not self.lse:
            kernel = functools.partial(
                fa.flash_attention, causal=self.causal, sm_scale=self.scale, block_sizes=blocks
            )
            out = pallas_common.interpreted(kernel, self.interpret)(q, k, v, attn_mask, segments)
            return out, None
        entry = _residuals_entry()

        def residuals(q: Any, k: Any, v: Any, attn_mask: Any, segments: Any) -> Any:
            with pallas_common.tpu_interpret_mode(self.interpret):  # also when vmap folds later
                return entry(
                    q, k, v, attn_mask, segments, True, self.causal, self.scale, blocks, False
                )

        if self.interpret:
            residuals = pallas_common.fold_vmap(residuals)
        out, row_sum, row_max = residuals(q, k, v, attn_mask, segments)
        return out, row_max + jnp.log(row_sum)


class PallasFlash(BackendBase):
    name = "pallas-flash"
    framework = "jax"
    libraries = ("jax", "jaxlib")

    @property
    def caps(self) -> Capabilities:  # type: ignore[override]
        from attnswitch.kernels import pallas_common

        return Capabilities(
            device_kinds=pallas_common.device_kinds(),
            dtypes=("bfloat16", "float32"),
            softcap=False,
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
        b = call.bounds
        if b is not None and b not in ((-1, -1), (-1, 0)):
            reasons.append(
                f"window {call.window}: the kernel has causal only (pallas-splash serves windows)"
            )
        if why := pallas_common.traced_packed_reason(call):
            reasons.append(why)
        if call.return_lse and _residuals_entry() is None:
            reasons.append(
                f"return_lse: {KERNEL_MODULE} has no `_flash_attention` entry returning residuals"
            )
        return reasons

    def detail(self, call: Call) -> str | None:
        from attnswitch.kernels import pallas_common

        f = pallas_common.plan_frame(call, top_left=True, head_dim_pad=_head_dim_pad)
        notes = [f.text]
        if f.front_q:
            notes.append(f"causal aligned by shifting queries {f.front_q} rows")
        if f.front_k:
            notes.append(f"causal aligned by shifting keys {f.front_k} columns")
        if call.gqa:
            notes.append(f"key/value heads repeated {call.heads_q // call.heads_kv}x")
        if call.attn_mask is not None:
            notes.append(f"attn_mask as a {f.batch}x{f.heads_q}x{f.len_q}x{f.len_k} bias")
        notes.append("interpret mode" if f.interpret else "native")
        return "; ".join(notes)

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from attnswitch.kernels import jax_common, pallas_common

        if pallas_common.is_empty(q, k):
            return jax_common.empty_result(q, call)
        frame = pallas_common.plan_frame(call, top_left=True, head_dim_pad=_head_dim_pad)
        kernel_call = _KernelCall(
            causal=frame.restricted is not None,
            scale=call.scale,
            block_q=frame.block_q,
            block_k=frame.block_k,
            lse=call.return_lse,
            interpret=frame.interpret,
        )
        bias = None if call.attn_mask is None else _bias(call.attn_mask, frame)
        with pallas_common.tpu_interpret_mode(frame.interpret):
            return pallas_common.execute(q, k, v, call, frame, kernel_call, bias)


def _bias(attn_mask: Any, frame: Any) -> Any:
    """attn_mask (broadcastable to `[B, Hq, Sq, Sk]`) as the kernel's additive bias
    `[B, Hq, Lq, Lk]` float32 in frame coordinates (0 where allowed and on padding)."""
    import jax.numpy as jnp

    am = attn_mask.reshape((1,) * (4 - attn_mask.ndim) + tuple(attn_mask.shape))
    am = jnp.broadcast_to(am, (frame.batch, frame.heads_q, frame.seqlen_q, frame.seqlen_k))
    bias = jnp.where(am, 0.0, MASK_BIAS).astype(jnp.float32)
    pad_q = (frame.front_q, frame.len_q - frame.front_q - frame.seqlen_q)
    pad_k = (frame.front_k, frame.len_k - frame.front_k - frame.seqlen_k)
    return jnp.pad(bias, ((0, 0), (0, 0), pad_q, pad_k))


BACKEND = PallasFlash()
