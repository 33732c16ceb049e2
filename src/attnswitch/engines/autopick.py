"""`engine="auto"`: the fastest engine that keeps the reference's answers, chosen by
measurement on this machine and remembered.

On first use per (machine, model, precision, engine library versions), every engine that
can serve here encodes a fixed calibration set (`CALIBRATION`: documentation-like texts of
two lengths, deterministic) and the passages and queries of the built-in retrieval check
(`retrieval_check`). Each is checked against the reference engine's float32 vectors
(torch): the minimum cosine over those texts must reach `PARITY[precision]`, and every
query of the retrieval check must find the same top-10 passages (`top10` is the fraction
that do; parity needs 1.0). Rates are medians over `ROUNDS`
rounds in rotated order, so a change of machine load hits all engines alike. The table is
written to `engines.json` in the cache directory; later processes read the pick from it.
`pick(rows)` is a pure function of the recorded rows, so the choice can be re-derived from
the file.

`EnginePlan` shows it like an attention plan: the pick, the order of fallbacks, and for
every other engine why not (unavailable, declined, failed parity, slower, failed to run).

A named engine's parity is known without the reference once it was measured here
(`known_parity`: its row of the recorded plan, else its own recorded parity check), so a
process that uses a recorded pick loads that engine only. `measure` reports its steps to an
optional `progress(done, total, what)` callback (about a minute on a small CPU).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from attnswitch.engines import registry
from attnswitch.engines.model import ModelSpec, model_fingerprint
from attnswitch.kernels.cache import JsonTable, provenance_key

# Minimum cosine of an engine's vectors to the reference's float32 vectors, per precision.
PARITY = MappingProxyType({"fp32": 0.9999, "bf16": 0.999, "int8": 0.98})
ROUNDS = 3
REVISION = 3  # bump when the calibration set or the method changes
TABLE = "engines.json"
PARITY_PREFIX = "parity-"  # a parity check's key in the table, beside the plans'
_TABLE = JsonTable(TABLE)

_WORDS = tuple(
    (
        "the server reads its configuration file at start and keeps every setting in memory; "
        "a query planner chooses an index scan when the predicate is selective enough, "
        "otherwise a sequential scan reads the whole table in physical order. to update rows "
        "in a table use the UPDATE statement with a WHERE clause naming the rows; without it "
        "every row changes. functions return a value or raise an exception that names the "
        "argument and what was expected. the compiler checks each borrow at build time, and "
        "a reference may not outlive the value it points to. transactions group statements "
        "so that either all of them take effect or none does, and concurrent readers see a "
        "consistent snapshot. the tokenizer splits text into word pieces; long documents are "
        "cut into overlapping windows before they are embedded and stored for search."
    ).split()
)


def calibration_texts(spec: ModelSpec) -> list[str]:
    """16 deterministic texts: 8 near the model's token limit and 8 near half of it (the
    lengths of a chunked corpus), built from a fixed word list in a fixed order."""
    out = []
    for i in range(16):
        words = max(8, int(spec.max_seq_length * (0.8 if i < 8 else 0.4)))
        start = (i * 7) % len(_WORDS)
        out.append(" ".join(_WORDS[(start + j) % len(_WORDS)] for j in range(words)))
    return out


@dataclass
class EngineRow:
    """One engine's outcome. status: "measured", "unavailable", "declined", "failed"
    (load or encode raised). chunks_per_s: median over rounds (tokens_per_s the same in
    tokens); min_cosine: against the
    reference's float32 vectors; parity: min_cosine reached the precision's threshold."""

    engine: str
    status: str
    reason: str | None = None
    detail: str = ""
    chunks_per_s: float | None = None
    tokens_per_s: float | None = None
    rates: list[float] = field(default_factory=list)
    min_cosine: float | None = None
    parity: bool | None = None
    top10: float | None = None


@dataclass
class EnginePlan:
    """The engine `engine="auto"` runs for (model, precision) here, the ordered fallbacks,
    and why each other engine was not picked."""

    precision: str
    chosen: str | None
    fallbacks: list[str]
    rows: list[EngineRow]
    source: str  # "measured now", "recorded <date>", "forced by <how>"
    key: str = ""
    stale: str | None = None  # measured now: what changed since the last plan, if any

    def why_not(self) -> dict[str, str]:
        out = {}
        best = next((r for r in self.rows if r.engine == self.chosen), None)
        for r in self.rows:
            if r.engine == self.chosen:
                continue
            if r.status != "measured":
                out[r.engine] = f"{r.status}: {r.reason}"
            elif not r.parity:
                out[r.engine] = f"failed parity: {parity_figures(r, PARITY[self.precision])}"
            elif best is not None and best.chunks_per_s and r.chunks_per_s:
                out[r.engine] = (
                    f"slower: {r.chunks_per_s:.1f} chunks/s, "
                    f"{r.chunks_per_s / best.chunks_per_s:.2f}x the pick"
                )
        return out

    def reason(self) -> str:
        """One line: why the pick was made."""
        row = next((r for r in self.rows if r.engine == self.chosen), None)
        if row is None or row.chunks_per_s is None:
            return self.source
        return (
            f"fastest with parity ({row.chunks_per_s:.1f} chunks/s, "
            f"{parity_figures(row, PARITY[self.precision])}), {self.source}"
        )

    def __str__(self) -> str:
        lines = [f"engine plan ({self.precision}): {self.chosen}  [{self.reason()}]"]
        if self.fallbacks:
            lines.append("  fallbacks: " + ", ".join(self.fallbacks))
        for name, why in self.why_not().items():
            lines.append(f"  {name}: {why}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "chosen": self.chosen,
            "reason": self.reason(),
            "fallbacks": self.fallbacks,
            "source": self.source,
            "stale": self.stale,
            "why_not": self.why_not(),
            "rows": [asdict(r) for r in self.rows],
        }


def parity_figures(row: Any, threshold: float) -> str:
    """The figures of a parity verdict: min cosine against `threshold`, and the top-10."""
    cos = "?" if row.min_cosine is None else f"{row.min_cosine:.6f}"
    ok = row.min_cosine is not None and row.min_cosine >= threshold
    top = (
        ""
        if row.top10 is None
        else (f", same top-10 on {row.top10:.0%} of the retrieval check's queries")
    )
    return f"min cosine {cos} {'>=' if ok else '<'} {threshold}{top}"


def judge(got: CheckVectors, want: CheckVectors, threshold: float) -> tuple[float, float, bool]:
    """(min cosine, top-10 agreement, parity) of a candidate's check vectors against the
    reference's."""
    from attnswitch.engines import retrieval_check

    min_cos = float(cosines(got.all, want.all).min())
    top10 = retrieval_check.top10_agreement(want.passages, want.queries, got.passages, got.queries)
    return min_cos, top10, min_cos >= threshold and top10 == 1.0


