"""Under jax.jit the attention call traces once per shape signature: packed batches whose
lengths differ but whose shapes (N, totals) match reuse the trace, within jit and in the jax
backends' own compiled programs."""

from __future__ import annotations

import numpy as np
import pytest

import attnswitch as asw
from attnswitch.kernels import conformance

jax = pytest.importorskip("jax")
jnp = jax.numpy

BACKENDS = ("jax-blockwise", "jax-xla")
# N = 3 sequences in 48 packed rows, four make-ups (one with an empty sequence)
MAKE_UPS = [(10, 20, 18), (30, 1, 17), (16, 16, 16), (0, 40, 8)]


def _inputs(lengths, total=48):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((total, 4, 16)).astype(np.float32)
    k = rng.standard_normal((total, 2, 16)).astype(np.float32)
    v = rng.standard_normal((total, 2, 16)).astype(np.float32)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return dict(q=q, k=k, v=v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True)


def _check_rule(out, inputs):
    err, bound = conformance.judge(out, inputs)
    assert err <= bound, f"error {err:.3g} > bound {bound:.3g}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_jit_traces_once_per_shape_signature(backend):
    traces = []

    @jax.jit
    def step(q, k, v, cu):
        traces.append(q.shape)
        return asw.attention(
            q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True, backend=backend
        )

    for lengths in MAKE_UPS:
        inputs = _inputs(lengths)
        out = step(*(jnp.asarray(inputs[n]) for n in ("q", "k", "v", "cu_seqlens_q")))
        _check_rule(out, inputs)
    assert len(traces) == 1  # a new make-up of lengths never retraces
    inputs = _inputs((10, 20, 34), total=64)  # a new shape signature traces once more
    step(*(jnp.asarray(inputs[n]) for n in ("q", "k", "v", "cu_seqlens_q")))
    assert len(traces) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_eager_packed_calls_share_one_compiled_program(backend, monkeypatch):
    """Outside jit, with concrete cu_seqlens, the backend's own jitted program is keyed on
    the shapes, not the lengths: one program, traced once, for every make-up."""
    from attnswitch.kernels import jax_common

    programs = []
    real = jax_common._compiled

    def spy(*key):
        programs.append(real(*key))
        return programs[-1]

    monkeypatch.setattr(jax_common, "_compiled", spy)
    for lengths in MAKE_UPS:
        inputs = _inputs(lengths)
        args = {n: jnp.asarray(x) if isinstance(x, np.ndarray) else x for n, x in inputs.items()}
        out = asw.attention(args.pop("q"), args.pop("k"), args.pop("v"), **args, backend=backend)
        _check_rule(out, inputs)
    assert len(programs) == len(MAKE_UPS)
    assert len({id(p) for p in programs}) == 1
    assert programs[0]._cache_size() == 1
