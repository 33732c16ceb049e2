"""`flash-attn-3`: Dao-AILab FlashAttention 3 on NVIDIA GPUs, the Hopper kernel.

Not on PyPI: it is built from the `hopper/` directory of Dao-AILab/flash-attention (or
installed from that project's `flash_attn_3` wheels). The distribution is `flash_attn_3`
(since February 2025; its version is this backend's fingerprint). It installs the top-level
module `flash_attn_interface` (since July 2024; newer builds also have
`flash_attn_3.flash_attn_interface`, which re-exports it), which is what this backend and
transformers import, and, since July 2025, `flash_attn_config` with the build's switches.

Conventions are FlashAttention 2's (BSHD, bottom-right causal, `window_size` around the
aligned diagonal, softcap, GQA, lse `[B, Hq, Sq]` / `[Hq, Tq]`), and so is the dispatch
(`kernels/flash_common.py`): `flash_attn_func`, `flash_attn_varlen_func(q, k, v,
cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, ...)`, a key padding mask served by
varlen over the kept keys unless causal or window is on. `return_attn_probs=True` makes both
return `(out, lse)`; versions before it (added August 2025) cannot return the lse and
decline `return_lse`. Rows with no key give zeros and lse `-inf`, as the contract wants.

Rules, read from hopper/flash_attn_interface.py, hopper/flash_api_stable.cpp,
hopper/setup.py and hopper/static_switch.h at version 3.0.0 (main, August 2026):
- compute capability 8.x (Ampere/Ada: the sm80 kernels, built unless
  FLASH_ATTENTION_DISABLE_SM80) or 9.0 (Hopper: sm_90a kernels, the fast path); nothing is
  built for 10.x/12.x (Blackwell), where the sm_90a code does not load: FlashAttention 4
  (`flash_attn.cute`) is that library's Blackwell kernel;
- float16 or bfloat16, forward and backward. FP8 e4m3 (forward only, Hopper only, with
  per-(batch, kv-head) `q/k/v_descale`, bfloat16 output) is outside the contract, whose
  dtypes are float16/bfloat16/float32: such input is refused by validation before any
  backend sees it;
- head dim at most 256, with kernels for 64, 96, 128, 192 and 256 (smaller dims run the next
  one up); the library checks for a multiple of 8 and, unlike FlashAttention 2, does not pad:
  this backend pads, so every head dim up to 256 is served;
- no `attn_mask` (no mask input at all);
- a build may switch features off (`FLASHATTENTION_DISABLE_*` in `flash_attn_config`): fp16,
  softcap, local (windows), varlen, backward, sm8x, head dims. Those become decline reasons
  for the installed build. Builds older than `flash_attn_config` are taken as complete.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

from attnswitch.kernels import flash_common
from attnswitch.kernels.backend import BackendBase, Capabilities, import_reason
from attnswitch.kernels.contract import Call

MODULE = "flash_attn_interface"
HEAD_DIMS = (64, 96, 128, 192, 256)
HEAD_DIM_MULTIPLE = 8
NOT_INSTALLED = (
    "flash_attn_interface is not installed (FlashAttention 3: build hopper/ of "
    "Dao-AILab/flash-attention, or install its flash_attn_3 wheel)"
)

# A build switch, whether a call needs what it switches off, and what that is.
_BUILD_RULES: tuple[tuple[str, Callable[[Call], bool], str], ...] = (
    ("FLASHATTENTION_DISABLE_FP16", lambda c: c.dtype == "float16", "float16"),
    ("FLASHATTENTION_DISABLE_SOFTCAP", lambda c: c.softcap is not None, "softcap"),
    ("FLASHATTENTION_DISABLE_LOCAL", lambda c: c.bounds not in (None, (-1, -1), (-1, 0)), "window"),
    (
        "FLASHATTENTION_DISABLE_VARLEN",
        lambda c: c.packed or c.key_padding,
        "varlen (packed layout, key_padding_mask)",
    ),
    (
        "FLASHATTENTION_DISABLE_BACKWARD",
        lambda c: c.requires_grad,
        "backward (inputs require grad)",
    ),
)


class FlashAttn3(BackendBase):
    """`build_flags`: the build's `FLASHATTENTION_DISABLE_*` switches; None reads those of
    the installed build (none when it is absent or predates `flash_attn_config`)."""

    name = "flash-attn-3"
    framework = "torch"
    caps = Capabilities(
        device_kinds=("cuda",),
        dtypes=("float16", "bfloat16"),
        head_dim_max=HEAD_DIMS[-1],
        attn_mask=False,
        grad=True,
    )
    libraries = ("flash-attn-3", "torch")

    def __init__(self, build_flags: Mapping[str, bool] | None = None):
        self._build_flags = build_flags

    @property
    def build_flags(self) -> Mapping[str, bool]:
        return installed_build_flags() if self._build_flags is None else self._build_flags

    def _probe(self) -> str | None:
        if why := import_reason("torch", "torch"):
            return why
        import torch

        installed = importlib.util.find_spec(MODULE) is not None
        if not torch.cuda.is_available():
            why = "needs an NVIDIA GPU with CUDA (none visible to torch)"
            return why if installed else f"{why}; {NOT_INSTALLED}"
        if not installed:
            return NOT_INSTALLED
        try:
            importlib.import_module(MODULE)
        except Exception as exc:  # a wheel built for another torch or CUDA fails here
            return f"{MODULE} failed to import ({type(exc).__name__}: {exc})"
        return capability_reason(torch.cuda.get_device_capability(), self.build_flags)

    def extra_declines(self, call: Call) -> list[str]:
        reasons = []
        flags = self.build_flags
        cap = call.device.capability
        if call.device.kind == "cuda" and cap is not None:
            if why := capability_reason(cap, flags):
                reasons.append(why)
        built = [d for d in HEAD_DIMS if not flags.get(f"FLASHATTENTION_DISABLE_HDIM{d}")]
        largest = max(built, default=0)
        if largest < HEAD_DIMS[-1] and call.head_dim > largest:
            reasons.append(
                f"head dim {call.head_dim} > {largest}, the largest this build has kernels for"
            )
        for flag, used, what in _BUILD_RULES:
            if flags.get(flag) and used(call):
                reasons.append(f"{what}: this build was compiled without it ({flag})")
        if call.return_lse and not returns_lse():
            reasons.append(
                "return_lse: this flash_attn_interface has no return_attn_probs "
                "(FlashAttention 3 before August 2025)"
            )
        reasons.extend(flash_common.key_padding_declines(call))
        return reasons

    def detail(self, call: Call) -> str | None:
        return flash_common.detail(call, HEAD_DIM_MULTIPLE)

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        from flash_attn_interface import flash_attn_func, flash_attn_varlen_func

        return flash_common.run(
            flash_attn_func,
            flash_attn_varlen_func,
            q,
            k,
            v,
            call,
            head_dim_multiple=HEAD_DIM_MULTIPLE,
        )


def capability_reason(cap: tuple[int, int], flags: Mapping[str, bool]) -> str | None:
    """Why a GPU of compute capability `cap` cannot run this build's kernels, or None."""
    text = f"compute capability {cap[0]}.{cap[1]}"
    if cap < (8, 0):
        return f"{text} < 8.0 (FlashAttention 3 needs Ampere or newer)"
    if cap[0] == 8 and flags.get("FLASHATTENTION_DISABLE_SM8x"):
        return f"{text}: this build has no sm8x kernels (built with FLASH_ATTENTION_DISABLE_SM80)"
    if cap[0] > 9:
        return (
            f"{text}: FlashAttention 3 has kernels for sm8x and sm90 only "
            "(Blackwell runs FlashAttention 4, flash_attn.cute)"
        )
    return None


@functools.cache
def installed_build_flags() -> dict[str, bool]:
    """The installed build's `FLASHATTENTION_DISABLE_*` switches; {} without FA3 or with a
    build older than `flash_attn_config`."""
    if importlib.util.find_spec("flash_attn_config") is None:
        return {}
    from flash_attn_config import CONFIG

    return {k: bool(v) for k, v in CONFIG.get("build_flags", {}).items()}


@functools.cache
def returns_lse() -> bool:
    """Whether the installed `flash_attn_func` takes `return_attn_probs`; True when FA3 is not
    importable here (the rules then describe the current version)."""
    import inspect

    if importlib.util.find_spec(MODULE) is None:
        return True
    try:
        module = importlib.import_module(MODULE)
    except Exception:
        return True
    return "return_attn_probs" in inspect.signature(module.flash_attn_func).parameters


BACKEND = FlashAttn3()
