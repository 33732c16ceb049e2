"""Conformance of the JAX backends under JAX transformations: each one eagerly, under
`jax.jit` (q, k, v, masks and cu_seqlens traced) and under `jax.vmap`, on the small
transform grid (`transformed.TRANSFORM_GRID`; Pallas in interpret mode off a TPU). Every
call is served within the rule or declined with the reason listed here; anything else
(a crash, a wrong answer, a decline nobody expects) fails."""

from __future__ import annotations

from typing import Any

import pytest

jax = pytest.importorskip("jax")

from attnswitch.kernels import conformance, pallas_common, registry, transformed  # noqa: E402

JAX_BACKENDS = [n for n in registry.names() if registry.get(n).framework == "jax"]

# (backend, case name) -> {transform: the reason it must give} for what is declined; a
# transform missing from the inner dict must be served.
SOFTCAP = "softcap not supported"
DECLINED: dict[tuple[str, str], dict[str, str]] = {
    ("jax-xla", "t-window-softcap"): dict.fromkeys(transformed.TRANSFORMS, SOFTCAP),
    ("pallas-flash", "t-window-softcap"): dict.fromkeys(transformed.TRANSFORMS, SOFTCAP),
    ("pallas-flash", "t-packed-causal"): {
        "jit": "the kernel's one diagonal needs each sequence's lengths on the host"
    },
    ("pallas-splash", "t-packed-causal"): {
        "jit": "the kernel's one diagonal needs each sequence's lengths on the host"
    },
    ("pallas-splash", "t-masked-row"): {
        t: "attn_mask is traced (inside jax.jit or vmap)" for t in ("jit", "vmap")
    },
}


def _params() -> list[Any]:
    return [
        pytest.param(
            name,
            transform,
            case,
            id=f"{name}-{transform}-{case.label}",
            marks=pytest.mark.xdist_group(f"transforms-{name}"),
        )
        for name in JAX_BACKENDS
        for transform in transformed.TRANSFORMS
        for case in transformed.transform_cases()
    ]


@pytest.mark.parametrize(("backend", "transform", "case"), _params())
def test_served_or_declined_under_transform(
    backend: str, transform: str, case: conformance.Case
) -> None:
    with pallas_common.interpret(True):
        result = transformed.check_transformed(backend, case, transform)
    if result.status == conformance.UNAVAILABLE:
        pytest.skip(f"{backend} unavailable: {'; '.join(result.reasons)}")
    expected = DECLINED.get((backend, case.name), {}).get(transform)
    if expected is not None:
        assert result.status == conformance.DECLINED, result
        assert any(expected in r for r in result.reasons), result.reasons
        return
    assert result.status == conformance.PASSED, (
        f"{backend} {transform} {case.label}: {result.status}: {'; '.join(result.reasons)}"
    )
    assert result.error <= result.bound


def test_transform_grid_covers_the_features() -> None:
    """The small grid holds every feature of the main grid and the frames that differ under
    tracing."""
    cases = transformed.transform_cases()
    assert any(c.causal and c.seqlen_q < c.seqlen_k and c.heads_q != c.heads_kv for c in cases)
    assert any(c.causal and c.seqlen_q > c.seqlen_k and c.return_lse for c in cases)
    assert any(c.window and c.softcap for c in cases)
    assert any(c.key_padding for c in cases) and any(c.masked_row for c in cases)
    packed = [c for c in cases if c.packed]
    assert any(c.causal for c in packed) and any(not c.causal and c.return_lse for c in packed)
    assert any((0, 0) in c.packed or any(0 in p for p in c.packed) for c in packed)
    assert {c.dtype for c in cases} == {"float32", "bfloat16"}


def test_a_crash_under_a_transform_is_an_error_not_a_pass() -> None:
    """The check can fail: a backend that works eagerly but reads a concrete value from its
    arrays (here float() of the mask) errors under jit, and the error is reported."""
    from attnswitch.kernels.backends.jax_xla import JaxXla

    class ReadsValues(JaxXla):
        name = "reads-values"

        def run(self, q: Any, k: Any, v: Any, call: Any) -> Any:
            if call.key_padding_mask is not None:
                float(call.key_padding_mask.sum())  # a host read: fails on a tracer
            return super().run(q, k, v, call)

    backend = ReadsValues()
    registry.register(backend)
    try:
        case = transformed.TRANSFORM_GRID[3].with_dtype("float32")  # t-padding
        assert case.key_padding
        assert transformed.check_transformed(backend.name, case, "eager").status == "pass"
        jitted = transformed.check_transformed(backend.name, case, "jit")
    finally:
        registry.unregister(backend.name)
    assert jitted.status == conformance.ERROR
    assert "ConcretizationTypeError" in jitted.reasons[0] or "Tracer" in jitted.reasons[0]


def test_vmap_judges_each_example() -> None:
    """A backend right on the first example of a vmapped pair and wrong on the second (it
    answers every example with the first one's result) fails, naming the example."""
    from attnswitch.kernels.backends.jax_xla import JaxXla

    class FirstOnly(JaxXla):
        name = "first-only"

        def run(self, q: Any, k: Any, v: Any, call: Any) -> Any:
            return _first_example(super().run(q, k, v, call))

    backend = FirstOnly()
    registry.register(backend)
    try:
        case = transformed.TRANSFORM_GRID[0].with_dtype("float32")
        result = transformed.check_transformed(backend.name, case, "vmap")
    finally:
        registry.unregister(backend.name)
    assert result.status == conformance.FAILED
    assert result.reasons[0].startswith("vmap example 1: out: error")


def _first_example(x: Any) -> Any:
    """Under vmap, every example gets example 0's `x` (a deliberately wrong batching rule)."""
    from jax.custom_batching import custom_vmap

    @custom_vmap
    def identity(x: Any) -> Any:
        return x

    @identity.def_vmap
    def _rule(axis_size: int, in_batched: Any, x: Any) -> tuple[Any, bool]:
        import jax.numpy as jnp

        return jnp.broadcast_to(x[0], x.shape), True

    return identity(x)
