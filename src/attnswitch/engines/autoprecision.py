"""`precision="auto"`: the fastest precision that keeps float32's answers, chosen by
measurement on this machine and remembered, as `engine="auto"` is (`autopick`).

On first use per (machine, model, engine request, library versions):
1. Candidates (`candidates`): every precision the chip runs natively. fp32 always; bf16
   where the CPU has AMX-BF16 or AVX-512 BF16 (read from the CPU's flags, since the CPU
   model changes between machines), or on a GPU or TPU; int8 only when
   `$ATTNSWITCH_AUTO_INT8=1` and the CPU has int8 dot products (AMX-INT8, AVX-512 VNNI or
   AVX-VNNI). Static int8 measured below the 0.999 cosine auto needs on the default model
   (docs/architecture.md, "Precision"), so by default auto does not spend a quantisation
   on it; `precision="int8"` offers it by name.
2. Each candidate's engine is the engine plan's pick for that precision (measured by
   `autopick` when not recorded). Its vectors of the parity texts (the calibration texts and
   the built-in retrieval check) are compared with the torch float32 ones: parity needs a
   minimum cosine >= `AUTO_PARITY` and the same top-10 passages for every query.
3. Speed: chunks/s over the calibration texts, median of `ROUNDS` rounds in rotated order.
4. The pick (`pick`): the fastest candidate with parity; fp32 when none has it. A single
   candidate (fp32 on a CPU without native bf16) is the pick without steps 2 and 3: timing
   it against nothing cost a first run about 15 s for the same answer.

The table is written to `precisions.json` in the cache directory; later processes read it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from attnswitch.engines import autopick, registry, runtime
from attnswitch.engines.model import ModelSpec, model_fingerprint
from attnswitch.kernels.cache import JsonTable, provenance_key

AUTO_PARITY = 0.999
ROUNDS = 3
REVISION = 1  # bump when the candidates, the check or the method change
ENV_AUTO_INT8 = runtime.ENVIRONMENT["auto_int8"]
TABLE = "precisions.json"
_TABLE = JsonTable(TABLE)
FALLBACK = "fp32"


@dataclass
class PrecisionRow:
    """One precision's outcome. status: "measured", "not native" (the chip has no native
    instructions for it, or auto does not try it), "failed" (no engine serves it, or its
    engine raised), "only candidate" (no other precision is a candidate here: the pick,
    not timed). engine: the engine it runs on. chunks_per_s: median over rounds;
    min_cosine and top10: against the torch float32 vectors (see `autopick.judge`)."""

    precision: str
    status: str
    reason: str | None = None
    engine: str | None = None
    detail: str = ""
    chunks_per_s: float | None = None
    rates: list[float] = field(default_factory=list)
    min_cosine: float | None = None
    top10: float | None = None
    parity: bool | None = None


@dataclass
class PrecisionPlan:
    """The precision `precision="auto"` runs here, and why each other one was not picked."""

    chosen: str
    rows: list[PrecisionRow]
    source: str  # "measured now", "recorded <date>", "fixed (...)"
    key: str = ""
    stale: str | None = None  # measured now: what changed since the last pick, if any

    def row(self, precision: str) -> PrecisionRow | None:
        return next((r for r in self.rows if r.precision == precision), None)

    def why_not(self) -> dict[str, str]:
        out = {}
        best = self.row(self.chosen)
        for r in self.rows:
            if r.precision == self.chosen:
                continue
            if r.status != "measured":
                out[r.precision] = f"{r.status}: {r.reason}"
            elif not r.parity:
                out[r.precision] = (
                    f"failed parity on {r.engine}: {autopick.parity_figures(r, AUTO_PARITY)}"
                )
            elif best is not None and best.chunks_per_s and r.chunks_per_s:
                out[r.precision] = (
                    f"slower: {r.chunks_per_s:.1f} chunks/s on {r.engine}, "
                    f"{r.chunks_per_s / best.chunks_per_s:.2f}x the pick"
                )
        return out

    def reason(self) -> str:
        """One line: why the pick was made."""
        row = self.row(self.chosen)
        if row is not None and row.status == "only candidate":
            return f"the only precision this chip runs natively, {self.source}"
        if row is None or row.chunks_per_s is None:
            return self.source
        if not row.parity:
            return f"no precision kept parity, float32 is the reference; {self.source}"
        return (
            f"fastest with parity on {row.engine} ({row.chunks_per_s:.1f} chunks/s, "
            f"{autopick.parity_figures(row, AUTO_PARITY)}), {self.source}"
        )

    def __str__(self) -> str:
        lines = [f"precision plan: {self.chosen}  [{self.reason()}]"]
        for name, why in self.why_not().items():
            lines.append(f"  {name}: {why}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen,
            "reason": self.reason(),
            "source": self.source,
            "stale": self.stale,
            "why_not": self.why_not(),
            "rows": [asdict(r) for r in self.rows],
        }


def auto_int8() -> bool:
    """Whether auto tries int8 (`$ATTNSWITCH_AUTO_INT8`, the engines runtime's setting)."""
    return runtime.settings().auto_int8


def native(precision: str, device: str, flags: frozenset[str]) -> str | None:
    """Why `precision` is not a candidate of auto on `device` with CPU `flags`, or None."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        if device != "cpu" or {"amx_bf16", "avx512_bf16"} & flags:
            return None
        return "this CPU has no native bf16 (neither AMX-BF16 nor AVX-512 BF16)"
    if precision == "int8":
        if not auto_int8():
            return (
                f"auto does not try int8 (set ${ENV_AUTO_INT8}=1, or ask for "
                f"precision='int8'): static int8 stayed below {AUTO_PARITY} cosine on "
                f"the default model (docs/architecture.md)"
            )
        if device != "cpu":
            return f"int8 is offered on CPU only, not {device}"
        if not {"amx_int8", "avx512_vnni", "avx_vnni"} & flags:
            return "this CPU has no int8 dot products (AMX-INT8, AVX-512 VNNI or AVX-VNNI)"
        return None
    return f"unknown precision {precision!r}"


def candidates() -> tuple[list[str], list[PrecisionRow]]:
    """The precisions auto tries here, and rows for those it does not."""
    from attnswitch.engines.base import PRECISIONS
    from attnswitch.kernels.cache import cpu_flags

    device, flags = registry.host_device(), cpu_flags()
    able, rows = [], []
    for precision in PRECISIONS:
        why = native(precision, device, flags)
        if why is None:
            able.append(precision)
        else:
            rows.append(PrecisionRow(precision, "not native", why))
    return able, rows


def pick(rows: list[PrecisionRow]) -> str:
    """The only candidate, else the fastest measured precision with parity; fp32 when none
    has it."""
    only = [r for r in rows if r.status == "only candidate"]
    if only:
        return only[0].precision
    ok = sorted(
        (r for r in rows if r.status == "measured" and r.parity),
        key=lambda r: -(r.chunks_per_s or 0.0),
    )
    return ok[0].precision if ok else FALLBACK


def table_subject(spec: ModelSpec, engine: str) -> dict[str, Any]:
    """What a precision pick is about: this machine, the model, the engine request, and
    every engine's libraries and build revisions for each precision (an int8 model's
    recipe and calibration set), so an upgrade of any of them measures again."""
    from attnswitch._version import __version__
    from attnswitch.engines.base import PRECISIONS

    return {
        "machine": autopick.machine(),
        "model": model_fingerprint(spec.path),
        "engine": engine,
        "attnswitch": __version__,
        "revision": REVISION,
        "autopick": autopick.REVISION,
        "auto_int8": auto_int8(),
        "engines": {
            e.name: {
                **e.versions(),
                **{
                    f"{p}.{name}": value
                    for p in PRECISIONS
                    for name, value in e.build_revisions(p).items()
                },
            }
            for e in registry.engines()
        },
    }


def table_key(spec: ModelSpec, engine: str) -> str:
    return provenance_key(table_subject(spec, engine))


def recorded(spec: ModelSpec, engine: str) -> PrecisionPlan | None:
    """The plan recorded for this machine, model, engine request and versions, if any."""
    key = table_key(spec, engine)
    entry = _TABLE.data().get(key)
    if not entry:
        return None
    try:
        rows = [PrecisionRow(**r) for r in entry["rows"]]
    except (KeyError, TypeError):
        return None
    return PrecisionPlan(pick(rows), rows, f"recorded {entry.get('when')}", key)


Progress = Callable[[int, int, str], None]


def measure(
    spec: ModelSpec,
    engine: str,
    plan_for: Callable[[str, Progress | None], Any],
    load: Callable[[str, str], Any],
    reference: Callable[[], Any],
    progress: Progress | None = None,
) -> PrecisionPlan:
    """Measure every candidate precision, record the table, and return the plan.

    plan_for(precision, progress) -> the `autopick.EnginePlan` of `engine` for it (measured
    by the caller when not recorded, reporting to `progress`); load(engine name, precision)
    -> Encoder (cached by the caller); reference() -> the torch float32 Encoder.
    progress(done, total, what), when given, is called before each step (the engine plans'
    own steps are passed on with the precision before their names) and once at the end
    (done == total). A single candidate is the pick without a measurement (fp32 on a CPU
    without native bf16: there is nothing to choose between)."""
    able, rows = candidates()
    report = progress or (lambda done, total, what: None)
    if len(able) <= 1:
        chosen = able[0] if able else FALLBACK
        rows.append(PrecisionRow(chosen, "only candidate", "no other precision runs natively here"))
        return _record(spec, engine, rows, "measured now")
    total, done = 1 + len(able) + ROUNDS * len(able), 0
    report(done, total, "reference: torch float32 vectors")
    ref = reference()
    check = autopick.CheckIds.of(ref, spec)
    want = check.vectors(ref)
    ids = check.ids[: check.calibration]
    done += 1
    loaded: dict[str, Any] = {}
    for precision in able:
        row = PrecisionRow(precision, "measured")
        try:
            engine_plan = plan_for(
                precision,
                lambda d, t, what, p=precision: report(done, total, f"{p} engines: {what}"),
            )
            if engine_plan.chosen is None:
                row.status, row.reason = "failed", f"no engine serves it: {engine_plan}"
                rows.append(row)
                done += 1
                continue
            row.engine = engine_plan.chosen
            report(done, total, f"{precision} on {row.engine}: load and parity check")
            encoder = load(row.engine, precision)
            row.min_cosine, row.top10, row.parity = autopick.judge(
                check.vectors(encoder), want, AUTO_PARITY
            )
            row.detail = encoder.describe()
            loaded[precision] = encoder
        except Exception as exc:  # a precision that cannot run is a reason, not a crash
            row.status, row.reason = "failed", f"{type(exc).__name__}: {exc}"
        done += 1
        rows.append(row)
    measured = [r for r in rows if r.precision in loaded]
    for round_ in range(ROUNDS):
        shift = round_ % max(len(measured), 1)
        for row in measured[shift:] + measured[:shift]:
            report(
                done,
                total,
                f"{row.precision} on {row.engine}: timing round {round_ + 1} of {ROUNDS}",
            )
            start = time.perf_counter()
            loaded[row.precision].encode_ids(ids)
            row.rates.append(len(ids) / (time.perf_counter() - start))
            done += 1
    for row in measured:
        row.chunks_per_s = statistics.median(row.rates)
    plan = _record(spec, engine, rows, "measured now")
    report(total, total, f"picked {plan.chosen}")
    return plan


def _record(spec: ModelSpec, engine: str, rows: list[PrecisionRow], source: str) -> PrecisionPlan:
    """The plan of `rows` (in the order of `PRECISIONS`), written to the table."""
    from attnswitch.engines.base import PRECISIONS

    rows.sort(key=lambda r: PRECISIONS.index(r.precision))
    subject = table_subject(spec, engine)
    stale = _TABLE.why_stale(subject, ("machine", "model", "engine"))
    key = _TABLE.record(
        subject,
        {
            "when": time.strftime("%Y-%m-%d %H:%M"),
            "engine": engine,
            "rows": [asdict(r) for r in rows],
        },
    )
    return PrecisionPlan(pick(rows), rows, source, key, stale)


__all__ = [
    "AUTO_PARITY",
    "ENV_AUTO_INT8",
    "PrecisionPlan",
    "PrecisionRow",
    "candidates",
    "measure",
    "native",
    "pick",
    "recorded",
]
