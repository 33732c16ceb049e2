"""The attention call under torch.compile (the `attnswitch::attention` custom op) and the
op's promise of no host reads: no graph break, fullgraph compiles, results within the
conformance rule, gradients, errors at trace time, and no sync-causing call inside the op."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

import attnswitch as asw
from attnswitch.kernels import arrays, conformance, torch_op
from attnswitch.kernels.conformance import Case

CASES = {
    "decode-step": Case(
        "decode", batch=3, seqlen_q=1, seqlen_k=77, heads_q=8, heads_kv=2, head_dim=32, causal=True
    ),
    "causal-gqa": Case(
        "causal", seqlen_q=37, seqlen_k=53, heads_q=4, heads_kv=2, head_dim=24, causal=True
    ),
    "key-padding": Case("padding", seqlen_q=29, seqlen_k=140, head_dim=16, key_padding=True),
    "packed": Case(
        "packed",
        heads_q=4,
        heads_kv=2,
        head_dim=16,
        causal=True,
        packed=((5, 9), (0, 3), (12, 12), (7, 0)),
    ),
}


def _torch_inputs(case: Case) -> dict:
    return {
        n: torch.from_numpy(x) if hasattr(x, "dtype") else x
        for n, x in conformance.make_inputs(case).items()
    }


def _maxima(case: Case, inputs: dict) -> dict:
    """FlashAttention's host-side maxima for a packed case (so cu_seqlens need not be read)."""
    if case.packed is None:
        return {}
    return dict(
        max_seqlen_q=max(n for n, _ in case.packed), max_seqlen_k=max(n for _, n in case.packed)
    )


def _call(inputs: dict, **extra):
    args = dict(inputs)
    return asw.attention(args.pop("q"), args.pop("k"), args.pop("v"), **args, **extra)


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_call_has_no_graph_break_and_obeys_the_rule(name):
    case = CASES[name]
    inputs = _torch_inputs(case)
    extra = _maxima(case, inputs)

    def fn(**kw):
        return _call(kw, **extra) * 1.0

    explained = torch._dynamo.explain(fn)(**inputs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    out = compiled(**inputs)
    err, bound = conformance.judge(out, conformance.make_inputs(case))
    assert err <= bound, f"{name}: error {err:.3g} > bound {bound:.3g}"
    assert torch.equal(out, fn(**inputs))  # the op runs the eager plan


GRAD_CASES = {
    "causal-gqa": CASES["causal-gqa"],
    "key-padding": CASES["key-padding"],
    "packed": CASES["packed"],
    "softcap-window-masked-row": Case(
        "softcap",
        batch=2,
        seqlen_q=23,
        seqlen_k=31,
        heads_q=4,
        heads_kv=2,
        head_dim=16,
        softcap=2.0,
        magnitude=3.0,
        window=(5, 2),
        causal=True,
        masked_row=True,
    ),
}


def _op_grads(fn, inputs: dict, dtype: torch.dtype, with_lse: bool, **kw) -> list:
    """d(loss)/d(q, k, v) as float64, where loss = sum(out * ramp) (+ sum(lse * ramp) with
    `with_lse`), the call `fn(q, k, v, **options)` on fresh leaves cast to `dtype`."""
    args = {
        n: x.to(dtype) if n in ("q", "k", "v") else x
        for n, x in inputs.items()
        if n != "return_lse"
    }
    leaves = [args.pop(n).detach().clone().requires_grad_() for n in ("q", "k", "v")]
    result = fn(*leaves, **args, return_lse=with_lse, **kw)
    out, lse = result if with_lse else (result, None)
    loss = (out * torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype)).sum()
    if lse is not None:
        ramp = torch.linspace(-1, 1, lse.shape[-1], dtype=lse.dtype)
        loss = loss + (torch.where(torch.isfinite(lse), lse, 0) * ramp).sum()
    loss.backward()
    return [x.grad.double() for x in leaves]


def _assert_rule(name: str, got: list, naive: list, want: list) -> None:
    """float32 gradients `got` within 2x the error of `naive` against float64 `want`, plus
    the float32 rounding floor of `want` (FA3's rule)."""
    for g_name, g, n, w in zip("qkv", got, naive, want, strict=True):
        r = w.float()
        floor = 2 * (r + 0.3 - 0.3 - r).abs().max().item()
        err, naive_err = (g - w).abs().max().item(), (n - w).abs().max().item()
        assert err <= 2 * naive_err + floor, (
            f"{name} d{g_name}: error {err:.3g} > 2 x {naive_err:.3g} + {floor:.3g}"
        )