@dataclass
class CheckIds:
    """Token ids of the parity texts: the calibration texts, then the retrieval check's
    passages, then its queries."""

    ids: list[list[int]]
    calibration: int
    passages: int

    @classmethod
    def of(cls, encoder: Any, spec: ModelSpec) -> CheckIds:
        from attnswitch.engines import retrieval_check

        texts = calibration_texts(spec)
        return cls(
            encoder.tokenize([*texts, *retrieval_check.PASSAGES, *retrieval_check.QUERIES]),
            len(texts),
            len(retrieval_check.PASSAGES),
        )

    def vectors(self, encoder: Any) -> CheckVectors:
        return CheckVectors(encoder.encode_ids(self.ids), self.calibration, self.passages)


@dataclass
class CheckVectors:
    all: np.ndarray
    calibration: int
    passage_count: int

    @property
    def passages(self) -> np.ndarray:
        return self.all[self.calibration : self.calibration + self.passage_count]

    @property
    def queries(self) -> np.ndarray:
        return self.all[self.calibration + self.passage_count :]


def pick(rows: list[EngineRow]) -> tuple[str | None, list[str]]:
    """The fastest measured engine with parity, and the others with parity by rate."""
    ok = sorted(
        (r for r in rows if r.status == "measured" and r.parity),
        key=lambda r: -(r.chunks_per_s or 0.0),
    )
    names = [r.engine for r in ok]
    return (names[0] if names else None), names[1:]


