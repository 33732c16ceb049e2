"""Array kinds: which framework an array belongs to, its device and dtype, and conversions.

attnswitch accepts `numpy.ndarray`, `torch.Tensor` and `jax.Array`. This module identifies
them without importing torch or jax unless the array already comes from one of them (a
module already in `sys.modules` costs nothing to look up).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

FRAMEWORKS = ("numpy", "torch", "jax")
DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class DeviceInfo:
    """Where an array lives.

    kind: "cpu", "cuda", "tpu", "rocm", "mps", ... (the planner's priority key).
    name: a human and fingerprint name, e.g. "cpu", "NVIDIA H200", "TPU v5 lite".
    index: device ordinal, or None for host memory.
    capability: CUDA compute capability (major, minor), or None.
    """

    kind: str
    name: str
    index: int | None = None
    capability: tuple[int, int] | None = None

    @property
    def label(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


CPU = DeviceInfo("cpu", "cpu")


def framework_of(x: Any) -> str | None:
    """Return "numpy", "torch" or "jax" for a supported array, None for anything else."""
    if isinstance(x, np.ndarray):
        return "numpy"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return "torch"
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        return "jax"
    module = type(x).__module__.split(".")[0]
    if module in ("jax", "jaxlib"):
        return "jax"
    return None


def dtype_name(x: Any) -> str:
    """The dtype of an array as a plain name: "float32", "bfloat16", "bool", "int32", ..."""
    return str(x.dtype).removeprefix("torch.")


def device_of(x: Any, framework: str) -> DeviceInfo:
    """The device an array of `framework` lives on."""
    if framework == "numpy":
        return CPU
    if framework == "torch":
        return _torch_device(x.device)
    if framework == "jax":
        return _jax_device(x)
    raise ValueError(f"framework: expected one of {FRAMEWORKS}, got {framework!r}")


def _torch_device(device: Any) -> DeviceInfo:
    if device.type == "cpu":
        return CPU
    if device.type == "cuda":
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        return DeviceInfo(kind, props.name, index, (props.major, props.minor))
    return DeviceInfo(device.type, device.type, device.index)


def is_traced(x: Any) -> bool:
    """True for a jax tracer (an array inside `jax.jit`, `grad`, `vmap`...): its shape and
    dtype are known, its values and placement are not."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.core.Tracer)


def is_symbolic(x: Any) -> bool:
    """True for an array whose values do not exist yet: a jax tracer, or a torch fake or meta
    tensor (what `torch.compile` traces with, and what a custom op's fake kernel receives)."""
    if is_traced(x):
        return True
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor):
        return False
    if x.device.type == "meta":
        return True
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(x)


def on_host(x: Any) -> bool:
    """Whether reading the values of `x` costs no device synchronisation: numpy arrays, torch
    CPU tensors and concrete jax arrays in host memory. Values of anything else (a CUDA tensor,
    a jax array on an accelerator, a tracer or fake tensor) are left where they are."""
    framework = framework_of(x)
    if framework == "numpy":
        return True
    if framework == "torch":
        return x.device.type == "cpu" and not is_symbolic(x)
    if framework == "jax":
        return not is_traced(x) and _jax_device(x).kind == "cpu"
    return False


def _jax_device(x: Any) -> DeviceInfo:
    if is_traced(x):
        # A tracer has no placement; a traced computation runs on jax's default device.
        import jax

        devices = jax.devices()[:1]
    else:
        devices = list(x.devices()) if hasattr(x, "devices") else []
    if not devices:
        return CPU
    d = devices[0]
    platform = d.platform
    if platform == "cpu":
        return CPU
    if platform == "gpu":
        platform = "cuda"
    kind_name = getattr(d, "device_kind", platform)
    capability = None
    cc = getattr(d, "compute_capability", None)
    if cc:
        major, _, minor = str(cc).partition(".")
        capability = (int(major), int(minor or 0))
    return DeviceInfo(platform, kind_name, d.id, capability)


def to_numpy(x: Any) -> np.ndarray:
    """Host numpy copy (or view) of any supported array; bfloat16 keeps ml_dtypes.bfloat16."""
    framework = framework_of(x)
    if framework == "numpy":
        return x
    if framework == "torch":
        import torch

        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    if framework == "jax":
        return np.asarray(x)
    raise TypeError(f"expected a numpy, torch or jax array, got {type(x).__name__}")


def numpy_to(x: np.ndarray, framework: str, like: Any = None) -> Any:
    """Convert a numpy array to `framework`, on the device of `like` when given (no copy on CPU
    where the framework allows it)."""
    if framework == "numpy":
        return x
    if framework == "torch":
        import torch

        if x.dtype.name == "bfloat16":
            t = torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.ascontiguousarray(x))
        return t if like is None else t.to(like.device)
    if framework == "jax":
        import jax
        import jax.numpy as jnp

        arr = jnp.asarray(x)
        if like is not None:
            arr = jax.device_put(arr, list(like.devices())[0])
        return arr
    raise ValueError(f"framework: expected one of {FRAMEWORKS}, got {framework!r}")
