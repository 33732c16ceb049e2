"""Running one backend on a validated call: the step below planning, shared by the planner,
conformance checks (which run a backend by name, with no plan and no fallback) and timings
(`timed_run`: `attnswitch doctor`, benchmarks/attention_ops.py)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from attnswitch.kernels import arrays, registry
from attnswitch.kernels.contract import Call
from attnswitch.observe.scopes import scope


def _adapt(call: Call, framework: str, q: Any, k: Any, v: Any) -> tuple[Call, Any, Any, Any]:
    """numpy input planned onto a torch or jax backend: convert arrays to that framework."""
    conv = lambda x: None if x is None else arrays.numpy_to(x, framework)  # noqa: E731
    adapted = replace(
        call,
        framework=framework,
        key_padding_mask=conv(call.key_padding_mask),
        attn_mask=conv(call.attn_mask),
        cu_seqlens_q=conv(call.cu_seqlens_q),
        cu_seqlens_k=conv(call.cu_seqlens_k),
    )
    return adapted, conv(q), conv(k), conv(v)


def _back_to_numpy(result: Any, return_lse: bool) -> Any:
    if return_lse:
        out, lse = result
        return arrays.to_numpy(out), arrays.to_numpy(lse)
    return arrays.to_numpy(result)


def run_backend(name: str, q: Any, k: Any, v: Any, call: Call) -> Any:
    """Run one backend on a validated call inside its profiler scope, converting numpy input
    to the backend's framework and back. No planning, no fallback, no counting."""
    b = registry.get(name)
    convert = call.framework == "numpy" and b.framework != "numpy"
    if convert and not getattr(getattr(b, "caps", None), "accepts_all_frameworks", False):
        call_b, q, k, v = _adapt(call, b.framework, q, k, v)
    else:
        call_b, convert = call, False
    with scope(name, b.framework, call.device.kind):
        result = b.run(q, k, v, call_b)
    return _back_to_numpy(result, call.return_lse) if convert else result


def wait_for(result: Any) -> None:
    """Block until an asynchronous device (CUDA, any jax device) has computed `result` (an
    array, or `(out, lse)`), so that wall time covers the kernel."""
    x = result[0] if isinstance(result, tuple) else result
    framework = arrays.framework_of(x)
    if framework == "jax":
        x.block_until_ready()
    elif framework == "torch" and x.device.type == "cuda":
        import torch

        torch.cuda.synchronize(x.device)


def timed_run(name: str, q: Any, k: Any, v: Any, call: Call) -> float:
    """Seconds one `run_backend` call takes, the device waited for (`wait_for`)."""
    start = time.perf_counter()
    wait_for(run_backend(name, q, k, v, call))
    return time.perf_counter() - start