def machine() -> dict[str, Any]:
    """What decides engine speed here: the device, the CPU model and its ISA flags, and the
    cores this process may use."""
    from attnswitch.kernels.cache import cpu_flags, cpu_name

    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "sse4")))
    return {
        "device": registry.host_device(),
        "cpu": cpu_name(),
        "flags": flags,
        "cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
    }


def _built_from(engine: registry.Engine, precision: str) -> dict[str, str]:
    """The engine's library versions and what its model for `precision` is built from
    (`Engine.build_revisions`: an int8 model's recipe and calibration set), so a model
    built anew is measured and checked anew."""
    return {**engine.versions(), **engine.build_revisions(precision)}


def table_subject(
    spec: ModelSpec, precision: str, engines: list[registry.Engine]
) -> dict[str, Any]:
    """What an engine plan is about: this machine, the model, the precision, and each
    engine's libraries and build revisions for it."""
    from attnswitch._version import __version__

    return {
        "machine": machine(),
        "model": model_fingerprint(spec.path),
        "precision": precision,
        "attnswitch": __version__,
        "revision": REVISION,
        "engines": {e.name: _built_from(e, precision) for e in engines},
    }


def table_key(spec: ModelSpec, precision: str, engines: list[registry.Engine]) -> str:
    return provenance_key(table_subject(spec, precision, engines))


def read_table() -> dict[str, Any]:
    """The recorded plans by key ({} when there is none or it is unreadable)."""
    return _TABLE.data()


def _write(subject: dict[str, Any], plan: EnginePlan, prefix: str = "") -> str:
    return _TABLE.record(
        subject,
        {
            "when": time.strftime("%Y-%m-%d %H:%M"),
            "machine": machine(),
            "precision": plan.precision,
            "rows": [asdict(r) for r in plan.rows],
        },
        prefix=prefix,
    )


def recorded(spec: ModelSpec, precision: str) -> EnginePlan | None:
    """The plan recorded for this machine, model, precision and engine versions, if any."""
    engines = registry.engines()
    key = table_key(spec, precision, engines)
    entry = read_table().get(key)
    if not entry:
        return None
    try:
        rows = [EngineRow(**r) for r in entry["rows"]]
    except (KeyError, TypeError):
        return None
    chosen, fallbacks = pick(rows)
    return EnginePlan(precision, chosen, fallbacks, rows, f"recorded {entry.get('when')}", key)


def candidates(spec: ModelSpec, precision: str) -> tuple[list[registry.Engine], list[EngineRow]]:
    """The engines that can serve (spec, precision) here, and rows for those that cannot."""
    device = registry.host_device()
    able, rows = [], []
    for engine in registry.engines():
        why = engine.unavailable()
        if why is not None:
            rows.append(EngineRow(engine.name, "unavailable", why))
            continue
        declines = engine.declines(device, precision, spec)
        if declines:
            rows.append(EngineRow(engine.name, "declined", "; ".join(declines)))
            continue
        able.append(engine)
    return able, rows


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two `[N, dim]` arrays."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)


def _parity_subject(spec: ModelSpec, engine: registry.Engine, precision: str) -> dict[str, Any]:
    """What a named engine's parity check is about: the machine, the model, the precision
    and the engine's libraries and build revisions."""
    from attnswitch._version import __version__

    return {
        "machine": machine(),
        "model": model_fingerprint(spec.path),
        "revision": REVISION,
        "precision": precision,
        "attnswitch": __version__,
        "engine": engine.name,
        "versions": _built_from(engine, precision),
    }


def _parity_key(spec: ModelSpec, engine: registry.Engine, precision: str) -> str:
    return provenance_key(_parity_subject(spec, engine, precision), prefix=PARITY_PREFIX)


def known_parity(spec: ModelSpec, engine: registry.Engine, precision: str) -> EngineRow | None:
    """The parity verdict of `engine` already recorded for this machine, model, precision and
    library versions: its row of the measured plan (`recorded`), else its own parity check
    (`check_parity`); None when neither was recorded. Reads the table only."""
    plan = recorded(spec, precision)
    if plan is not None:
        for row in plan.rows:
            if row.engine == engine.name and row.status == "measured" and row.parity is not None:
                return row
    entry = read_table().get(_parity_key(spec, engine, precision))
    if entry:
        try:
            return EngineRow(**entry["rows"][0])
        except (KeyError, IndexError, TypeError):
            return None
    return None


