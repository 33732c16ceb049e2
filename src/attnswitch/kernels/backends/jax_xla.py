"""`jax-xla`: `jax.nn.dot_product_attention(implementation="xla")` on any XLA device.

How the contract maps onto the API (jax 0.10):
- BSHD is the API's BTNH; GQA/MQA is native (query heads a multiple of key/value heads).
- causal and window: the API's `is_causal` and `local_window_size` are top-left aligned, so
  the adapter passes neither and hands the bottom-right bounds, key padding and `attn_mask`
  over as one boolean `mask` built by `masks.dense_mask` (the contract's alignment, once).
- packed: one batch row of Tq queries against Tk keys with a `[Tq, Tk]` mask of same-sequence
  pairs within bounds (`jax_common.packed_mask`); traceable under `jax.jit` (cu_seqlens may be
  tracers), at O(Tq * Tk) memory.
- The API masks with a finite large negative number, so a row with no allowed key comes back
  as mean(V): the adapter zeroes those rows and sets their lse to -inf.
- lse: `return_residual=True` returns the logsumexp rounded to the input dtype, so only
  float32 meets the contract's float32 lse; float16/bfloat16 with `return_lse` is declined.
- softcap: the API has no logit transform: declined.
- float16 on CPU and TPU: the API requests dot precision F16_F16_F32, which XLA rejects there
  under `jax.jit` (eagerly jax falls back; compiled it fails): declined.
The XLA path materialises the scores `[B, Hq, Sq, Sk]`: memory grows with Sq * Sk.
"""

from __future__ import annotations

from typing import Any

from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call


class JaxXla(BackendBase):
    name = "jax-xla"
    framework = "jax"
    caps = Capabilities(device_kinds=("cpu", "cuda", "rocm", "tpu"), softcap=False)
    libraries = ("jax", "jaxlib")
    implementation = "xla"

    def _probe(self) -> str | None:
        return import_reason("jax", "jax")

    def extra_declines(self, call: Call) -> list[str]:
        reasons = []
        if call.return_lse and call.dtype != "float32":
            reasons.append(
                f"return_lse in {call.dtype}: jax.nn.dot_product_attention returns lse rounded "
                f"to {call.dtype}, the contract asks float32"
            )
        if call.dtype == "float16" and call.device.kind in ("cpu", "tpu"):
            reasons.append(
                f"float16 on {call.device.kind}: the API asks dot precision F16_F16_F32, which "
                "XLA rejects there when compiled"
            )
        return reasons

    def detail(self, call: Call) -> str | None:
        if call.packed:
            tq, tk = (
                (call.seqlen_q, call.seqlen_k)
                if call.seqlens_q is None
                else (sum(call.seqlens_q), sum(call.seqlens_k))
            )
            return f"packed as one row with a [Tq, Tk] = [{tq}, {tk}] segment mask"
        scores = call.batch * call.heads_q * call.seqlen_q * call.seqlen_k * 4
        return f"materialises [B, Hq, Sq, Sk] float32 scores ({scores / 2**30:.3g} GiB)"

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from attnswitch.kernels import jax_common

        if 0 in q.shape[:-2] or 0 in k.shape[:-2]:
            return jax_common.empty_result(q, call)
        return jax_common.run_jitted(attend, q, k, v, call, self.implementation)


def attend(q: Any, k: Any, v: Any, call: Call, implementation: str) -> Any:
    """The contract through `jax.nn.dot_product_attention` (traceable; see the module doc)."""
    import jax
    import jax.numpy as jnp

    from attnswitch.kernels import jax_common

    if call.packed:
        mask = jax_common.packed_mask(
            call, call.cu_seqlens_q, call.cu_seqlens_k, q.shape[0], k.shape[0]
        )[None, None]
        q, k, v = q[None], k[None], v[None]
    else:
        mask = jax_common.dense_mask(call)
    result = jax.nn.dot_product_attention(
        q,
        k,
        v,
        mask=mask,
        scale=call.scale,
        implementation=implementation,
        return_residual=call.return_lse,
    )
    out, lse = result if call.return_lse else (result, None)
    if lse is not None:
        lse = jnp.transpose(lse, (0, 2, 1)).astype(jnp.float32)  # [B, Sq, Hq] -> [B, Hq, Sq]
    if mask is not None:
        out, lse = jax_common.zero_empty_rows(out, lse, mask)
    if call.packed:
        out, lse = out[0], None if lse is None else lse[0]
    return (out, lse) if call.return_lse else out


BACKEND = JaxXla()
