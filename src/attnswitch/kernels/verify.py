"""First-use verification: a backend serves no call whose features no standing verdict covers
before it has passed a self-check on this fingerprint.

The policy (`configure(verify=...)` or `ATTNSWITCH_VERIFY`):
- "first-use" (default): before the first call whose features (`conformance.call_features`:
  dtype, layout, causal, window, softcap, masks, GQA, lse, decode steps, grid head dims) the
  backend's passed cases do not cover, run the fewest grid cases that cover them
  (`select_cases`), on the call's device, and record the verdict (kind "first-use");
- "full": run the whole grid instead (kind "full"), once per fingerprint;
- "off": no self-check; a stored failure still quarantines.

The check runs outside any traced region: under `jax.jit`/`grad`/`vmap` its cases run eagerly
at trace time (`jax.ensure_compile_time_eval`), before the traced call is planned onto the
backend. Under `torch.compile`, `attnswitch.attention` is the custom op
`attnswitch::attention`, whose body (this planner) runs when the compiled graph runs, not
while dynamo traces, so the check runs there on real tensors. Where the planner itself is
reached inside a dynamo trace or a CUDA graph capture it cannot run (the check's own arrays
would be traced or captured): `check_before_use` returns None, and the caller warns and
counts (`attnswitch_attention_verifications{result="skipped"}`). An eager call (or
`attnswitch conformance`) before capturing verifies the backend for those calls too.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Iterator
from typing import Any

from attnswitch.kernels import arrays, conformance, registry, verdicts
from attnswitch.kernels.conformance import Case
from attnswitch.kernels.contract import Call, validate
from attnswitch.kernels.runtime import FIRST_USE, FULL, OFF, POLICIES  # noqa: F401

_lock = threading.RLock()  # one check at a time: concurrent first calls verify once


def select_cases(backend: Any, call: Call) -> tuple[list[Case], frozenset[str]]:
    """The fewest catalogue cases in the call's dtype that this backend serves and that
    together cover the call's features (greedy set cover; among equals the case with the
    fewest features the call does not use, so the call's own code path is the one checked,
    then the cheapest); and the features no served case covers (recorded with the verdict and
    shown, never silently dropped)."""
    wanted = conformance.call_features(call)
    need = set(wanted)
    pool = [c for c in conformance.catalogue().values() if c.dtype == call.dtype]
    chosen: list[Case] = []

    def rank(c: Case) -> tuple[int, int, int]:
        feats = conformance.case_features(c)
        return len(need & feats), -len(feats - wanted), -_cost(c)

    while need and pool:
        best = max(pool, key=rank)
        gain = need & conformance.case_features(best)
        if not gain:
            break
        pool.remove(best)
        if backend.declines(_case_call(best, call)):
            continue
        chosen.append(best)
        need -= gain
    return chosen, frozenset(need)


def _cost(case: Case) -> int:
    if case.packed is not None:
        tq = sum(n for n, _ in case.packed)
        tk = sum(n for _, n in case.packed)
        return tq * tk * case.heads_q * case.head_dim
    return case.batch * case.seqlen_q * case.seqlen_k * case.heads_q * case.head_dim


def _case_call(case: Case, call: Call) -> Call:
    """The case's Call as the backend would see it on the call's framework and device."""
    import dataclasses

    return dataclasses.replace(case_call(case), framework=call.framework, device=call.device)


@functools.lru_cache(maxsize=256)
def case_call(case: Case) -> Call:
    """The validated Call of a case's own (numpy) inputs."""
    args = conformance.make_inputs(case)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    return validate(q, k, v, **args)


def device_string(device: arrays.DeviceInfo, framework: str) -> str:
    """Where `conformance.check` should place a framework's arrays to run on `device`."""
    if device.kind == "cpu" or framework == "numpy":
        return "cpu"
    index = device.index or 0
    if framework == "torch":
        return f"cuda:{index}" if device.kind in ("cuda", "rocm") else f"{device.kind}:{index}"
    return f"{'gpu' if device.kind in ('cuda', 'rocm') else device.kind}:{index}"


def cannot_run_here(call: Call) -> str | None:
    """Why a self-check cannot run at this point of the program, or None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and compiler.is_compiling():
        return "the call is being traced by torch.compile"
    if (
        call.device.kind in ("cuda", "rocm")
        and call.framework == "torch"
        and torch.cuda.is_current_stream_capturing()
    ):
        return "a CUDA graph is being captured"
    return None


def check_before_use(name: str, call: Call, policy: str) -> verdicts.Verdict | None:
    """Run the policy's self-check of backend `name` for `call` (the caller has made sure it
    can run here: `cannot_run_here`) and record its verdict; return it, or None when another
    thread's check already covers the call."""
    backend = registry.get(name)
    with _lock:
        standing = verdicts.standing(backend, call.device)
        if standing.full or (policy != FULL and standing.covers(conformance.call_features(call))):
            return None
        if policy == FULL:
            cases, uncovered = conformance.cases(), frozenset()
        else:
            cases, uncovered = select_cases(backend, call)
        where = device_string(call.device, backend.framework)
        results = _run_outside_trace(name, cases, where, call)
        return verdicts.record(
            backend,
            call.device,
            results,
            verdicts.FULL if policy == FULL else verdicts.FIRST_USE,
            uncovered=sorted(uncovered),
        )


def _run_outside_trace(name: str, cases: list[Case], where: str, call: Call) -> list[Any]:
    def run() -> list[Any]:
        with _no_autocast():
            return [conformance.check(name, c, device=where) for c in cases]

    if call.traced:
        import jax

        # Concrete arrays, run eagerly even though a jax trace is in progress.
        with jax.ensure_compile_time_eval():
            return run()
    return run()


@contextlib.contextmanager
def _no_autocast() -> Iterator[None]:
    """torch's autocast off while the check's cases run: a call made inside a model's bf16
    autocast (the torch engine's bf16 precision) would otherwise check a float32 case in
    bfloat16, fail it on dtype and error, and quarantine a sound backend."""
    torch = sys.modules.get("torch")
    with contextlib.ExitStack() as stack:
        if torch is not None:
            for device_type in ("cpu", "cuda"):
                if torch.is_autocast_enabled(device_type):
                    stack.enter_context(torch.autocast(device_type, enabled=False))
        yield
