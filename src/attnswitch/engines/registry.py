"""The set of known engines: the built-in ones, entry-point plug-ins and programmatic ones.

An engine is a small descriptor, shaped like an attention backend: it declares what it
needs (importable modules, the attnswitch extra that installs them, device kinds,
precisions), says every reason it cannot serve (`unavailable`, `declines`), and `load`s an
`Encoder` for a model. Descriptors import nothing heavy: importing this module imports
neither torch, jax, openvino nor onnxruntime.

Third-party packages add engines through the entry-point group `attnswitch.engines`; an
entry point names an `Engine` instance or class.

This is the process's registry of engines (docs/architecture.md, "Process state"): one
table, `REGISTRY`, found on first use and changed only under its lock.
"""

from __future__ import annotations

import abc
import functools
import glob
import importlib
import importlib.util
import os
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from attnswitch.plugins import Registry, entry_point_objects

ENTRY_POINT_GROUP = "attnswitch.engines"
DEVICE_KINDS = ("cpu", "cuda", "tpu")

# module path and attribute of each built-in engine, in the fixed order used when nothing
# was measured (the first that serves wins)
BUILTIN = (
    ("attnswitch.engines.torch_hf", "ENGINE"),
    ("attnswitch.engines.jax_encoder", "ENGINE"),
    ("attnswitch.engines.openvino_runtime", "ENGINE"),
    ("attnswitch.engines.onnx_runtime", "ENGINE"),
)


class Engine(abc.ABC):
    """One way to run a sentence-embedding model.

    name: the registry name ("torch", "openvino", ...). requires: modules that must be
    importable. extra: the attnswitch extra that installs them. devices: device kinds it
    runs on. precisions: the precisions it can compute. layouts: the batch layouts it
    encodes ("padded" always; an engine declaring more takes `layout=` in `load`).
    reference: True for the engine whose float32 vectors are the parity reference of the
    others (torch). runtime: the modules loading an encoder imports (`import_runtime`),
    a subset of `requires` (the others may serve a one-time export only)."""

    name: str = ""
    requires: tuple[str, ...] = ()
    runtime: tuple[str, ...] = ()
    extra: str = ""
    devices: tuple[str, ...] = ("cpu",)
    precisions: tuple[str, ...] = ("fp32",)
    layouts: tuple[str, ...] = ("padded",)
    reference: bool = False

    def unavailable(self) -> str | None:
        """Why this engine cannot run on this host at all, or None."""
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if missing:
            return f"not installed: {', '.join(missing)} (pip install 'attnswitch[{self.extra}]')"
        return self.extra_unavailable()

    def extra_unavailable(self) -> str | None:
        """Reasons a declaration cannot state (a broken library, a missing CPU feature)."""
        return None

    def declines(self, device: str, precision: str, spec: Any = None) -> list[str]:
        """Every reason it cannot serve `precision` on a `device` kind (for model `spec`,
        a `ModelSpec`, when given)."""
        reasons = []
        if device not in self.devices:
            reasons.append(f"runs on {'/'.join(self.devices)}, not {device}")
        if precision not in self.precisions:
            reasons.append(f"computes {'/'.join(self.precisions)}, not {precision}")
        elif why := self.precision_unavailable(precision):
            reasons.append(why)
        if spec is not None and (why := self.model_unsupported(spec)):
            reasons.append(why)
        return reasons

    def precision_unavailable(self, precision: str) -> str | None:
        """Why a declared precision cannot run on this host (e.g. no bf16 in the CPU)."""
        return None

    def model_unsupported(self, spec: Any) -> str | None:
        """Why this engine cannot run the model `spec`, or None."""
        return None

    @abc.abstractmethod
    def detail(self) -> str:
        """What it runs (library and version, and how)."""

    @abc.abstractmethod
    def load(self, spec: Any, precision: str) -> Any:
        """The `Encoder` for model `spec` in `precision` (not cached here); an engine that
        declares `layouts` beyond padded takes the layout as `load(spec, precision,
        layout=...)`."""

    def ready(self, spec: Any, precision: str) -> bool:
        """Whether loading model `spec` in `precision` would start at once: nothing to
        build first (an export, a conversion, a quantisation). True where nothing is built
        (the default); engines that cache a built model say whether it is built."""
        return True

    def import_runtime(self) -> None:
        """Import the modules an encoder of this engine runs on (`runtime`), so that their
        import can be timed, or done ahead, apart from loading a model."""
        for module in self.runtime:
            importlib.import_module(module)

    def versions(self) -> dict[str, str]:
        """The versions of the libraries it runs on (part of every cache key)."""
        return {m: library_version(m) for m in self.requires}

    def build_revisions(self, precision: str) -> dict[str, str]:
        """What the model it builds for `precision` is made from besides those libraries
        (a quantiser's version, its recipe's and calibration set's revisions); part of its
        artifacts' keys and of the engine plan's and parity verdicts' keys, so a model
        built anew is measured and checked anew. {} where nothing is built (the default),
        which leaves those keys as they are."""
        return {}

    def __repr__(self) -> str:
        return f"<engine {self.name}>"


