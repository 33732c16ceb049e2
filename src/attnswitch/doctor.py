"""What runs on this machine, as data: the attention backends with their verdicts (and,
when asked, their timings), the planner's choice for common calls, the engines with the
plans recorded here, and the versions of the libraries. `attnswitch doctor` prints it
(cli/), the service's `GET /v1/hardware` answers it without timings (service/routes.py):
one report, computed here once for both.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Reference shape for doctor's timing: B=2, S=256, H=8, D=64, float32.
TIMING_SHAPE = (2, 256, 8, 64)
TIMING_REPEATS = 5
TIMING_BUDGET_S = 1.0  # fewer calls for slow backends (the float64 oracle), at least one
FRAMEWORK_LIBRARIES = (
    "numpy",
    "torch",
    "jax",
    "jaxlib",
    "ml_dtypes",
    "transformers",
    "flash-attn",
    "flash-attn-3",
)


def default_device(framework: str) -> str:
    """Where `framework` puts arrays by default: torch `cuda` when a GPU is visible, jax its
    default backend (`cpu`, `gpu`, `tpu`), else `cpu`."""
    if framework == "torch":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if framework == "jax":
        import jax

        return jax.default_backend()
    return "cpu"


def doctor_report(timing: bool = True, timing_all: bool = False) -> dict[str, Any]:
    """What `attnswitch doctor --json` prints (the service's `GET /v1/hardware` gives it
    without timings): versions, the verification policy, each attention backend with its
    verdict, the planner's choice for common calls, the engines and their recorded plans."""
    from attnswitch.kernels.plan import verify_policy

    return {
        "versions": versions(),
        "verify": verify_policy(),
        "backends": backend_rows(timing, timing_all),
        "plans": plan_rows(),
        "engines": engines_report(),
    }


def versions() -> dict[str, str]:
    import platform
    from importlib import metadata

    from attnswitch._version import __version__

    out = {"python": platform.python_version(), "attnswitch": __version__}
    for lib in FRAMEWORK_LIBRARIES:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = "-"
    return out


def backend_rows(timing: bool, timing_all: bool) -> list[dict]:
    from attnswitch.kernels import conformance as conf
    from attnswitch.kernels import registry, verdicts

    rows = []
    for b in registry.backends():
        row: dict[str, Any] = {
            "backend": b.name,
            "framework": b.framework,
            "available": True,
            "why": None,
            "device": None,
            "verdict": None,
            "verification": None,
            "median_ms": None,
            "timing_note": None,
        }
        rows.append(row)
        if (why := b.unavailable()) is not None:
            row.update(available=False, why=why)
            continue
        try:
            where = default_device(b.framework)
            dev = conf.device_info(b.name, where)
            row["device"] = dev.label
            standing = verdicts.standing(b, dev)
            row["verdict"], row["verification"] = standing.status, standing.as_dict()
        except Exception as exc:
            row["why"] = f"device check failed: {type(exc).__name__}: {exc}"
            continue
        if not timing:
            continue
        slow = getattr(b, "slow_first_call", None)  # third-party backends may lack it
        if slow and not timing_all:
            row["timing_note"] = f"not timed: {slow}; --timing-all"
            continue
        row["median_ms"], row["timing_note"] = time_backend(b, where)
    return rows


def time_backend(b: Any, where: str) -> tuple[float | None, str | None]:
    """Median milliseconds of up to `TIMING_REPEATS` calls (within `TIMING_BUDGET_S`) after
    one warm-up, or None and a note why not."""
    import numpy as np

    from attnswitch.kernels import conformance as conf
    from attnswitch.kernels.contract import validate
    from attnswitch.kernels.execute import timed_run

    rng = np.random.default_rng(0)
    any_input = getattr(getattr(b, "caps", None), "accepts_all_frameworks", False)
    fw = "numpy" if any_input else b.framework
    q, k, v = (
        conf.to_device(rng.standard_normal(TIMING_SHAPE, dtype=np.float32), fw, where)
        for _ in range(3)
    )
    call = validate(q, k, v)
    if reasons := b.declines(call):
        return None, "declines the timing shape: " + "; ".join(reasons)

    def once() -> float:
        return timed_run(b.name, q, k, v, call)

    try:
        first = once()
        times = [once()]
        while len(times) < TIMING_REPEATS and sum(times) < TIMING_BUDGET_S:
            times.append(once())
    except Exception as exc:
        return None, f"failed: {type(exc).__name__}: {exc}"
    notes = [f"median of {len(times)}"] if len(times) < TIMING_REPEATS else []
    if first > 2 * max(times):
        notes.append(f"first call {first * 1e3:.0f} ms")
    return float(np.median(times)) * 1e3, "; ".join(notes) or None


