"""`jax-cudnn`: `jax.nn.dot_product_attention(implementation="cudnn")`, cuDNN's fused flash
attention on NVIDIA GPUs.

Rules of the cuDNN path in jax 0.10 (`jax/_src/nn/functions.py` and
`jax/_src/cudnn/fused_attention_stablehlo.py`), declined up front rather than raised later:
- float16 or bfloat16 only; compute capability >= 8.0 (XLA's cuDNN flash attention);
- head dim a multiple of 8, at most 128, or 256 on compute capability >= 9.0 (Hopper on);
- compute capability 10.3 needs cuDNN >= 9.11;
- no logit soft-capping;
- the lse it returns is cast to the input dtype, short of the contract's float32: declined;
- no packed layout: the public API passes cuDNN no segment offsets.
Masks: `is_causal` and the sliding window are top-left aligned and the window is left-only,
so they are used natively only where they equal the contract (Sq == Sk, bounds `(left, 0)`);
other bounds, key padding and `attn_mask` go in as one boolean mask, which jax turns into a
dense `[B, H, Sq, Sk]` additive bias with a finite large negative value: rows without any
allowed key then come back as mean(V) and are zeroed here.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call


@functools.cache
def cudnn_version() -> int | None:
    """The cuDNN version jax was built against and found (e.g. 91100), or None."""
    try:
        from jax._src.lib import cuda_versions
    except ImportError:
        return None
    if cuda_versions is None:
        return None
    try:
        return int(cuda_versions.cudnn_get_version())
    except Exception:  # no loadable cuDNN library
        return None


def native_bounds(call: Call) -> tuple[bool, tuple[int, int] | None] | None:
    """(is_causal, local_window_size) for `jax.nn.dot_product_attention` when the call's
    bounds equal cuDNN's top-left, left-only masking; None when they need an explicit mask."""
    bounds = call.bounds
    if bounds is None or bounds == (-1, -1):
        return False, None
    if call.seqlen_q != call.seqlen_k or bounds[1] != 0:
        return None
    left = bounds[0]
    return True, (None if left < 0 else (left, 0))


class JaxCudnn(BackendBase):
    name = "jax-cudnn"
    framework = "jax"
    caps = Capabilities(device_kinds=("cuda",), dtypes=("float16", "bfloat16"), softcap=False)
    libraries = ("jax", "jaxlib")

    def _probe(self) -> str | None:
        if (why := import_reason("jax", "jax")) is not None:
            return why
        import jax

        try:
            jax.devices("cuda")
        except RuntimeError:
            return f"no CUDA GPU visible to jax (backends: {jax.default_backend()})"
        if cudnn_version() is None:
            return "cuDNN is not detected by jax"
        return None

    def extra_declines(self, call: Call) -> list[str]:
        reasons = []
        cap = call.device.capability
        if call.device.kind == "cuda":
            if cap is None:
                reasons.append("compute capability unknown")
            elif cap < (8, 0):
                reasons.append(
                    f"compute capability {cap[0]}.{cap[1]} < 8.0 (cuDNN flash attention)"
                )
            else:
                head_max = 256 if cap >= (9, 0) else 128
                if call.head_dim > head_max or call.head_dim % 8:
                    reasons.append(
                        f"head dim {call.head_dim}: expected a multiple of 8 up to {head_max} "
                        f"on compute capability {cap[0]}.{cap[1]}"
                    )
                if cap == (10, 3) and (cudnn_version() or 0) < 91100:
                    reasons.append("compute capability 10.3 needs cuDNN >= 9.11")
        if call.packed:
            reasons.append(
                "packed layout: jax.nn.dot_product_attention passes cuDNN no segment offsets"
            )
        if call.return_lse:
            reasons.append(f"return_lse: jax returns cuDNN's lse cast to {call.dtype}, not float32")
        return reasons

    def detail(self, call: Call) -> str | None:
        native = native_bounds(call)
        masked = call.has_mask or native is None
        how = "causal/window native" if native and native[0] else "no position mask"
        if native is None:
            how = "bottom-right bounds as an explicit mask"
        return how + (" + dense [B, H, Sq, Sk] bias" if masked else "")

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from attnswitch.kernels import jax_common

        if 0 in q.shape[:-2] or 0 in k.shape[:-2]:
            return jax_common.empty_result(q, call)
        return jax_common.run_jitted(attend, q, k, v, call)


def attend(q: Any, k: Any, v: Any, call: Call) -> Any:
    """A dense call through the cuDNN path (traceable; see the module docstring)."""
    import jax
    import jax.numpy as jnp

    from attnswitch.kernels import jax_common

    native = native_bounds(call)
    is_causal, window = native if native is not None else (False, None)
    explicit = call if native is None else dataclasses.replace(call, causal=False, window=None)
    kernel_mask = jax_common.dense_mask(explicit)
    if kernel_mask is not None:  # jax's cuDNN bias check wants the full [*, *, Sq, Sk]
        kernel_mask = jnp.broadcast_to(
            kernel_mask, kernel_mask.shape[:2] + (call.seqlen_q, call.seqlen_k)
        )
    out = jax.nn.dot_product_attention(
        q,
        k,
        v,
        mask=kernel_mask,
        scale=call.scale,
        is_causal=is_causal,
        local_window_size=window,
        implementation="cudnn",
    )
    if kernel_mask is not None:
        out, _ = jax_common.zero_empty_rows(out, None, jax_common.dense_mask(call))
    return out


BACKEND = JaxCudnn()
