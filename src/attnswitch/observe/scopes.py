"""Profiler scopes: every attention call runs inside `attnswitch/<backend>`, so standard
profilers (torch.profiler, the JAX/XLA profiler, Nsight Systems) show which kernel ran."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def scope_name(backend: str) -> str:
    return f"attnswitch/{backend}"


@contextlib.contextmanager
def scope(backend: str, framework: str, device_kind: str) -> Iterator[None]:
    """Enter the framework's named scope (and an NVTX range on CUDA) for one call."""
    name = scope_name(backend)
    if framework == "torch":
        import torch

        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.profiler.record_function(name))
            if device_kind == "cuda":
                stack.enter_context(torch.cuda.nvtx.range(name))
            yield
    elif framework == "jax":
        import jax

        with jax.named_scope(name):
            yield
    else:
        yield
