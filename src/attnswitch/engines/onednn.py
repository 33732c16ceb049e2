"""oneDNN linear layers for the torch engine on CPU.

torch's CPU `nn.Linear` calls MKL's GEMM. On some CPUs (measured: an AMD EPYC with AVX-512,
2 cores) that reaches about 50 GFLOP/s in float32, while oneDNN with the weight prepacked in
its blocked layout, the kernel torch's own compiler (inductor, with freezing) emits on CPU,
reaches 110-150 GFLOP/s on MiniLM's shapes, and about 190 in bfloat16. `pack_linears`
swaps each `nn.Linear` of a model for a `PackedLinear` holding the prepacked weight. The
model's code is untouched: only the leaf modules change, as quantisation tools do.

The packed op is a private torch op (`torch.ops.mkldnn._linear_pointwise`), so `unavailable()`
checks it exists and that a packed layer reproduces `nn.Linear` before anything is swapped;
otherwise the engine keeps `nn.Linear` and says why.
"""

from __future__ import annotations

import functools

import torch


class PackedLinear(torch.nn.Module):
    """`nn.Linear` (inference only) with its weight prepacked for oneDNN.

    compute_dtype: the matmul dtype (weights stored in it, inputs cast to it).
    out_dtype: the output dtype (float32 keeps a float32 residual stream in bf16 mode).
    """

    def __init__(
        self,
        linear: torch.nn.Linear,
        compute_dtype: torch.dtype,
        out_dtype: torch.dtype | None = None,
    ):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.compute_dtype = compute_dtype
        self.out_dtype = out_dtype or compute_dtype
        weight = linear.weight.detach().to(compute_dtype)
        self._packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
        self._bias = None if linear.bias is None else linear.bias.detach().to(compute_dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.mkldnn._linear_pointwise(
            x.to(self.compute_dtype), self._packed, self._bias, "none", [], ""
        )
        return y if y.dtype == self.out_dtype else y.to(self.out_dtype)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"compute={self.compute_dtype}, out={self.out_dtype} (oneDNN prepacked)"
        )


@functools.cache
def unavailable(compute_dtype: torch.dtype = torch.float32) -> str | None:
    """Why oneDNN packed linears computing in `compute_dtype` cannot be used here, or None.

    Measured, not assumed from CPU flags: a small packed layer is built and run in that
    dtype and compared with `nn.Linear` (oneDNN's bfloat16 reorder needs AVX-512 BW/VL/DQ
    or AVX-NE-CONVERT; on an AVX2-only CPU it raises, and bfloat16 then keeps `nn.Linear`).
    """
    if not torch.backends.mkldnn.is_available():
        return "torch was built without oneDNN (mkldnn)"
    ops = torch.ops.mkldnn
    for op in ("_reorder_linear_weight", "_linear_pointwise"):
        try:
            getattr(ops, op)
        except (AttributeError, RuntimeError):
            return f"torch {torch.__version__} has no torch.ops.mkldnn.{op}"
    try:
        gen = torch.Generator().manual_seed(0)
        linear = torch.nn.Linear(64, 48)
        x = torch.randn(3, 5, 64, generator=gen)
        with torch.inference_mode():
            want = torch.nn.functional.linear(
                x.to(compute_dtype), linear.weight.to(compute_dtype), linear.bias.to(compute_dtype)
            ).float()
            got = PackedLinear(linear, compute_dtype, torch.float32)(x)
        err = float((want - got).abs().max())
        # the same products in the same dtype: only the summation order differs
        tol = (1e-5 if compute_dtype == torch.float32 else 2e-2) * float(want.abs().max())
        if not err <= tol:
            return (
                f"a packed {dtype_name(compute_dtype)} linear differs from nn.Linear by {err:.3g}"
            )
    except Exception as exc:  # a broken op is a reason, not a crash
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"packed {dtype_name(compute_dtype)} linear failed: {type(exc).__name__}: {first}"
    return None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def pack_linears(
    model: torch.nn.Module, compute_dtype: torch.dtype, out_dtype: torch.dtype | None = None
) -> int:
    """Replace every `nn.Linear` in `model` (on CPU) by a `PackedLinear`; returns how many."""
    count = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear and child.weight.device.type == "cpu":
                setattr(parent, name, PackedLinear(child, compute_dtype, out_dtype))
                count += 1
    return count


__all__ = ["PackedLinear", "pack_linears", "unavailable"]