@functools.cache
def library_version(module: str) -> str:
    """The installed version of `module`'s distribution ("?" when it is not installed), read
    once per process: a library upgraded under a running process is not what it runs."""
    dist = {"jaxlib": "jaxlib", "onnxruntime": "onnxruntime"}.get(module, module)
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def _load() -> dict[str, Engine]:
    found: dict[str, Engine] = {}
    for module_name, attr in BUILTIN:
        engine = getattr(importlib.import_module(module_name), attr)
        found[engine.name] = engine
    for engine in entry_point_objects(
        ENTRY_POINT_GROUP, "engine", lambda e: isinstance(e, Engine), "an attnswitch.engines.Engine"
    ):
        found.setdefault(engine.name, engine)
    return found


# The process's engines: the one registry of engines (plugins.Registry).
REGISTRY: Registry[Engine] = Registry("engine", _load)


def _all() -> Mapping[str, Engine]:
    return REGISTRY.table()


def engines() -> list[Engine]:
    """Every registered engine, available here or not, in the fixed order."""
    return list(_all().values())


def names() -> list[str]:
    return list(_all())


def get(name: str, what: str = "engine") -> Engine:
    """The engine called `name`; `EncodeInputError` naming the known ones otherwise (`what`
    names where the name came from)."""
    engine = _all().get(name)
    if engine is None:
        from attnswitch.engines.base import EncodeInputError

        raise EncodeInputError(what, f"one of auto, {', '.join(names())}", repr(name))
    return engine


def register(engine: Engine, *, replace: bool = False) -> None:
    """Add an engine programmatically (the entry-point group is the packaged way); a name
    already registered is a `ValueError` unless `replace`."""
    REGISTRY.register(engine.name, engine, replace=replace)


def unregister(name: str) -> None:
    """Remove the engine called `name` (nothing when there is none)."""
    REGISTRY.unregister(name)


def reset() -> None:
    """Forget the registered engines: the built-ins and entry points are found again at
    next use, and engines added by `register` are gone (tests that install a plug-in)."""
    REGISTRY.reset()


@functools.cache
def tpu_host() -> bool:
    """True on a host whose jax sees a TPU. Only imports jax where a TPU is plausible."""
    if importlib.util.find_spec("jax") is None:
        return False
    hints = (
        glob.glob("/dev/accel*")
        or glob.glob("/dev/vfio/[0-9]*")
        or any(os.environ.get(v) for v in ("TPU_NAME", "TPU_ACCELERATOR_TYPE", "COLAB_TPU_ADDR"))
    )
    if not hints:
        return False
    try:
        import jax

        return jax.default_backend() == "tpu"
    except Exception:
        return False


# Device nodes one of which a GPU driver that torch can use creates: NVIDIA's, ROCm's
# (torch.cuda also drives AMD GPUs) and WSL's GPU bridge.
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd", "/dev/dxg")


@functools.cache
def cuda_host() -> bool:
    """True where torch sees a CUDA GPU. Imports torch only when it is installed and a GPU
    driver's device node exists (`GPU_DEVICE_NODES`): without one torch cannot see a GPU,
    and importing it to be told so costs seconds of every cold start."""
    if importlib.util.find_spec("torch") is None:
        return False
    if not any(os.path.exists(node) for node in GPU_DEVICE_NODES):
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def host_device() -> str:
    """The device kind engines run on here: "tpu", "cuda" or "cpu"."""
    if tpu_host():
        return "tpu"
    return "cuda" if cuda_host() else "cpu"


__all__ = [
    "DEVICE_KINDS",
    "ENTRY_POINT_GROUP",
    "Engine",
    "engines",
    "get",
    "host_device",
    "library_version",
    "names",
    "register",
    "reset",
    "unregister",
]
