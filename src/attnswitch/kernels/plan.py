"""Selection: which backend serves a call, why the others don't, and running the plan.

`explain(...)` returns a `Plan`: the chosen backend, the ordered fallbacks and, for every
other backend, why not (unavailable, declined with reasons, quarantined by a failed
conformance verdict), with each backend's verification state. `attention(...)` runs the plan's
first candidate; on a runtime failure (not an input error) it warns once per (backend, call
kind), counts it and tries the next.

Verification (`kernels/verify.py`): under the default policy a candidate whose passed cases
do not cover the call's features runs a first-use self-check before it serves; one that fails
is quarantined for its fingerprint and the call falls back to the next candidate, with a
one-time warning and a counter (an error in strict mode). An explicitly requested backend is
neither checked first nor quarantined (a stored failure only warns).

Order of candidates: a measured autotune table for the call when one exists, else `PRIORITY`
for the device kind (on CUDA, per generation: see `_priority_key`). Overrides, strongest
first: `backend=`, `with use(name):`, the `ATTNSWITCH_BACKEND` environment variable. An
explicitly requested backend never falls back.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from attnswitch.kernels import arrays, autotune, conformance, registry, runtime, verdicts, verify
from attnswitch.kernels.contract import AttentionInputError, Call, describe, settings
from attnswitch.kernels.execute import run_backend
from attnswitch.kernels.options import AttentionOptions, keyword_form
from attnswitch.observe import metrics

# Fixed priority per device kind: the native and fastest kernels first, portable ones after,
# the float64 oracle last. Names not registered here are skipped; plug-ins not listed here
# come after the listed ones, before the oracle.
PRIORITY: dict[str, tuple[str, ...]] = {
    "cpu": ("torch-sdpa", "torch-flex", "jax-blockwise", "jax-xla", "torch-math", "reference"),
    "cuda": (
        "flash-attn-3",
        "flash-attn",
        "torch-sdpa",
        "jax-cudnn",
        "torch-flex",
        "jax-xla",
        "jax-blockwise",
        "torch-math",
        "reference",
    ),
    # CUDA before Hopper: FlashAttention 2 is the mature kernel there (about 70% of an A100's
    # peak); FlashAttention 3's sm8x path follows it. From Hopper on, FA3 leads ("cuda").
    "cuda-sm8x": (
        "flash-attn",
        "flash-attn-3",
        "torch-sdpa",
        "jax-cudnn",
        "torch-flex",
        "jax-xla",
        "jax-blockwise",
        "torch-math",
        "reference",
    ),
    "rocm": ("flash-attn", "torch-sdpa", "torch-flex", "jax-xla", "torch-math", "reference"),
    "tpu": ("pallas-splash", "pallas-flash", "jax-blockwise", "jax-xla", "reference"),
}
DEFAULT_PRIORITY = ("torch-sdpa", "jax-xla", "jax-blockwise", "torch-math", "reference")

UNAVAILABLE, DECLINED, QUARANTINED, NOT_REQUESTED = (
    "unavailable",
    "declined",
    "quarantined",
    "not requested",
)


class NoBackendError(RuntimeError):
    """No backend can serve the call (or the requested one cannot). Carries the full plan."""

    def __init__(self, plan: Plan, message: str | None = None):
        self.plan = plan
        head = (
            message or f"no attention backend can serve {plan.call.kind} ({plan.call.shape_text})"
        )
        super().__init__(f"{head}\n{plan}")


class BackendFailedError(RuntimeError):
    """A backend raised at run time and no fallback was allowed (explicit request, strict
    mode, or no candidate left)."""


class VerificationFailedError(BackendFailedError):
    """A backend failed its first-use self-check and no fallback was allowed (strict mode, or
    no candidate left). `verdict` is the recorded verdict."""

    def __init__(self, message: str, verdict: verdicts.Verdict):
        self.verdict = verdict
        super().__init__(message)


@dataclass(frozen=True)
class Rejection:
    backend: str
    status: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    """How a call will be served.

    candidates: backends that can serve it, in the order they will be tried.
    rejected: every other registered backend with its status and reasons.
    source: what ordered the candidates ("priority:<device kind>", "autotune", or the override
    that forced one: "backend=", "use()", "ATTNSWITCH_BACKEND").
    verdicts: status ("pass", "fail", "unverified") of every backend that could serve the call;
    standing: its verification state in full (`verdicts.Standing`).
    verify: the verification policy; unverified: candidates that will run a self-check before
    serving (their passed cases do not cover the call's features).
    """

    call: Call
    candidates: tuple[str, ...]
    rejected: tuple[Rejection, ...]
    source: str
    requested: str | None = None
    details: dict[str, str] = field(default_factory=dict, compare=False)
    verdicts: dict[str, str] = field(default_factory=dict, compare=False)
    standing: dict[str, verdicts.Standing] = field(default_factory=dict, compare=False)
    verify: str = verify.FIRST_USE
    unverified: tuple[str, ...] = ()

    @property
    def chosen(self) -> str | None:
        return self.candidates[0] if self.candidates else None

    @property
    def fallbacks(self) -> tuple[str, ...]:
        return self.candidates[1:]

    def reasons(self, backend: str) -> list[str]:
        """Why `backend` is not a candidate (empty when it is one)."""
        for r in self.rejected:
            if r.backend == backend:
                return list(r.reasons)
        return []

    def status(self, backend: str) -> str:
        if backend in self.candidates:
            return "chosen" if backend == self.chosen else "fallback"
        for r in self.rejected:
            if r.backend == backend:
                return r.status
        return "unknown"

    def __str__(self) -> str:
        c = self.call
        lines = [
            f"call: {c.kind}  {c.shape_text}  on {c.device.label} ({c.device.name})",
            f"order: {self.source}  verify: {self.verify}",
        ]
        for i, name in enumerate(self.candidates):
            role = "chosen" if i == 0 else "fallback"
            note = self.details.get(name)
            state = self.standing.get(name, verdicts.Standing()).summary
            if name in self.unverified:
                state += f"; {self.verify} check before it serves this call"
            lines.append(f"  {role:<13} {name} [{state}]" + (f": {note}" if note else ""))
        for r in self.rejected:
            lines.append(f"  {r.status:<13} {r.backend}: " + "; ".join(r.reasons))
        return "\n".join(lines)


# ---- configuration and overrides -------------------------------------------------------


def configure(
    *, strict: bool | None = None, debug: bool | None = None, verify: str | None = None
) -> dict[str, Any]:
    """Change the settings of the runtime in force (`kernels/runtime.py`); returns them.

    strict: every runtime fallback, and every fallback from a backend that failed its
    first-use check, becomes an error (also `ATTNSWITCH_STRICT=1`).
    debug: read and check the values of device `cu_seqlens` even when that synchronises
    (also `ATTNSWITCH_DEBUG=1`; see `kernels.contract`).
    verify: "first-use" (default), "full" or "off" (also `ATTNSWITCH_VERIFY`); see
    `kernels/verify.py`.
    The environment variables are read once per runtime (at first use, and after
    `runtime.current().reset()`); what `configure` names wins over them.
    """
    changes: dict[str, Any] = {}
    if strict is not None:
        changes["strict"] = bool(strict)
    if debug is not None:
        changes["debug"] = bool(debug)
    if verify is not None:
        _check_policy(verify, "verify")
        changes["verify"] = verify
    s = settings()
    if changes:
        s = runtime.current().configure(**changes)
    return {"strict": s.strict, "verify": s.verify, "debug": s.debug}


def verify_policy() -> str:
    """The verification policy in force: `configure(verify=...)`, else `ATTNSWITCH_VERIFY`,
    else "first-use"."""
    return settings().verify


def _check_policy(policy: Any, argument: str) -> None:
    try:
        runtime.check_policy(policy, argument)
    except runtime.SettingError as exc:
        raise AttentionInputError(exc.argument, exc.expected, exc.got) from None


@contextlib.contextmanager
def use(name: str) -> Iterator[None]:
    """Within this block, attention calls without `backend=` use backend `name`."""
    _check_name(name, "use")
    with runtime.using(runtime.current().view(use=name)):
        yield


def _check_name(name: Any, argument: str) -> None:
    if not isinstance(name, str) or registry.get(name) is None:
        raise AttentionInputError(
            argument, f"a registered backend name ({', '.join(registry.names())})", repr(name)
        )


def _requested(backend: str | None) -> tuple[str | None, str | None]:
    if backend is not None:
        _check_name(backend, "backend")
        return backend, "backend="
    s = settings()
    if s.use is not None:
        return s.use, "use()"
    if s.backend is not None:
        _check_name(s.backend, "ATTNSWITCH_BACKEND")
        return s.backend, "ATTNSWITCH_BACKEND"
    return None, None


# ---- planning ------------------------------------------------------------------------

_PLAN_CACHE_SIZE = 4096  # plans kept per runtime before the cache is emptied


def _order(call: Call) -> tuple[list[str], str]:
    names = registry.names()
    tuned = autotune.preferred(call)
    if tuned:
        head = [n for n in tuned if n in names]
        source = "autotune"
    else:
        key = _priority_key(call.device)
        head = [n for n in PRIORITY.get(key, DEFAULT_PRIORITY) if n in names]
        source = f"priority:{key}"
    rest = [n for n in names if n not in head and n != "reference"]
    tail = ["reference"] if "reference" in names and "reference" not in head else []
    return head + rest + tail, source


def _priority_key(device: arrays.DeviceInfo) -> str:
    """The PRIORITY entry for a device: its kind, or "cuda-sm8x" for Ampere and Ada GPUs."""
    if device.kind == "cuda" and device.capability is not None and device.capability[0] == 8:
        return "cuda-sm8x"
    return device.kind


def plan_for(call: Call, backend: str | None = None) -> Plan:
    """The plan for a validated call, cached per geometry (`Call.plan_key`) and
    configuration. A cached plan's `call` is the first call of its key; `explain` returns
    the plan with the caller's own call. Hits and misses are counted (`attnswitch.stats()`)."""
    requested, how = _requested(backend)
    rt = runtime.current()
    policy = settings().verify
    key = (
        call.plan_key,
        requested,
        how,
        rt.settings,
        registry.generation(),
        verdicts.STORE.generation,
        autotune.generation(),
    )
    cached = rt.plans.get(key)
    if cached is not None:
        metrics.PLAN_CACHE_HITS.inc()
        rt.counters["plan_cache_hits"] += 1
        return cached
    metrics.PLAN_CACHE_MISSES.inc()
    rt.counters["plan_cache_misses"] += 1
    plan = _make_plan(call, requested, how, policy)
    with rt.lock:
        if len(rt.plans) >= _PLAN_CACHE_SIZE:
            rt.plans.clear()
        rt.plans[key] = plan
    return plan


def _make_plan(call: Call, requested: str | None, how: str | None, policy: str) -> Plan:
    order, source = _order(call)
    candidates, rejected, details, verdict_of, standing_of = [], [], {}, {}, {}
    unverified = []
    features = conformance.call_features(call)
    for name in order:
        b = registry.get(name)
        if requested is not None and name != requested:
            rejected.append(Rejection(name, NOT_REQUESTED, (f"{how} asked for {requested}",)))
            continue
        if (why := b.unavailable()) is not None:
            rejected.append(Rejection(name, UNAVAILABLE, (why, *_declines_quietly(b, call))))
            continue
        reasons = b.declines(call)
        if reasons:
            rejected.append(Rejection(name, DECLINED, tuple(reasons)))
            continue
        standing = verdicts.standing(b, call.device)
        verdict_of[name], standing_of[name] = standing.status, standing
        if standing.status == verdicts.FAIL and requested is None:
            rejected.append(
                Rejection(
                    name,
                    QUARANTINED,
                    (
                        f"failed conformance ({standing.failure_kind}) for this fingerprint: "
                        f"{standing.failure}; `attnswitch conformance --backend {name}` requalifies it",
                    ),
                )
            )
            continue
        # An explicit request runs what was asked for: not quarantined, not checked first.
        if (
            requested is None
            and policy != verify.OFF
            and (not standing.covers(features) or (policy == verify.FULL and not standing.full))
        ):
            unverified.append(name)
        candidates.append(name)
        detail = getattr(b, "detail", None)
        if detail is not None and (note := detail(call)):
            details[name] = note
    return Plan(
        call=call,
        candidates=tuple(candidates),
        rejected=tuple(rejected),
        source=how or source,
        requested=requested,
        details=details,
        verdicts=verdict_of,
        standing=standing_of,
        verify=policy,
        unverified=tuple(unverified),
    )


def _details(candidates: Any, call: Call) -> dict[str, str]:
    """Each candidate's note on how it will serve `call` (e.g. which sub-kernel)."""
    details = {}
    for name in candidates:
        detail = getattr(registry.get(name), "detail", None)
        if detail is not None and (note := detail(call)):
            details[name] = note
    return details


def _for_call(plan: Plan, call: Call) -> Plan:
    """`plan` (cached under `call`'s key, possibly made for another call of that geometry)
    describing `call` itself."""
    if plan.call is call:
        return plan
    return replace(plan, call=call, details=_details(plan.candidates, call))


def _declines_quietly(b: Any, call: Call) -> list[str]:
    """An unavailable backend's decline rules for this call too, so a plan shows what it
    would refuse where it is installed (e.g. flash-attn's rules on a CPU host)."""
    try:
        return list(b.declines(call))
    except Exception:  # rules that need the missing library cannot be asked here
        return []


def _explain(q: Any, k: Any, v: Any, options: AttentionOptions) -> Plan:
    """The plan `attention` would follow for these arguments, without running anything."""
    call = describe(q, k, v, options)
    return _for_call(plan_for(call, options.backend), call)


explain = keyword_form(_explain, "explain")


# ---- running -------------------------------------------------------------------------


# Why a backend is warned about, one warn-once key per (backend, reason): a backend that
# failed its first-use check and is then requested explicitly gets both warnings. A runtime
# failure is keyed on the call kind instead (one warning per kind of call that failed).
FAILED_CHECK, REQUESTED_DESPITE_FAILURE, UNVERIFIABLE = (
    "failed first-use check",
    "requested despite a failed verdict",
    "unverifiable",
)


def _warn_once(key: tuple[str, str], message: str) -> None:
    """Warn once per key in the runtime in force (its warn-once registry)."""
    runtime.current().warn_once(key, message, stacklevel=3)


def run(q: Any, k: Any, v: Any, options: AttentionOptions) -> Any:
    """The eager path of `attnswitch.attention` (`kernels/entry.py`, which documents the
    contract): validate, plan, run the plan with fallback. Under torch.compile the front door
    routes the call through the custom op (`kernels/torch_op.py`), whose kernel is this.
    `attention` is its keyword form."""
    call = describe(q, k, v, options)
    plan = plan_for(call, options.backend)
    if not plan.candidates:
        plan = _for_call(plan, call)
        if plan.requested is not None:
            raise NoBackendError(
                plan, f"requested backend {plan.requested} cannot serve {call.kind}"
            )
        raise NoBackendError(plan)
    if plan.requested is not None and plan.verdicts.get(plan.requested) == verdicts.FAIL:
        _warn_once(
            (plan.requested, REQUESTED_DESPITE_FAILURE),
            f"attnswitch: {plan.requested} failed conformance for this fingerprint and runs only "
            "because it was requested explicitly",
        )
    strict = settings().strict
    no_fallback = plan.requested is not None or strict
    for i, name in enumerate(plan.candidates):
        last = i == len(plan.candidates) - 1
        if (
            plan.unverified
            and name in plan.unverified
            and not _verified_before_use(name, call, plan, no_fallback, last)
        ):
            continue
        start = time.perf_counter()
        try:
            result = run_backend(name, q, k, v, call)
        except AttentionInputError:
            raise
        except Exception as exc:
            metrics.ATTENTION_FAILURES.labels(name).inc()
            if no_fallback or last:
                why = (
                    "it was requested explicitly"
                    if plan.requested
                    else ("strict mode is on" if strict else "no fallback is left")
                )
                raise BackendFailedError(
                    f"{name}: failed on {call.kind} ({call.shape_text}) and {why}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            nxt = plan.candidates[i + 1]
            metrics.ATTENTION_FALLBACKS.labels(name, nxt).inc()
            _warn_once(
                (name, call.kind),
                f"attnswitch: {name} failed on {call.kind} ({type(exc).__name__}: {exc}); "
                f"falling back to {nxt}",
            )
            continue
        metrics.ATTENTION_SECONDS.labels(name).observe(time.perf_counter() - start)
        metrics.ATTENTION_CALLS.labels(name).inc()
        return result
    raise AssertionError("unreachable")


attention = keyword_form(run, "attention")


def _verified_before_use(name: str, call: Call, plan: Plan, no_fallback: bool, last: bool) -> bool:
    """Run `name`'s self-check for this call (policy `plan.verify`). True: it may serve (it
    passed, or the check cannot run here: warned and counted).
    False: it failed and the caller moves on to the next candidate (warned and counted).
    Raises `VerificationFailedError` when it failed and no fallback is allowed."""
    if (why := verify.cannot_run_here(call)) is not None:
        metrics.ATTENTION_VERIFICATIONS.labels(name, "skipped").inc()
        _warn_once(
            (name, UNVERIFIABLE),
            f"attnswitch: {name} serves {call.kind} unverified on this fingerprint: {why}, "
            "where its self-check cannot run; one eager call before tracing verifies it",
        )
        return True
    verdict = verify.check_before_use(name, call, plan.verify)
    if verdict is None:  # another thread verified it meanwhile
        return True
    metrics.ATTENTION_VERIFICATIONS.labels(name, verdict.status).inc()
    if verdict.passed:
        return True
    failure = verdict.failures[0]
    if no_fallback or last:
        why = "strict mode is on" if settings().strict else "no fallback is left"
        raise VerificationFailedError(
            f"{name}: failed its {verdict.kind} check for {call.kind} ({failure}) and {why}",
            verdict,
        )
    nxt = plan.candidates[plan.candidates.index(name) + 1]
    metrics.ATTENTION_FALLBACKS.labels(name, nxt).inc()
    _warn_once(
        (name, FAILED_CHECK),
        f"attnswitch: {name} failed its {verdict.kind} check on this fingerprint ({failure}); "
        f"quarantined, falling back to {nxt}. `attnswitch conformance --backend {name}` "
        "requalifies it",
    )
    return False


def backends() -> list[Any]:
    """Every registered backend (`.name`, `.framework`, `.unavailable()`)."""
    return registry.backends()
