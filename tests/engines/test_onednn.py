"""oneDNN prepacked linears against a float64 oracle, by the FlashAttention-style rule."""

from __future__ import annotations

import pytest
import torch

from attnswitch.engines import onednn
from attnswitch.kernels import conformance

pytestmark = pytest.mark.skipif(
    onednn.unavailable() is not None, reason=f"oneDNN linears unavailable: {onednn.unavailable()}"
)


def _naive_linear(x: torch.Tensor, linear: torch.nn.Linear, compute: torch.dtype) -> torch.Tensor:
    """The plain computation in `compute`: inputs, weights and bias rounded to it, products
    summed in order in float32 (`conformance.serial_matmul`, as the attention rule's
    baseline, so the bound does not hang on which BLAS routine torch picks for the shape),
    the output rounded to it. float64."""

    def rounded(t: torch.Tensor):
        return t.detach().to(compute).float().numpy()

    rows = rounded(x).reshape(-1, x.shape[-1])
    out = conformance.serial_matmul(rows, rounded(linear.weight).T) + rounded(linear.bias)
    out = torch.from_numpy(out).to(compute).double()
    return out.reshape(*x.shape[:-1], -1)


@pytest.mark.parametrize("shape", [(1, 1, 384), (3, 17, 384), (16, 129, 384), (5, 384)])
@pytest.mark.parametrize("compute", [torch.float32, torch.bfloat16])
def test_packed_linear_matches_float64_oracle(shape, compute):
    if onednn.unavailable(compute) is not None:
        pytest.skip(f"this CPU: {onednn.unavailable(compute)}")
    gen = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(384, 200)
    x = torch.randn(*shape, generator=gen)
    with torch.inference_mode():
        w, b = linear.weight, linear.bias
        oracle = torch.nn.functional.linear(x.double(), w.double(), b.double())
        naive = _naive_linear(x, linear, compute)
        got = onednn.PackedLinear(linear, compute, out_dtype=torch.float32)(x)
    assert got.dtype == torch.float32 and got.shape == shape[:-1] + (200,)
    err = float((got.double() - oracle).abs().max())
    floor = 2 * float(((oracle.float() + 0.3) - 0.3 - oracle.float()).abs().max())
    assert err <= 2 * float((naive - oracle).abs().max()) + floor


def test_pack_linears_swaps_every_linear_and_keeps_the_output():
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Sequential(torch.nn.Linear(16, 4))
    )
    x = torch.randn(2, 8)
    with torch.inference_mode():
        before = model(x)
        assert onednn.pack_linears(model, torch.float32) == 2
        after = model(x)
    assert not any(type(m) is torch.nn.Linear for m in model.modules())
    torch.testing.assert_close(after, before)


def test_a_dtype_the_cpu_cannot_pack_is_a_reason_not_a_crash():
    """Each compute dtype is judged by running it: the answer is None or one line naming
    the dtype, and a dtype judged usable really packs and runs."""
    for compute in (torch.float32, torch.bfloat16):
        why = onednn.unavailable(compute)
        if why is None:
            with torch.inference_mode():
                onednn.PackedLinear(torch.nn.Linear(8, 4), compute)(torch.randn(2, 8))
        else:
            assert "\n" not in why and onednn.dtype_name(compute) in why
            with pytest.raises(RuntimeError):
                onednn.PackedLinear(torch.nn.Linear(8, 4), compute)