@pytest.mark.parametrize("with_lse", [False, True], ids=["out", "out+lse"])
@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_op_gradients_obey_the_rule(name, with_lse):
    """The op's backward (saved out and lse, the contract's backward formula) against float64
    autograd through torch-math, by the conformance rule: within 2x the error of the same
    naive math (torch-math autograd) in float32, plus the rounding floor."""
    inputs = _torch_inputs(GRAD_CASES[name])
    extra = _maxima(GRAD_CASES[name], inputs)
    want = _op_grads(asw.attention, inputs, torch.float64, with_lse, backend="torch-math")
    naive = _op_grads(asw.attention, inputs, torch.float32, with_lse, backend="torch-math")
    got = _op_grads(torch_op.attention, inputs, torch.float32, with_lse, **extra)
    _assert_rule(name, got, naive, want)


def test_compiled_gradients_obey_the_rule():
    """The same through torch.compile (the op in a compiled graph, its backward traced by
    AOT autograd)."""
    case = CASES["causal-gqa"]
    inputs = _torch_inputs(case)
    compiled = torch.compile(
        lambda q, k, v, **kw: asw.attention(q, k, v, **kw), fullgraph=True, backend="aot_eager"
    )
    want = _op_grads(asw.attention, inputs, torch.float64, False, backend="torch-math")
    naive = _op_grads(asw.attention, inputs, torch.float32, False, backend="torch-math")
    got = _op_grads(compiled, inputs, torch.float32, False)
    _assert_rule("compiled", got, naive, want)


def test_bad_input_fails_when_the_graph_is_traced():
    q, k, v = (_torch_inputs(CASES["causal-gqa"])[n] for n in ("q", "k", "v"))
    compiled = torch.compile(
        lambda q, k, v: asw.attention(q, k, v[:, :5]), fullgraph=True, backend="aot_eager"
    )
    with pytest.raises(Exception, match=r"v: expected the shape of k"):
        compiled(q, k, v)


def test_op_is_callable_directly_and_returns_lse():
    inputs = _torch_inputs(CASES["packed"])
    args = dict(inputs)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    out, lse = torch_op.attention(q, k, v, **{**args, "return_lse": True})
    ref_out, ref_lse = asw.attention(q, k, v, **{**args, "return_lse": True})
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


# ---- no host reads inside the op ---------------------------------------------------------

# Tensor functions that copy device values to the host (each a device sync on CUDA) or
# whose output size depends on values (nonzero & co. sync to size their output). On a CPU
# host `.to(device)` cannot be told apart from a no-op move, so it is not listed.
_HOST_READS = {
    "item",
    "tolist",
    "numpy",
    "__array__",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "cpu",
    "equal",
    "nonzero",
    "masked_select",
    "unique",
    "argwhere",
    "repeat_interleave",
}


class HostReads(TorchFunctionMode):
    """Records every torch function call that would read a tensor's values on the host."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name in _HOST_READS:
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


@pytest.fixture
def device_tensors(monkeypatch):
    """A mock device: every torch tensor is treated as living on an accelerator, so the code
    takes the paths it takes on CUDA (values left in place)."""
    real = arrays.on_host
    monkeypatch.setattr(
        arrays, "on_host", lambda x: False if arrays.framework_of(x) == "torch" else real(x)
    )


@pytest.mark.parametrize("name", list(CASES))
def test_no_host_read_inside_the_op(device_tensors, name):
    """The op's kernel is the eager call (`plan.attention`), run here under the detector
    (a torch function mode does not see inside a custom op it dispatches)."""
    case = CASES[name]
    inputs = _torch_inputs(case)
    extra = _maxima(case, inputs)
    _call(inputs, **extra)  # the first call of a geometry plans (a plan is made once)
    with HostReads() as reads:
        out = _call(inputs, **extra)
    assert reads.seen == [], f"{name}: host reads {reads.seen}"
    err, bound = conformance.judge(out, conformance.make_inputs(case))
    assert err <= bound, f"{name}: error {err:.3g} > bound {bound:.3g}"


def test_host_reads_are_detected(device_tensors):
    """Control: without max_seqlen_q/k the longest lengths must be read from cu_seqlens,
    and the detector sees that read."""
    inputs = _torch_inputs(CASES["packed"])
    with HostReads() as reads:
        _call(inputs)
    assert reads.seen