def check_parity(
    spec: ModelSpec,
    engine: registry.Engine,
    precision: str,
    encoder: Any,
    reference: Callable[[], Any],
) -> EngineRow:
    """First use of a named engine: its vectors of the calibration texts against the
    reference's float32 ones, recorded per (machine, model, precision, engine and its
    library versions), so each new fingerprint is checked once. A verdict already recorded
    (`known_parity`) is returned as is: `reference()`, which loads the reference engine,
    is called only when there is none."""
    row = known_parity(spec, engine, precision)
    if row is not None:
        return row
    ref = reference()
    check = CheckIds.of(ref, spec)
    row = EngineRow(engine.name, "measured", detail=encoder.describe())
    row.min_cosine, row.top10, row.parity = judge(
        check.vectors(encoder), check.vectors(ref), PARITY[precision]
    )
    _write(
        _parity_subject(spec, engine, precision),
        EnginePlan(precision, engine.name, [], [row], "parity check"),
        PARITY_PREFIX,
    )
    return row


Progress = Callable[[int, int, str], None]


def measure_steps(engines: int) -> int:
    """The steps `measure` reports for `engines` candidates: the reference's float32 vectors,
    one load and parity check per engine, then `ROUNDS` timed rounds of each."""
    return 1 + engines + ROUNDS * engines


def measure(
    spec: ModelSpec,
    precision: str,
    load: Any,
    reference: Callable[[], Any],
    progress: Progress | None = None,
) -> EnginePlan:
    """Calibrate every engine that can serve, record the table, and return the plan.

    load(engine, precision) -> Encoder (cached by the caller); reference() -> the reference
    engine's float32 Encoder (loaded as the first step). progress(done, total, what), when
    given, is called before each step and once at the end (done == total)."""
    able, rows = candidates(spec, precision)
    total, done = measure_steps(len(able)), 0
    report = progress or (lambda done, total, what: None)
    report(done, total, "reference: torch float32 vectors")
    ref = reference()
    check = CheckIds.of(ref, spec)
    want = check.vectors(ref)
    ids = check.ids[: check.calibration]
    done += 1
    loaded: dict[str, Any] = {}
    for engine in able:
        report(done, total, f"{engine.name}: load and parity check")
        row = EngineRow(engine.name, "measured", detail=engine.detail())
        try:
            encoder = load(engine, precision)
            got = check.vectors(encoder)  # first call: compiles, allocates
            row.min_cosine, row.top10, row.parity = judge(got, want, PARITY[precision])
            row.detail = encoder.describe()
            loaded[engine.name] = encoder
        except Exception as exc:  # a broken engine is a reason, not a crash
            row.status, row.reason = "failed", f"{type(exc).__name__}: {exc}"
            total -= ROUNDS  # it is not timed
        done += 1
        rows.append(row)
    measured = [r for r in rows if r.engine in loaded]
    tokens = sum(len(r) for r in ids)
    for round_ in range(ROUNDS):
        shift = round_ % max(len(measured), 1)
        for row in measured[shift:] + measured[:shift]:
            report(done, total, f"{row.engine}: timing round {round_ + 1} of {ROUNDS}")
            start = time.perf_counter()
            loaded[row.engine].encode_ids(ids)
            row.rates.append(len(ids) / (time.perf_counter() - start))
            done += 1
    for row in measured:
        row.chunks_per_s = statistics.median(row.rates)
        row.tokens_per_s = row.chunks_per_s * tokens / len(ids)
    order = [e.name for e in registry.engines()]
    rows.sort(key=lambda r: order.index(r.engine) if r.engine in order else len(order))
    chosen, fallbacks = pick(rows)
    subject = table_subject(spec, precision, registry.engines())
    plan = EnginePlan(
        precision,
        chosen,
        fallbacks,
        rows,
        "measured now",
        stale=_TABLE.why_stale(subject, ("machine", "model", "precision")),
    )
    plan.key = _write(subject, plan)
    report(total, total, f"picked {chosen}" if chosen else "no engine kept parity")
    return plan
