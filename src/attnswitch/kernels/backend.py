"""What a backend is: the protocol every backend answers, and a base class that turns a
declared list of capabilities into every reason a backend cannot serve a call.

A backend file declares its `Capabilities` and adds the rules the declaration cannot state
(`extra_declines`). `declines` always lists *all* reasons, so a plan can show them together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from attnswitch.kernels import runtime
from attnswitch.kernels.contract import Call


@runtime_checkable
class Backend(Protocol):
    """The shape of every backend (docs/architecture.md, "The attention path")."""

    name: str
    framework: str

    def unavailable(self) -> str | None: ...
    def declines(self, call: Call) -> list[str]: ...
    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any: ...


@dataclass(frozen=True)
class Capabilities:
    """What a backend serves. Anything a call uses outside this is a decline reason."""

    device_kinds: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = ("float16", "bfloat16", "float32")
    layouts: tuple[str, ...] = ("dense", "packed")
    head_dim_max: int | None = None
    causal: bool = True
    window: bool = True
    softcap: bool = True
    key_padding_mask: bool = True
    attn_mask: bool = True
    gqa: bool = True
    lse: bool = True
    grad: bool = False
    accepts_all_frameworks: bool = False


_FEATURES = (
    ("causal", "causal", lambda c: c.causal),
    ("window", "window", lambda c: c.window is not None),
    ("softcap", "softcap", lambda c: c.softcap is not None),
    ("key_padding_mask", "key_padding_mask", lambda c: c.key_padding),
    ("attn_mask", "attn_mask", lambda c: c.attn_mask_shape is not None),
    ("gqa", "GQA/MQA (Hq != Hkv)", lambda c: c.gqa),
    ("lse", "return_lse", lambda c: c.return_lse),
    ("grad", "gradients (inputs require grad)", lambda c: c.requires_grad),
)


class BackendBase:
    """Base for the built-in backends. Subclasses set `name`, `framework`, `caps`, and
    implement `_probe` (import check), `run`, and optionally `extra_declines`, `versions`
    and `detail`."""

    name: str = ""
    framework: str = ""
    caps: Capabilities = Capabilities()
    libraries: tuple[str, ...] = ()
    # Why the first call of a new shape is slow (a compile), for tools that time backends
    # (`attnswitch doctor` skips timing it unless asked); None when it is not.
    slow_first_call: str | None = None
    # The framework whose own float32 tanh computes softcap inside a kernel attnswitch does
    # not write (conformance judges such a kernel against a baseline using that tanh:
    # `conformance.kernel_tanh_baseline`); None when attnswitch computes it.
    softcap_tanh: str | None = None

    def unavailable(self) -> str | None:
        """Why this backend cannot run in this process at all, or None."""
        return _cached_probe(self)

    def _probe(self) -> str | None:
        return None

    def declines(self, call: Call) -> list[str]:
        """Every reason this backend cannot serve `call`; empty when it can."""
        caps = self.caps
        reasons = []
        if call.framework not in (self.framework, "numpy") and not caps.accepts_all_frameworks:
            reasons.append(f"takes {self.framework} or numpy arrays, got {call.framework}")
        if call.traced and self.framework != "jax":
            reasons.append("needs concrete arrays, got jax tracers (inside jax.jit/grad/vmap)")
        if call.device.kind not in caps.device_kinds:
            reasons.append(f"runs on {'/'.join(caps.device_kinds)}, not on {call.device.kind}")
        if call.dtype not in caps.dtypes:
            reasons.append(f"dtype {call.dtype} not among {', '.join(caps.dtypes)}")
        if call.layout not in caps.layouts:
            reasons.append(f"{call.layout} layout not supported")
        if caps.head_dim_max is not None and call.head_dim > caps.head_dim_max:
            reasons.append(f"head dim {call.head_dim} > {caps.head_dim_max}")
        for attr, label, used in _FEATURES:
            if used(call) and not getattr(caps, attr):
                reasons.append(f"{label} not supported")
        reasons.extend(self.extra_declines(call))
        return reasons

    def extra_declines(self, call: Call) -> list[str]:
        """Rules beyond `caps` (alignment, head-dim multiples, device capability...)."""
        return []

    def detail(self, call: Call) -> str | None:
        """A note for plans about how the call will run (e.g. which sub-kernel), or None."""
        return None

    def versions(self) -> dict[str, str]:
        """Versions of the libraries this backend runs on, for conformance fingerprints."""
        from importlib import metadata

        out = {}
        for lib in self.libraries:
            try:
                out[lib] = metadata.version(lib)
            except metadata.PackageNotFoundError:
                out[lib] = "absent"
        return out

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<backend {self.name} ({self.framework})>"


def _cached_probe(backend: BackendBase) -> str | None:
    """`backend._probe()` once per runtime (its probe cache, `kernels/runtime.py`)."""
    probes = runtime.current().probes
    if backend in probes:
        return probes[backend]
    try:
        reason = backend._probe()
    except Exception as exc:  # a broken install is a reason, not a crash of the planner
        reason = f"probe failed: {type(exc).__name__}: {exc}"
    probes[backend] = reason
    return reason


def import_reason(module: str, extra: str) -> str | None:
    """None if `module` imports, else a reason naming the extra that installs it."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as exc:
        return f"{module} is not installed ({exc.__class__.__name__}; pip install 'attnswitch[{extra}]')"
    return None
