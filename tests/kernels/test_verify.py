"""First-use verification and verdict provenance.

A backend whose answers changed (here: torch-sdpa scaled by 1.01, as a silently changed
library would be) never serves a call from a fresh cache directory: its first-use check
fails, it is quarantined with a one-time warning and a counter, and the call gets the
answer of the next candidate; strict mode raises instead. The policy knob, checks inside
`jax.jit`, and the provenance rules (a quick or first-use pass never clears a full-grid
failure) are pinned here too.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import attnswitch as asw
from attnswitch.kernels import arrays, conformance, plan, registry, verdicts, verify
from attnswitch.kernels.arrays import CPU
from attnswitch.kernels.backends.reference import Reference
from attnswitch.kernels.contract import Call

_names = itertools.count()


def _inputs(dtype: str = "float32", **kw: Any) -> dict[str, Any]:
    """Arguments of a call no conformance case has (so the call's own answer is judged)."""
    case = conformance.Case("call", dtype=dtype, **{"seqlen_q": 37, "seqlen_k": 53, **kw})
    return conformance.make_inputs(case)


def _torch(inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        n: arrays.numpy_to(x, "torch") if isinstance(x, np.ndarray) else x
        for n, x in inputs.items()
    }


def _attend(inputs: dict[str, Any], framework: str = "torch") -> Any:
    args = dict(_torch(inputs) if framework == "torch" else inputs)
    return asw.attention(args.pop("q"), args.pop("k"), args.pop("v"), **args)


def _messages(caught: list[warnings.WarningMessage], text: str) -> list[str]:
    return [str(w.message) for w in caught if text in str(w.message)]


@pytest.fixture
def scaled_sdpa(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """torch-sdpa returning 1.01x its answer, from an empty cache directory. torch-flex is
    moved behind torch-math so that the fallback does not compile for a minute; yields a
    one-element list counting the calls the scaled backend ran."""
    sdpa = registry.get("torch-sdpa")
    original = type(sdpa).run
    runs = [0]

    def scaled(q: Any, k: Any, v: Any, call: Call) -> Any:
        runs[0] += 1
        return original(sdpa, q, k, v, call) * 1.01

    monkeypatch.setattr(sdpa, "run", scaled)
    monkeypatch.setitem(
        plan.PRIORITY, "cpu", tuple(n for n in plan.PRIORITY["cpu"] if n != "torch-flex")
    )
    yield runs


CALLS = {
    "plain": {},
    "causal-gqa": dict(causal=True, heads_q=8, heads_kv=2),
    "key-padding": dict(key_padding=True),
    "window": dict(window=(16, 4)),
}


@pytest.mark.parametrize("features", list(CALLS.values()), ids=list(CALLS))
@pytest.mark.parametrize("framework", ["torch", "numpy"])
def test_scaled_backend_never_serves_a_call(
    scaled_sdpa: list[int], framework: str, features: dict
) -> None:
    inputs = _inputs(**features)
    planned = asw.explain(**(_torch(inputs) if framework == "torch" else inputs))
    assert planned.chosen == "torch-sdpa"
    before = asw.stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = _attend(inputs, framework)
        again = _attend(inputs, framework)
    after = asw.stats()

    # The answer is right: within the conformance rule of the float64 oracle.
    for out in (first, again):
        error, bound = conformance.judge(out, inputs)
        assert error <= bound, (error, bound)
    # torch-sdpa ran only inside its self-check, never for the caller.
    assert after["calls"].get("torch-sdpa", 0) == before["calls"].get("torch-sdpa", 0)
    assert scaled_sdpa[0] >= 1
    (message,) = _messages(caught, "torch-sdpa failed its first-use check")
    assert f"quarantined, falling back to {planned.candidates[1]}" in message
    assert "error" in message and "> bound" in message
    for counter in ("verification_failures", "fallbacks"):
        assert after[counter]["torch-sdpa"] == before[counter].get("torch-sdpa", 0) + 1, counter
    # Quarantined for every later call, with the failing case, its error and bound shown.
    p = asw.explain(**_torch(_inputs(causal=True)))
    assert p.status("torch-sdpa") == plan.QUARANTINED
    (reason,) = p.reasons("torch-sdpa")
    assert "failed conformance (first-use)" in reason and "> bound" in reason


def test_strict_mode_raises_instead(scaled_sdpa: list[int]) -> None:
    asw.configure(strict=True)
    with pytest.raises(plan.VerificationFailedError, match="strict mode is on") as info:
        _attend(_inputs())
    assert not info.value.verdict.passed and info.value.verdict.kind == verdicts.FIRST_USE
    assert verdicts.status(registry.get("torch-sdpa"), CPU) == verdicts.FAIL


def test_policy_off_lets_the_change_through(
    scaled_sdpa: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The knob does what it says: with verification off the scaled answer comes back."""
    monkeypatch.setenv("ATTNSWITCH_VERIFY", "off")
    inputs = _inputs()
    error, bound = conformance.judge(_attend(inputs), inputs)
    assert error > 10 * bound
    assert asw.explain(**_torch(inputs)).verify == "off"


def test_policy_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNSWITCH_VERIFY", "sometimes")
    with pytest.raises(
        asw.AttentionInputError,
        match="ATTNSWITCH_VERIFY: expected one of first-use, off, full, got 'sometimes'",
    ):
        _attend(_inputs())
    with pytest.raises(asw.AttentionInputError, match="verify: expected one of"):
        asw.configure(verify="never")


# ---- a counting backend: what runs, when, and what is recorded ---------------------------


class Counting(Reference):
    """The float64 oracle under another name, counting its runs; `scale` breaks it."""

    def __init__(self, name: str, scale: float = 1.0, version: str = "1.0"):
        self.name, self.scale, self.version, self.runs = name, scale, version, 0

    def versions(self) -> dict[str, str]:
        return {"countinglib": self.version}

    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        self.runs += 1
        out = super().run(q, k, v, call)
        return out if self.scale == 1.0 else out * self.scale


@pytest.fixture
def counting(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counting]:
    """A Counting backend first in the CPU order, registered for one test."""
    backend = Counting(f"counting-{next(_names)}")
    registry.register(backend)
    monkeypatch.setitem(plan.PRIORITY, "cpu", (backend.name, *plan.PRIORITY["cpu"]))
    yield backend
    registry.unregister(backend.name)


def _replace(backend: Counting, **kw: Any) -> Counting:
    new = Counting(backend.name, **kw)
    registry.register(new, replace=True)
    return new


def test_first_use_checks_once_per_feature_set(counting: Counting, cache_dir: Path) -> None:
    inputs = _inputs(key_padding=True)
    p = asw.explain(**inputs)
    assert p.chosen == counting.name and p.unverified[0] == counting.name
    _attend(inputs, "numpy")
    checked = counting.runs - 1
    assert checked >= 1  # the self-check ran before the call
    (verdict,) = verdicts.STORE.verdicts(counting, CPU)
    assert verdict.passed and verdict.kind == verdicts.FIRST_USE
    assert verdict.fingerprint["cases"].startswith("first-use-")
    assert verdict.cases == len(verdict.labels) == checked
    covered = set().union(
        *(conformance.case_features(conformance.case_by_label(label)) for label in verdict.labels)
    )
    assert conformance.call_features(asw.explain(**inputs).call) <= covered
    stored = json.loads((cache_dir / "verdicts.json").read_text())
    assert [e["kind"] for e in stored.values()] == ["first-use"]

    runs = counting.runs
    _attend(inputs, "numpy")  # covered now: no check
    _attend(_inputs(), "numpy")  # fewer features: covered too
    assert counting.runs == runs + 2
    assert counting.name not in asw.explain(**inputs).unverified
    _attend(_inputs(causal=True), "numpy")  # a new feature: checked first
    assert counting.runs > runs + 3
    assert len(verdicts.STORE.verdicts(counting, CPU)) == 2


def test_new_fingerprint_is_checked_again(counting: Counting) -> None:
    inputs = _inputs()
    _attend(inputs, "numpy")
    assert counting.name not in asw.explain(**inputs).unverified
    upgraded = _replace(counting, version="2.0")  # a library upgrade
    assert counting.name in asw.explain(**inputs).unverified
    _attend(inputs, "numpy")
    assert upgraded.runs >= 2


def test_cases_cover_the_call_features() -> None:
    """The self-check covers dtype, layout, causal, window, softcap, masks, GQA, lse, decode
    and the grid's head dims, with cases of the call's dtype."""
    sdpa, math_ = registry.get("torch-sdpa"), registry.get("torch-math")
    calls = [
        asw.explain(**_torch(_inputs(dtype, **kw))).call
        for dtype in ("float32", "bfloat16", "float16")
        for kw in (
            {},
            dict(causal=True, heads_q=8, heads_kv=2, head_dim=128),
            dict(window=(8, 0), key_padding=True),
            dict(masked_row=True),
            dict(return_lse=True, packed=((5, 9), (0, 3))),
            dict(seqlen_q=1, causal=True),
        )
    ]
    for call in calls:
        for backend in (sdpa, math_):
            cases, uncovered = verify.select_cases(backend, call)
            got = set().union(*(conformance.case_features(c) for c in cases))
            want = conformance.call_features(call)
            assert want - got == set(uncovered), (backend.name, call.kind)
            assert all(c.dtype == call.dtype for c in cases)
            assert not any(backend.declines(verify._case_call(c, call)) for c in cases)
            if backend is math_:  # serves every feature: nothing left uncovered
                assert not uncovered, call.kind
    plain = asw.explain(**_torch(_inputs())).call
    (case,) = verify.select_cases(sdpa, plain)[0]
    assert not case.causal and case.window is None and not case.key_padding  # its own path


def test_policy_full_runs_the_grid_once(counting: Counting, monkeypatch) -> None:
    small = conformance.GRID[:2]
    monkeypatch.setattr(conformance, "GRID", small)
    monkeypatch.setattr(conformance, "SPECIAL", ())
    assert asw.configure(verify="full")["verify"] == "full"
    monkeypatch.setenv("ATTNSWITCH_VERIFY", "off")  # configure() wins over the environment
    _attend(_inputs(), "numpy")
    (verdict,) = verdicts.STORE.verdicts(counting, CPU)
    assert verdict.kind == verdicts.FULL and verdict.cases == len(small) * 2
    assert verdicts.standing(counting, CPU).full
    runs = counting.runs
    _attend(_inputs(causal=True, softcap=5.0), "numpy")  # full grid: every call is covered
    assert counting.runs == runs + 1


def test_explicit_request_is_neither_checked_nor_quarantined(counting: Counting) -> None:
    broken = _replace(counting, scale=1.01)
    inputs = _inputs()
    out = asw.attention(**inputs, backend=counting.name)
    assert broken.runs == 1  # no check: the caller asked for this backend by name
    error, bound = conformance.judge(out, inputs)
    assert error > bound


def test_failure_inside_check_falls_back_and_later_calls_skip_it(counting: Counting) -> None:
    broken = _replace(counting, scale=1.01)
    inputs = _inputs()
    with pytest.warns(RuntimeWarning, match=f"{counting.name} failed its first-use check"):
        out = _attend(inputs, "numpy")
    error, bound = conformance.judge(out, inputs)
    assert error <= bound
    runs = broken.runs
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        _attend(_inputs(causal=True), "numpy")
    assert broken.runs == runs


def test_each_warning_reason_warns_once_on_its_own(counting: Counting) -> None:
    """ "Failed its first-use check" (fallback) and "runs only because it was requested"
    (explicit request) are different news about one backend: the first must not silence
    the second (they once shared a warn-once key), and each still warns only once."""
    _replace(counting, scale=1.01)
    with pytest.warns(RuntimeWarning, match=f"{counting.name} failed its first-use check"):
        _attend(_inputs(), "numpy")
    requested = f"{counting.name} failed conformance for this fingerprint and runs only"
    with pytest.warns(RuntimeWarning, match=requested):
        asw.attention(**_inputs(), backend=counting.name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # each reason warned once only
        asw.attention(**_inputs(), backend=counting.name)
        _attend(_inputs(causal=True), "numpy")


# ---- provenance: which verdict stands --------------------------------------------------


@pytest.fixture
def small_grid(monkeypatch: pytest.MonkeyPatch) -> tuple[conformance.Case, ...]:
    """A grid of three cases (one causal) so full runs take a moment."""
    grid = tuple(
        c for c in conformance.GRID if c.name in ("plain-113x203", "causal-203x113", "padding")
    )
    monkeypatch.setattr(conformance, "GRID", grid)
    monkeypatch.setattr(conformance, "SPECIAL", ())
    monkeypatch.setattr(conformance, "QUICK", ("plain-113x203",))
    return grid


class DropsCausal(Counting):
    def run(self, q: Any, k: Any, v: Any, call: Call) -> Any:
        return super().run(q, k, v, dataclasses.replace(call, causal=False))


def _as(backend: Counting, cls: type) -> Counting:
    new = cls(backend.name)
    registry.register(new, replace=True)
    return new


def test_quick_or_first_use_pass_never_clears_a_full_grid_failure(
    counting: Counting, small_grid: Any
) -> None:
    broken = _as(counting, DropsCausal)
    verdicts.run([broken.name], conformance.cases())
    standing = verdicts.standing(broken, CPU)
    assert standing.status == verdicts.FAIL and standing.failure_kind == verdicts.FULL
    assert standing.failure.startswith("causal-203x113/")

    fixed = _as(counting, Counting)  # same fingerprint, answers right again
    verdicts.run([fixed.name], conformance.cases(quick=True))
    assert verdicts.status(fixed, CPU) == verdicts.FAIL  # quick pass: still quarantined
    verdicts.run([fixed.name], [conformance.case_by_label("causal-203x113/float32")])
    assert verdicts.status(fixed, CPU) == verdicts.FAIL  # passing the failed case alone: too
    # A call never checks a quarantined backend (so no first-use pass can be recorded).
    p = asw.explain(**_inputs())
    assert p.status(fixed.name) == plan.QUARANTINED and fixed.name not in p.unverified
    _attend(_inputs(), "numpy")
    assert fixed.runs == 3  # only the two conformance runs above ran it

    verdicts.run([fixed.name], conformance.cases())  # a full pass clears it
    standing = verdicts.standing(fixed, CPU)
    assert standing.status == verdicts.PASS and standing.full
    assert asw.explain(**_inputs()).chosen == fixed.name


def test_full_pass_clears_quick_and_first_use_failures(counting: Counting, small_grid) -> None:
    broken = _as(counting, DropsCausal)
    with pytest.warns(RuntimeWarning, match="failed its first-use check"):
        _attend(_inputs(causal=True), "numpy")
    assert verdicts.standing(broken, CPU).failure_kind == verdicts.FIRST_USE
    verdicts.run([broken.name], conformance.cases(quick=True))  # quick passes (no causal)
    assert verdicts.status(broken, CPU) == verdicts.FAIL
    fixed = _as(counting, Counting)
    verdicts.run([fixed.name], conformance.cases())
    assert verdicts.standing(fixed, CPU).full


def test_partial_pass_is_not_a_full_pass(counting: Counting, small_grid) -> None:
    verdicts.run([counting.name], conformance.cases(quick=True))
    standing = verdicts.standing(counting, CPU)
    assert standing.status == verdicts.PASS and not standing.full
    assert standing.kinds == (verdicts.QUICK,)
    assert standing.summary == "pass (quick: plain-113x203/bfloat16, plain-113x203/float32)"
    assert verdicts.standing(counting, CPU).covers({"dtype:float32", "layout:dense"})
    assert not standing.covers({"dtype:float32", "layout:dense", "causal"})


def test_verdicts_hold_in_memory_when_the_cache_cannot_be_written(
    counting: Counting, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory should be")
    monkeypatch.setenv("ATTNSWITCH_CACHE_DIR", str(blocked))
    with pytest.warns(RuntimeWarning, match="hold for this process only"):
        _attend(_inputs(), "numpy")
    runs = counting.runs
    _attend(_inputs(), "numpy")
    assert counting.runs == runs + 1  # not checked again


# ---- traced calls ----------------------------------------------------------------------


def test_check_runs_eagerly_inside_jax_jit(cache_dir: Path, monkeypatch) -> None:
    """Under jax.jit the check runs on concrete arrays at trace time, before the traced call
    is planned onto the backend: a scaled jax-xla is caught there too."""
    jax = pytest.importorskip("jax")
    xla = registry.get("jax-xla")
    original = type(xla).run
    monkeypatch.setattr(xla, "run", lambda q, k, v, call: original(xla, q, k, v, call) * 1.01)
    monkeypatch.setitem(plan.PRIORITY, "cpu", ("jax-xla", "jax-blockwise", "reference"))
    inputs = _inputs()
    q, k, v = (jax.numpy.asarray(inputs[n]) for n in "qkv")
    with pytest.warns(RuntimeWarning, match="jax-xla failed its first-use check"):
        out = jax.jit(lambda q, k, v: asw.attention(q, k, v))(q, k, v)
    error, bound = conformance.judge(out, inputs)
    assert error <= bound
    assert verdicts.status(xla, CPU) == verdicts.FAIL
    assert verdicts.standing(registry.get("jax-blockwise"), CPU).status == verdicts.PASS


def test_under_torch_compile_the_op_checks_when_it_first_runs(scaled_sdpa: list[int]) -> None:
    """A compiled graph holds the call as one custom op; the op's body runs eagerly on real
    tensors, so the first-use check runs there and the scaled backend never serves."""
    inputs = _inputs()
    args = _torch(inputs)
    compiled = torch.compile(
        lambda q, k, v: asw.attention(q, k, v), fullgraph=True, backend="aot_eager"
    )
    before = asw.stats()["calls"].get("torch-sdpa", 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(args["q"], args["k"], args["v"])
    error, bound = conformance.judge(out, inputs)
    assert error <= bound, (error, bound)
    assert _messages(caught, "torch-sdpa failed its first-use check")
    assert not _messages(caught, "unverified")
    assert asw.stats()["calls"].get("torch-sdpa", 0) == before and scaled_sdpa[0] >= 1


def test_where_the_check_cannot_run_the_call_is_served_warned_and_counted(
    counting: Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside a torch.compile trace (or a CUDA graph capture) the check's own arrays would be
    traced: the backend serves unverified, with a warning and a counter."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    before = asw.stats()["unverified"].get(counting.name, 0)
    with pytest.warns(RuntimeWarning, match="traced by torch.compile"):
        _attend(_inputs(), "numpy")
    assert asw.stats()["unverified"][counting.name] == before + 1
    assert counting.runs == 1 and verdicts.STORE.verdicts(counting, CPU) == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA)")
def test_scaled_backend_never_serves_on_gpu(
    scaled_sdpa: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs on the call's own device: CUDA arrays are checked on CUDA."""
    for kind in ("cuda", "cuda-sm8x"):
        monkeypatch.setitem(plan.PRIORITY, kind, ("torch-sdpa", "torch-math", "reference"))
    inputs = _inputs("bfloat16")
    args = {n: x.cuda() if isinstance(x, torch.Tensor) else x for n, x in _torch(inputs).items()}
    device = asw.explain(**args).call.device
    with pytest.warns(RuntimeWarning, match="torch-sdpa failed its first-use check"):
        out = asw.attention(**args)
    error, bound = conformance.judge(out.cpu(), inputs)
    assert error <= bound
    (verdict,) = verdicts.STORE.verdicts(registry.get("torch-sdpa"), device)
    assert verdict.fingerprint["device"] == torch.cuda.get_device_name() and not verdict.passed


def test_a_first_use_check_inside_bf16_autocast_checks_in_the_case_s_own_dtype(
    cache_dir: Path,
) -> None:
    """A float32 call made inside torch's bf16 autocast (the torch engine's bf16 precision
    runs the model so) does not fail the backend's first-use check on the autocast's dtype:
    the check runs its float32 cases in float32, passes, and nothing is quarantined."""
    inputs = _torch(_inputs())
    name = asw.explain(**inputs).chosen
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            asw.attention(inputs.pop("q"), inputs.pop("k"), inputs.pop("v"), **inputs)
    assert not _messages(caught, "failed its first-use check"), _messages(caught, "failed")
    (verdict,) = verdicts.STORE.verdicts(registry.get(name), CPU)
    assert verdict.passed and verdict.kind == verdicts.FIRST_USE
