"""The attention call under torch.compile (the `attnswitch::attention` custom op) and the
op's promise of no host reads: no graph break, fullgraph compiles, results within the
conformance rule, gradients, errors at trace time, and no sync-causing call inside the op."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

import attnswitch as asw
from attnswitch.attention import arrays, conformance, torch_op
from attnswitch.attention.conformance import Case

CASES = {
    "decode-step": Case("decode", batch=3, seqlen_q=1, seqlen_k=77, heads_q=8, heads_kv=2,
                        head_dim=32, causal=True),
    "causal-gqa": Case("causal", seqlen_q=37, seqlen_k=53, heads_q=4, heads_kv=2, head_dim=24,
                       causal=True),
    "key-padding": Case("padding", seqlen_q=29, seqlen_k=140, head_dim=16, key_padding=True),
    "packed": Case("packed", heads_q=4, heads_kv=2, head_dim=16, causal=True,
                   packed=((5, 9), (0, 3), (12, 12), (7, 0))),
}


def _torch_inputs(case: Case) -> dict:
    return {n: torch.from_numpy(x) if hasattr(x, "dtype") else x
            for n, x in conformance.make_inputs(case).items()}


def _maxima(case: Case, inputs: dict) -> dict:
    """FlashAttention's host-side maxima for a packed case (so cu_seqlens need not be read)."""
    if case.packed is None:
        return {}
    return dict(max_seqlen_q=max(n for n, _ in case.packed),
                max_seqlen_k=max(n for _, n in case.packed))


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
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), \
        explained.break_reasons
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    out = compiled(**inputs)
    err, bound = conformance.judge(out, conformance.make_inputs(case))
    assert err <= bound, f"{name}: error {err:.3g} > bound {bound:.3g}"
    assert torch.equal(out, fn(**inputs))  # the op runs the eager plan


def test_compiled_gradients_match_eager():
    case = CASES["causal-gqa"]
    inputs = _torch_inputs(case)

    def grads(fn):
        leaves = {n: inputs[n].clone().requires_grad_() for n in ("q", "k", "v")}
        out = fn(**{**inputs, **leaves})
        (out * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
        return [leaves[n].grad for n in ("q", "k", "v")]

    eager = grads(lambda **kw: _call(kw))
    compiled = grads(torch.compile(lambda **kw: _call(kw), fullgraph=True, backend="aot_eager"))
    for e, c in zip(eager, compiled, strict=True):
        torch.testing.assert_close(c, e, rtol=0, atol=0)


def test_bad_input_fails_when_the_graph_is_traced():
    q, k, v = (_torch_inputs(CASES["causal-gqa"])[n] for n in ("q", "k", "v"))
    compiled = torch.compile(lambda q, k, v: asw.attention(q, k, v[:, :5]), fullgraph=True,
                             backend="aot_eager")
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
    "item", "tolist", "numpy", "__array__", "__bool__", "__int__", "__float__", "__index__",
    "cpu", "equal", "nonzero", "masked_select", "unique", "argwhere", "repeat_interleave",
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
        arrays, "on_host", lambda x: False if arrays.framework_of(x) == "torch" else real(x))


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
