"""Planning never needs concrete values: every conformance grid case is planned with all its
inputs traced (under jax.jit, and under jax.vmap with cu_seqlens batched too), on this host
and described as a TPU call, with the Pallas backends available (interpret mode) and not.
Every backend's `declines` and `detail` answer such calls, and `explain()` never raises for
a valid call, traced or not, whatever the framework of its arrays."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import attnswitch as asw  # noqa: E402
from attnswitch.kernels import conformance, pallas_common, registry  # noqa: E402
from attnswitch.kernels.arrays import DeviceInfo  # noqa: E402
from attnswitch.kernels.contract import Call, validate  # noqa: E402
from attnswitch.kernels.plan import plan_for  # noqa: E402

CASES = conformance.cases()
TPU = DeviceInfo("tpu", "TPU v5 lite", 0)


def _split(case: conformance.Case) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The case's arrays (q, k, v, masks, cu_seqlens) and its other arguments."""
    inputs = conformance.make_inputs(case)
    arrays = {n: x for n, x in inputs.items() if isinstance(x, np.ndarray)}
    return arrays, {n: x for n, x in inputs.items() if n not in arrays}


def _traced_calls(case: conformance.Case, transform: str) -> list[Call]:
    """The `Call`s that `attention` sees for `case` with every array traced."""
    arrays, options = _split(case)
    calls: list[Call] = []

    def describe(args: dict[str, Any]) -> Any:
        args = dict(args)
        q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
        calls.append(validate(q, k, v, **args, **options))
        return q

    jax_arrays = {n: jnp.asarray(x) for n, x in arrays.items()}
    if transform == "jit":
        jax.make_jaxpr(describe)(jax_arrays)
    else:  # vmap over two copies: every array batched, cu_seqlens included
        jax.make_jaxpr(jax.vmap(describe))({n: jnp.stack([x, x]) for n, x in jax_arrays.items()})
    assert len(calls) == 1 and calls[0].traced
    return calls


def _assert_plan_complete(plan: Any, requested: str | None) -> None:
    names = set(registry.names())
    assert set(plan.candidates) | {r.backend for r in plan.rejected} == names
    for r in plan.rejected:
        assert r.reasons and all(isinstance(x, str) and x for x in r.reasons), r
    if requested is not None:
        assert set(plan.candidates) <= {requested}
    assert isinstance(str(plan), str)  # printing a plan asks nothing more of the backends


@pytest.mark.parametrize("interpret", [True, False], ids=["pallas-interpreted", "pallas-off"])
@pytest.mark.parametrize("transform", ["jit", "vmap"])
def test_every_grid_case_plans_with_all_inputs_traced(transform: str, interpret: bool) -> None:
    """Each case, traced, is planned without a backend and with each backend requested, on
    this host and as a TPU call; every backend answers `declines` (and those that serve or
    run on jax answer `detail`) without raising."""
    with pallas_common.interpret(interpret):
        for case in CASES:
            (call,) = _traced_calls(case, transform)
            for described in (call, dataclasses.replace(call, device=TPU)):
                for requested in (None, *registry.names()):
                    _assert_plan_complete(plan_for(described, requested), requested)
                for b in registry.backends():
                    if b.unavailable() is not None:
                        continue
                    reasons = b.declines(described)
                    assert all(isinstance(r, str) and r for r in reasons), (b.name, reasons)
                    if b.framework == "jax" or not reasons:
                        detail = b.detail(described)
                        assert detail is None or isinstance(detail, str), (b.name, detail)


def test_traced_calls_keep_jax_backends_served() -> None:
    """The check above can fail where it matters: traced, the jax backends still serve the
    grid's packed cases (a backend that declined every traced call would pass it)."""
    with pallas_common.interpret(True):
        for case in CASES:
            if case.packed is None or case.dtype != "float32":
                continue
            (call,) = _traced_calls(case, "jit")
            assert call.seqlens_q is None  # traced cu_seqlens: lengths unknown on the host
            plan = plan_for(call, None)
            assert "jax-blockwise" in plan.candidates, plan
            if not case.causal and case.window is None:
                assert {"pallas-flash", "pallas-splash"} <= set(plan.candidates), plan


def _framework_arrays(x: np.ndarray, framework: str) -> Any:
    if framework == "numpy":
        return x
    if framework == "jax":
        return jnp.asarray(x)
    torch = pytest.importorskip("torch")
    from attnswitch.kernels import arrays

    return arrays.numpy_to(x, "torch") if x.dtype != bool else torch.from_numpy(x)


TRANSFORMS: dict[str, Callable[[Callable[..., Any], dict[str, Any]], Any]] = {
    "eager": lambda f, a: f(a),
    "jit": lambda f, a: jax.make_jaxpr(f)(a),
    "vmap": lambda f, a: jax.make_jaxpr(jax.vmap(f))({n: jnp.stack([x, x]) for n, x in a.items()}),
}


@pytest.mark.parametrize("how", ["numpy", "torch", "jax", "jax-jit", "jax-vmap"])
def test_explain_never_raises_for_a_valid_call(how: str) -> None:
    """explain() on every grid case, with and without each backend requested: a plan comes
    back (its candidates, or every backend's reasons), never an exception."""
    framework, _, transform = how.partition("-")
    transform = transform or "eager"
    with pallas_common.interpret(True):
        for case in CASES:
            arrays, options = _split(case)
            plans: list[Any] = []

            def explain(args: dict[str, Any]) -> Any:
                args = dict(args)
                q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
                for requested in (None, *registry.names()):
                    plans.append(asw.explain(q, k, v, backend=requested, **args, **options))
                return q

            converted = {n: _framework_arrays(x, framework) for n, x in arrays.items()}
            TRANSFORMS[transform](explain, converted)
            assert len(plans) == 1 + len(registry.names())
            for requested, plan in zip((None, *registry.names()), plans):
                _assert_plan_complete(plan, requested)
            assert plans[0].candidates, f"{case.label} ({how}): nothing serves it\n{plans[0]}"
