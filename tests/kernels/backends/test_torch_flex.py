"""torch-flex: what it declines and why, conformance on the features it serves, and kernel
reuse (a repeated shape never recompiles; past the kernel limit it recompiles, never falls
back to flex's unfused eager path).

Compiling a flex kernel takes seconds on CPU, so the tests reuse the shapes of the
conformance cases (B2 Sq113 Sk203 H4 D64), whose kernels one compile serves."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

import attnswitch as asw
from attnswitch.kernels import conformance
from attnswitch.kernels.arrays import DeviceInfo
from attnswitch.kernels.backends import torch_flex
from attnswitch.kernels.backends.torch_flex import BACKEND
from attnswitch.kernels.contract import validate

pytestmark = [
    pytest.mark.xdist_group("conformance-torch-flex"),  # share compiled kernels in one worker
    pytest.mark.backend("torch-flex"),  # deselected where unavailable (tests/conftest.py)
]

QUICK = {c.label: c for c in conformance.cases(quick=True)}
PLAIN = QUICK["plain-113x203/float32"]


def call_for(sq=8, sk=8, d=16, dtype=torch.float32, **kw):
    q = torch.randn(2, sq, 4, d, dtype=dtype)
    k = torch.randn(2, sk, 2, d, dtype=dtype)
    return validate(q, k, k, **kw)


def on(call, kind, name):
    return dataclasses.replace(call, device=DeviceInfo(kind, name, 0, (9, 0)))


def graphs() -> int:
    return counters["stats"]["unique_graphs"]


# ---- declines ---------------------------------------------------------------------------


def test_declines_grad_on_cpu():
    q = torch.randn(1, 8, 2, 16, requires_grad=True)
    assert BACKEND.declines(validate(q, q, q)) == [
        "gradients: FlexAttention has no backward on CPU"
    ]


def test_grad_on_cpu_is_truly_unsupported_by_flex():
    """The fact behind the decline: should torch learn CPU backward, this fails and the
    decline should go."""
    from torch.nn.attention.flex_attention import flex_attention

    q = torch.randn(1, 2, 8, 16, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex_attention(q, q, q)


def test_declines_lse_on_cpu_but_not_on_cuda():
    reason = "return_lse: the compiled CPU flex kernel cannot return lse in this torch"
    call = call_for(return_lse=True)
    assert reason in BACKEND.declines(call)
    assert reason not in BACKEND.declines(on(call, "cuda", "NVIDIA H100"))


def test_lse_on_cpu_is_truly_unsupported_by_the_compiled_kernel():
    from torch._inductor.exc import InductorError
    from torch.nn.attention.flex_attention import AuxRequest, flex_attention

    compiled = torch.compile(flex_attention, dynamic=False, fullgraph=True)
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(InductorError, match="`return_lse` is not supported"):
        compiled(q, q, q, return_aux=AuxRequest(lse=True))


def test_declines_float64_and_lists_every_reason():
    q = torch.randn(1, 8, 2, 16, dtype=torch.float64, requires_grad=True)
    reasons = BACKEND.declines(validate(q, q, q, return_lse=True))
    assert len(reasons) == 3
    assert any("float64" in r for r in reasons)


@pytest.mark.parametrize("d, declined", [(8, True), (15, True), (16, False), (59, False)])
def test_gpu_head_dim_minimum(d, declined):
    reasons = BACKEND.declines(on(call_for(d=d), "cuda", "NVIDIA H100"))
    assert any("< 16" in r for r in reasons) == declined


def test_cpu_serves_small_and_awkward_head_dims_and_every_mask_feature():
    for d in (8, 59, 80, 256):
        assert BACKEND.declines(call_for(d=d)) == []
    kp = torch.ones(2, 8, dtype=torch.bool)
    assert (
        BACKEND.declines(call_for(causal=True, window=(3, 1), softcap=5.0, key_padding_mask=kp))
        == []
    )


def test_declines_without_a_cpp_compiler(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-cxx-compiler")
    torch_flex._cpu_kernel_missing.cache_clear()
    try:
        assert "torch.compile on CPU needs a C++ compiler (no-such-cxx-compiler not found)" in (
            BACKEND.declines(call_for())
        )
    finally:
        torch_flex._cpu_kernel_missing.cache_clear()


@pytest.mark.parametrize(
    "torch_dir, linkable",
    [
        ("/srv/venv/lib/python3.11/site-packages/torch", True),
        ("/root/ci/attn clone/.venv/lib/python3.11/site-packages/torch", False),
        ("/opt/tab\tname/torch", False),
    ],
)
def test_a_torch_under_a_path_with_whitespace_is_named_as_unlinkable(torch_dir, linkable):
    reason = torch_flex.unlinkable_torch_path(torch_dir)
    assert (reason is None) == linkable
    if not linkable:
        assert repr(torch_dir) in reason and "whitespace" in reason


def test_detail_says_how_the_block_mask_is_kept():
    assert "block mask cached" in BACKEND.detail(call_for(causal=True))
    kp = torch.ones(2, 8, dtype=torch.bool)
    assert "built per call" in BACKEND.detail(call_for(key_padding_mask=kp))
    assert "no block mask" in BACKEND.detail(call_for())


# ---- numbers ----------------------------------------------------------------------------

CASES = [
    *(QUICK[f"{n}/float32"] for n in conformance.QUICK),
    conformance.Case("softcap-30", softcap=30.0, magnitude=3.0),
    # same total length as "packed" with other sequence lengths: a cached block mask must not
    # serve it, though the compiled kernel does
    conformance.Case("packed-reordered", packed=((1, 1), (91, 91), (0, 0), (37, 37)), causal=True),
    conformance.Case("packed-no-keys", packed=((5, 0), (3, 0))),
    conformance.Case("empty-queries", seqlen_q=0),
    conformance.Case(
        "hdim-8", head_dim=8, batch=1, seqlen_q=67, seqlen_k=131, heads_q=2, heads_kv=2
    ),
]


@pytest.mark.slow  # each new case compiles a kernel: seconds on CPU
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_conformance(case):
    result = conformance.check("torch-flex", case)
    if case.return_lse:
        assert result.status == conformance.DECLINED
        assert any(r.startswith("return_lse") for r in result.reasons)
        return
    assert result.status == conformance.PASSED, result.reasons
    assert result.error <= result.bound


@pytest.mark.slow
def test_second_call_of_a_shape_does_not_recompile():
    rng = np.random.default_rng(0)
    args = {
        n: torch.from_numpy(x)
        for n, x in conformance.make_inputs(PLAIN).items()
        if isinstance(x, np.ndarray)
    }
    q, k, v = args["q"], args["k"], args["v"]
    for causal in (False, True):
        asw.attention(q, k, v, causal=causal, backend="torch-flex")
        before = graphs()
        asw.attention(q + 1, k, v, causal=causal, backend="torch-flex")
        assert graphs() == before
    # masks read from the caller's tensors: new values, same kernel, results follow the values
    kp = torch.from_numpy(rng.random((2, 203)) < 0.5)
    first = asw.attention(q, k, v, key_padding_mask=kp, backend="torch-flex")
    before = graphs()
    second = asw.attention(q, k, v, key_padding_mask=~kp, backend="torch-flex")
    assert graphs() == before
    ref = asw.attention(
        q.double(), k.double(), v.double(), key_padding_mask=~kp, backend="reference"
    )
    assert not torch.allclose(first, second)
    assert (second.double() - ref).abs().max() < 1e-5


@pytest.mark.slow
def test_past_the_kernel_limit_it_recompiles_instead_of_falling_back(monkeypatch):
    """With the limit at one kernel, a second shape hits dynamo's recompile limit: the
    backend forgets its kernels and compiles again (with fullgraph, dynamo would otherwise
    raise; without it, run flex unfused)."""
    monkeypatch.setattr(torch_flex, "MAX_KERNELS", 1)
    inputs = {
        n: torch.from_numpy(x)
        for n, x in conformance.make_inputs(PLAIN).items()
        if isinstance(x, np.ndarray)
    }
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    expected = asw.attention(q, k, v, backend="torch-flex")
    # a window no other test uses: a kernel no earlier call left in the cache
    asw.attention(q, k, v, window=(7, 3), backend="torch-flex")
    before = graphs()
    again = asw.attention(q, k, v, backend="torch-flex")
    assert graphs() == before + 1  # compiled afresh, not served by an eager fallback
    assert torch.equal(again, expected)


def test_numpy_input_runs_on_torch_flex():
    inputs = conformance.make_inputs(PLAIN)
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    plan = asw.explain(q, k, v, backend="torch-flex")
    assert plan.chosen == "torch-flex"
    out = asw.attention(q, k, v, backend="torch-flex")
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == q.shape
    same = asw.attention(*(torch.from_numpy(x) for x in (q, k, v)), backend="torch-flex")
    np.testing.assert_array_equal(out, same.numpy())


def test_inputs_requiring_grad_run_under_no_grad():
    inputs = conformance.make_inputs(PLAIN)
    q, k, v = (torch.from_numpy(inputs[n]).requires_grad_() for n in ("q", "k", "v"))
    with torch.no_grad():
        out = asw.attention(q, k, v, backend="torch-flex")
    expected = asw.attention(q.detach(), k.detach(), v.detach(), backend="torch-flex")
    assert torch.equal(out, expected)


def test_output_is_bshd_contiguous_like_q():
    inputs = conformance.make_inputs(PLAIN)
    q, k, v = (torch.from_numpy(inputs[n]) for n in ("q", "k", "v"))
    out = asw.attention(q, k, v, backend="torch-flex")
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()


@pytest.mark.parametrize(
    "total, bucket",
    [
        (0, 128),
        (1, 128),
        (128, 128),
        (129, 256),
        (1000, 1024),
        (1024, 1024),
        (1025, 1280),
        (4097, 4992),
        (8192, 8192),
    ],
)
def test_packed_bucket(total, bucket):
    assert torch_flex.packed_bucket(total) == bucket


def test_packed_buckets_are_few_and_waste_little():
    buckets = {torch_flex.packed_bucket(t) for t in range(1, 16385)}
    assert len(buckets) <= 24
    assert all(b % torch_flex.BLOCK == 0 for b in buckets)
    assert all(torch_flex.packed_bucket(t) < 1.2 * t + torch_flex.BLOCK for t in range(1, 16385))


@pytest.mark.slow
def test_packed_totals_in_one_bucket_share_a_kernel():
    """Batches of a pipeline each have another packed total: in one bucket they must reuse
    one compiled kernel, and the padding must not change any answer."""
    rng = np.random.default_rng(1)
    lens_seen = ((40, 60, 41), (100, 20, 25), (7, 130, 3, 1))  # totals 141, 145, 141 -> 256
    before = None
    for lens in lens_seen:
        cu = torch.tensor(np.concatenate([[0], np.cumsum(lens)]), dtype=torch.int32)
        q, k, v = (
            torch.from_numpy(rng.standard_normal((int(cu[-1]), 4, 16), np.float32))
            for _ in range(3)
        )
        out = asw.attention(
            q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True, backend="torch-flex"
        )
        if before is not None:
            assert graphs() == before
        before = graphs()
        ref = asw.attention(
            q.double(),
            k.double(),
            v.double(),
            cu_seqlens_q=cu,
            cu_seqlens_k=cu,
            causal=True,
            backend="reference",
        )
        assert out.shape == q.shape
        assert (out.double() - ref).abs().max() < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("softcap", [None, 20.0])
def test_decode_steps_of_a_growing_cache_share_a_kernel(softcap):
    """A decode step (one query, no block mask) compiles one kernel for every key length:
    without it a generation loop compiled on every step."""
    rng = np.random.default_rng(2)
    q = torch.from_numpy(rng.standard_normal((2, 1, 8, 32), np.float32))
    before = None
    for sk in range(150, 154):
        k, v = (torch.from_numpy(rng.standard_normal((2, sk, 2, 32), np.float32)) for _ in range(2))
        out = asw.attention(q, k, v, causal=True, softcap=softcap, backend="torch-flex")
        if before is not None:
            assert graphs() == before, f"recompiled for {sk} keys"
        before = graphs()
        ref = asw.attention(
            q.double(), k.double(), v.double(), causal=True, softcap=softcap, backend="reference"
        )
        assert (out.double() - ref).abs().max() < 1e-5
