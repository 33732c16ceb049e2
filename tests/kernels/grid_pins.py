"""The conformance-grid cases each built-in backend declines, pinned. Every other grid case
is one it must serve: a regression in a backend's declared capabilities then fails
`test_declines_exactly_the_pinned_cases` (and its conformance cases fail instead of turning
into skips), and a new capability fails it too until the pin is updated.

CPU pins hold for the grid run on CPU arrays (`conformance.check(..., device="cpu")`, as
tests/kernels/test_conformance.py runs it); GPU pins for calls described on a GPU of each
generation (bfloat16 grid), checked on any host through `declines`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from attnswitch.kernels import conformance, verify
from attnswitch.kernels.arrays import CPU, DeviceInfo


def _labels(names: Iterable[str], dtypes: Iterable[str] = conformance.DTYPES) -> frozenset[str]:
    return frozenset(f"{n}/{d}" for n in names for d in dtypes)


FP16_SPECIAL = frozenset({"large-magnitude/float16", "plain-fp16/float16"})
DECLINES_ON_CPU: dict[str, frozenset[str]] = {
    "reference": frozenset(),
    "torch-math": frozenset(),
    "jax-blockwise": frozenset(),
    # no lse from SDPA's CPU kernels; softcap is not an SDPA argument
    "torch-sdpa": _labels(("lse", "packed-lse", "softcap-30")),
    # inductor's C++ flex kernel returns no lse
    "torch-flex": _labels(("lse", "packed-lse")),
    "jax-xla": _labels(("softcap-30",))
    | _labels(("lse", "packed-lse"), ("bfloat16",))
    | FP16_SPECIAL,
    "pallas-flash": _labels(
        ("softcap-30", "window-64-16", "window-causal-48", "decode-window-padding", "packed-window")
    )
    | FP16_SPECIAL,
    "pallas-splash": FP16_SPECIAL,
}

GPUS = {
    "sm80": DeviceInfo("cuda", "NVIDIA A100-SXM4-80GB", 0, (8, 0)),
    "sm90": DeviceInfo("cuda", "NVIDIA H200", 0, (9, 0)),
}
_FLASH = _labels(("decode-window-padding", "masked-row"), ("bfloat16",))
_CUDNN = _labels(
    ("softcap-30", "lse", "packed", "packed-unequal", "packed-lse", "packed-window", "hdim-59"),
    ("bfloat16",),
)
# bfloat16 grid (and the special cases) on each GPU generation
DECLINES_ON_GPU: dict[str, dict[str, frozenset[str]]] = {
    "flash-attn": {"sm80": _FLASH, "sm90": _FLASH},
    "flash-attn-3": {"sm80": _FLASH, "sm90": _FLASH},
    "jax-cudnn": {"sm80": _CUDNN | {"hdim-256/bfloat16"}, "sm90": _CUDNN},
}


def gpu_grid() -> list[conformance.Case]:
    """The grid a GPU pin is about: the bfloat16 grid and the float16 special cases."""
    return [c for c in conformance.cases(dtypes=("bfloat16",)) if c.dtype != "float32"]


def declined(
    backend: object,
    cases: Iterable[conformance.Case],
    device: DeviceInfo = CPU,
) -> frozenset[str]:
    """Labels of `cases` the backend declines for arrays of its framework on `device`
    (judged by `declines` alone, so on any host)."""
    fw = (
        "numpy"
        if getattr(getattr(backend, "caps", None), "accepts_all_frameworks", False)
        else backend.framework
    )  # type: ignore[attr-defined]
    out = set()
    for case in cases:
        call = dataclasses.replace(verify.case_call(case), framework=fw, device=device)
        if backend.declines(call):  # type: ignore[attr-defined]
            out.add(case.label)
    return frozenset(out)


def must_serve(name: str, gpu: str, cases: Iterable[conformance.Case]) -> list[conformance.Case]:
    """The cases of `cases` backend `name` is pinned to serve on GPU generation `gpu`."""
    return [c for c in cases if c.label not in DECLINES_ON_GPU[name][gpu]]


def gpu_generation(framework: str = "torch") -> str:
    """The GPUS key of the GPU tests run on (pins exist for sm80 and sm90 generations)."""
    import pytest

    if framework == "torch":
        import torch

        major, minor = torch.cuda.get_device_capability()
    else:
        import jax

        major, _, minor = str(jax.devices("gpu")[0].compute_capability).partition(".")
        major = int(major)
    if major not in (8, 9):
        pytest.fail(
            f"no pinned grid cases for compute capability {major}.{minor}: add them "
            "to tests/kernels/grid_pins.py"
        )
    return f"sm{major}0"
