"""Conformance of JAX backends under JAX transformations: `check` inside jit and vmap.

A backend that passes a case eagerly can still break when traced: planning on tracers,
masks and cu_seqlens as traced arguments, a batch axis added by vmap. `check_transformed`
runs a case through the planner and the backend inside each transformation and judges the
result by the conformance rule (`kernels/conformance.py`). It sits above the planner,
which it exercises.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from attnswitch.kernels import registry
from attnswitch.kernels.conformance import (
    DECLINED,
    ERROR,
    PASSED,
    UNAVAILABLE,
    Case,
    CaseResult,
    check,
    expected_outputs,
    judge_case,
    kernel_tanh_baseline,
    make_inputs,
    tanh_of,
    to_device,
)
from attnswitch.kernels.contract import Call, validate
from attnswitch.kernels.execute import run_backend
from attnswitch.kernels.plan import plan_for

# ---- JAX transformations ---------------------------------------------------------------

# How a JAX backend is called: as is, inside `jax.jit` (every array a traced argument:
# q, k, v, masks and cu_seqlens) or inside `jax.vmap` over two examples of the case (q, k, v
# and masks batched; cu_seqlens shared, so concrete).
TRANSFORMS = ("eager", "jit", "vmap")

# Small cases for the transformed variants (Pallas interpret mode compiles each anew): every
# feature the grid has, and the frames that differ under tracing (packed with and without
# bounds, key padding, a traced attn_mask with a fully masked row).
TRANSFORM_GRID: tuple[Case, ...] = (
    Case(
        "t-causal-gqa-37x70",
        seqlen_q=37,
        seqlen_k=70,
        heads_q=4,
        heads_kv=2,
        head_dim=32,
        causal=True,
    ),
    Case(
        "t-causal-70x37-lse",
        seqlen_q=70,
        seqlen_k=37,
        heads_q=2,
        heads_kv=2,
        head_dim=32,
        causal=True,
        return_lse=True,
    ),
    Case(
        "t-window-softcap",
        seqlen_q=45,
        seqlen_k=80,
        heads_q=2,
        heads_kv=2,
        head_dim=32,
        window=(16, 4),
        softcap=30.0,
        magnitude=3.0,
    ),
    Case(
        "t-padding", seqlen_q=40, seqlen_k=70, heads_q=2, heads_kv=1, head_dim=32, key_padding=True
    ),
    Case(
        "t-masked-row",
        seqlen_q=40,
        seqlen_k=70,
        heads_q=2,
        heads_kv=2,
        head_dim=32,
        masked_row=True,
    ),
    Case(
        "t-packed-causal",
        packed=((17, 17), (0, 0), (30, 30)),
        heads_q=2,
        heads_kv=2,
        head_dim=32,
        causal=True,
    ),
    Case(
        "t-packed-unequal-lse",
        packed=((13, 40), (20, 8), (0, 7), (9, 0)),
        heads_q=2,
        heads_kv=2,
        head_dim=32,
        return_lse=True,
    ),
)
TRANSFORM_DTYPES = ("float32",)


def transform_cases() -> list[Case]:
    """TRANSFORM_GRID in each of TRANSFORM_DTYPES, and its first case in bfloat16."""
    out = [c.with_dtype(d) for d in TRANSFORM_DTYPES for c in TRANSFORM_GRID]
    return out + [TRANSFORM_GRID[0].with_dtype("bfloat16")]


def check_transformed(
    backend: str, case: Case, transform: str, *, device: str = "cpu", force: bool = False
) -> CaseResult:
    """`check` for a JAX backend under a JAX transformation (TRANSFORMS): inside it the call
    is validated and planned with `backend=` (planning must not raise on traced arrays),
    then declined with the backend's reasons for the call as it sees it there, or run. An
    exception while tracing or running is an ERROR, as in `check`. Under vmap each of the
    two examples is judged by the rule and the worse one is reported."""
    if transform not in TRANSFORMS:
        raise ValueError(f"transform: expected one of {TRANSFORMS}, got {transform!r}")
    b = registry.get(backend)
    if b is None or b.framework != "jax":
        raise ValueError(f"backend: expected a registered jax backend, got {backend!r}")
    if transform == "eager":
        return check(backend, case, device=device, force=force)
    if not force and (why := b.unavailable()) is not None:
        return CaseResult(case, backend, UNAVAILABLE, reasons=(why,))
    import jax

    examples = [make_inputs(case)]
    if transform == "vmap":  # a second example: other values, other key padding
        examples.append(make_inputs(dataclasses.replace(case, name=f"{case.name}~vmap")))
    first = examples[0]
    shared = [n for n in ("cu_seqlens_q", "cu_seqlens_k") if transform == "vmap" and n in first]
    options = {n: x for n, x in first.items() if not isinstance(x, np.ndarray)}
    mapped = {
        n: np.stack([e[n] for e in examples]) if transform == "vmap" else first[n]
        for n, x in first.items()
        if isinstance(x, np.ndarray) and n not in shared
    }
    declined: list[str] = []
    seen: list[Call] = []

    def attend(mapped: dict[str, Any], shared: dict[str, Any]) -> Any:
        args = {**mapped, **shared}
        q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
        call = validate(q, k, v, **args, **options)
        seen.append(call)
        plan_for(call, backend)
        if reasons := b.declines(call):
            declined.extend(reasons)
            return None
        return run_backend(backend, q, k, v, call)

    fn = jax.jit(attend) if transform == "jit" else jax.vmap(attend, in_axes=(0, None))
    jax_args = [
        {n: to_device(x, "jax", device) for n, x in mapped.items()},
        {n: to_device(first[n], "jax", device) for n in shared},
    ]
    try:
        result = fn(*jax_args)
    except Exception as exc:  # a crash is a verdict, as in `check`
        return CaseResult(case, backend, ERROR, reasons=(f"{type(exc).__name__}: {exc}",))
    if declined:
        return CaseResult(case, backend, DECLINED, reasons=tuple(declined))
    judged = []
    kernel_tanh = kernel_tanh_baseline(b, seen[0], device)
    for i, inputs in enumerate(examples):
        one = jax.tree.map(lambda x: x[i], result) if transform == "vmap" else result
        out, lse = one if case.return_lse else (one, None)
        args = dict(inputs)
        q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
        concrete = validate(q, k, v, **args)
        expected = expected_outputs(inputs, concrete, tanh_of(kernel_tanh))
        strict = None if kernel_tanh is None else expected_outputs(inputs, concrete)
        result_i = judge_case(case, b, concrete, out, lse, expected, strict)
        if transform == "vmap" and result_i.reasons:
            result_i = dataclasses.replace(
                result_i, reasons=tuple(f"vmap example {i}: {r}" for r in result_i.reasons)
            )
        judged.append(result_i)
    failed = [r for r in judged if r.status != PASSED]
    return failed[0] if failed else max(judged, key=lambda r: r.error - r.bound)