def plan_calls(framework: str) -> list[tuple[str, dict]]:
    """Three common calls, as arrays of `framework` on its default device (zeros: planning
    reads shapes only)."""
    import numpy as np

    from attnswitch.kernels import conformance as conf

    where = default_device(framework)
    dtype = np.float32
    put = lambda x: conf.to_device(x, framework, where)  # noqa: E731
    zeros = lambda *shape: put(np.zeros(shape, dtype))  # noqa: E731
    lengths = np.array([128, 100, 77, 128, 40, 128, 9, 128])
    padding = put(np.arange(128)[None, :] < lengths[:, None])
    cu = put(np.array([0, 100, 350, 400], dtype=np.int32))
    return [
        (
            "encoder self-attention, key padding (B=8 S=128 H=12 D=64)",
            dict(
                q=zeros(8, 128, 12, 64),
                k=zeros(8, 128, 12, 64),
                v=zeros(8, 128, 12, 64),
                key_padding_mask=padding,
            ),
        ),
        (
            "decode step, causal GQA 32/8 (Sq=1 Sk=1024 D=128)",
            dict(
                q=zeros(4, 1, 32, 128),
                k=zeros(4, 1024, 8, 128),
                v=zeros(4, 1024, 8, 128),
                causal=True,
            ),
        ),
        (
            "packed varlen batch, 3 sequences (T=400 H=12 D=64)",
            dict(
                q=zeros(400, 12, 64),
                k=zeros(400, 12, 64),
                v=zeros(400, 12, 64),
                cu_seqlens_q=cu,
                cu_seqlens_k=cu,
            ),
        ),
    ]


def plan_rows() -> list[dict]:
    """For each common call and each installed framework: the plan's choice and its source."""
    from importlib.util import find_spec

    from attnswitch.kernels.plan import explain

    frameworks = ["numpy"] + [f for f in ("torch", "jax") if find_spec(f) is not None]
    rows: dict[str, dict] = {}
    for fw in frameworks:
        try:
            calls = plan_calls(fw)
        except Exception as exc:
            for row in rows.values():
                row["plans"][fw] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        for label, kwargs in calls:
            row = rows.setdefault(label, {"call": label, "plans": {}})
            plan = explain(**kwargs)
            row["plans"][fw] = {
                "chosen": plan.chosen,
                "source": plan.source,
                "fallbacks": list(plan.fallbacks),
                "kind": plan.call.kind,
            }
    return list(rows.values())


def engines_report() -> dict[str, Any]:
    """Every engine with whether it runs here, and the engine plans recorded for this
    machine (measuring is `attnswitch engines`' job: doctor measures no engine)."""
    from attnswitch.engines import PRECISIONS, engines_status, explain_engine, explain_precision

    try:
        chosen = explain_precision(None, "auto", measure=False)
        precision_plan = None if chosen is None else chosen.to_dict()
    except Exception as exc:  # doctor reports, it does not crash
        precision_plan = {"error": f"{type(exc).__name__}: {exc}"}
    plans = {}
    for precision in PRECISIONS:
        try:
            plan = explain_engine(None, "auto", precision, measure=False)
        except Exception as exc:  # doctor reports, it does not crash
            plans[precision] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        if plan is not None:
            plans[precision] = plan.to_dict()
    return {
        "status": [dataclasses.asdict(e) for e in engines_status()],
        "plans": plans,
        "precision": precision_plan,
    }
