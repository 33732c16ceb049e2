"""What resolving `engine="auto"` and `precision="auto"` would measure here now, and about
how long it takes.

The first use of "auto" on a machine measures (`autopick.measure`, `autoprecision.measure`)
and remembers the result; later uses read it. `ahead(spec, engine, precision)` lists the
steps a resolution would run now, each with an estimate of its seconds (`STEP_S`), or
returns None when nothing would be measured (the plans are recorded, or engine and
precision are forced). The estimate is what a run says before it measures ("about 60 s"),
what it weighs against the job (`jobs/choose.py`), and the scale of its progress bar:
`Paced` turns the steps' `progress(done, total, what)` reports into estimated seconds done,
so that the bar's ETA follows the pace the machine really keeps.

`STEP_S`, measured on a 2-core AMD EPYC (AVX2) with an empty cache (2026-12, default
model): the reference (importing torch and transformers, loading the model, its vectors of
the 82 parity texts) 10 s; an engine's load and parity check 4-8 s (an export to ONNX
included: onnxruntime 7 s, openvino 4 s, jax 8 s, torch already loaded 5 s); a timing
round over the 16 calibration texts 0.7-3 s. A whole measurement of the four engines in
fp32 took 56 s against 61 s estimated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from attnswitch.engines import registry
from attnswitch.engines.model import ModelSpec

STEP_S = MappingProxyType({"reference": 10.0, "parity": 6.0, "round": 1.5})
# The most a measured pick was seen to encode faster than the unmeasured default (float32
# on the quickest engine to start, onnxruntime on CPUs): with precisions to choose from,
# OpenVINO bf16 against ONNX Runtime fp32 on an Intel Xeon with AMX (3.90x and 1.09x
# sentence-transformers' rate, 2 cores); with engines only, OpenVINO fp32 against ONNX
# Runtime fp32 (1.38x against 1.09x there; 27.4 against 23.4 chunks/s on an AMD EPYC).
GAIN_PRECISIONS = 3.6
GAIN_ENGINES = 1.3


def step_kind(what: str) -> str | None:
    """The kind of a reported step (its label, as `autopick.measure` and
    `autoprecision.measure` name them): "reference", "parity", "round", or None for a
    label that only groups or ends steps."""
    if "reference" in what:
        return "reference"
    if "parity check" in what:
        return "parity"
    if "timing round" in what:
        return "round"
    return None


@dataclass(frozen=True)
class Measurement:
    """The steps a resolution would measure: `precisions` timed against each other (empty
    when the precision is given or recorded), `engines` measured per precision (the
    engine plans not recorded), and the kinds of steps in order (`steps`)."""

    precisions: tuple[str, ...]
    engines: Mapping[str, tuple[str, ...]]
    steps: tuple[str, ...] = field(default=())

    @property
    def seconds(self) -> float:
        """The estimated seconds of all the steps (`STEP_S`)."""
        return sum(STEP_S[kind] for kind in self.steps)

    @property
    def gain(self) -> float:
        """The most the pick may encode faster than the unmeasured default (`GAIN_*`)."""
        return GAIN_PRECISIONS if len(self.precisions) > 1 else GAIN_ENGINES

    def paced(self, report: Callable[[float, float, str], None]) -> Paced:
        """A `progress(done, total, what)` callback for these steps, reporting estimated
        seconds to `report(done_s, total_s, what)` (`Paced`)."""
        return Paced(self.seconds, report)

    def purpose(self) -> str:
        """What is measured, in words."""
        parts = []
        engines = sorted({e for names in self.engines.values() for e in names})
        if engines:
            parts.append(f"which engine encodes fastest ({', '.join(engines)})")
        if len(self.precisions) > 1:
            parts.append(f"which precision ({', '.join(self.precisions)})")
        what = " and ".join(parts) or "the engines"
        return f"{what} with the same answers as torch float32, once on this machine (remembered)"


def _engine_steps(engines: int) -> list[str]:
    from attnswitch.engines import autopick

    return ["reference"] + ["parity"] * engines + ["round"] * (autopick.ROUNDS * engines)


def _likely_candidates(spec: ModelSpec, precision: str) -> tuple[str, ...]:
    """The engines `autopick.candidates` would measure for `precision`, as far as their
    declarations tell (installed, device, precision, model), without the checks that
    import a framework (an engine's `extra_unavailable`, a CPU plugin's capabilities):
    cheap enough for an estimate."""
    import importlib.util

    device = registry.host_device()
    return tuple(
        e.name
        for e in registry.engines()
        if all(importlib.util.find_spec(m) is not None for m in e.requires)
        and device in e.devices
        and precision in e.precisions
        and e.model_unsupported(spec) is None
    )


def ahead(spec: ModelSpec, engine: str, precision: str) -> Measurement | None:
    """The measurement that resolving (`engine`, `precision`) for model `spec` would run
    now (`engine`: "auto" or a name, $ATTNSWITCH_ENGINE already read; `precision`: "auto"
    or a concrete one, $ATTNSWITCH_PRECISION already applied), None when nothing would be
    measured. Reads the recorded tables only."""
    from attnswitch.engines import autopick, autoprecision

    steps: list[str] = []
    engines: dict[str, tuple[str, ...]] = {}

    def engine_plan(p: str) -> None:
        if engine != "auto" or autopick.recorded(spec, p) is not None:
            return
        able = _likely_candidates(spec, p)
        engines[p] = able
        steps.extend(_engine_steps(len(able)))

    precisions: tuple[str, ...] = ()
    if precision == "auto":
        recorded = autoprecision.recorded(spec, engine)
        if recorded is not None:
            precision = recorded.chosen
        else:
            able, _ = autoprecision.candidates()
            if len(able) <= 1:  # one candidate is the pick without timing it
                precision = able[0] if able else autoprecision.FALLBACK
            else:
                precisions = tuple(able)
                steps.append("reference")
                for p in able:
                    engine_plan(p)
                    steps.append("parity")
                steps.extend(["round"] * (autoprecision.ROUNDS * len(able)))
    if not precisions:
        engine_plan(precision)
    if not steps:
        return None
    return Measurement(precisions, MappingProxyType(engines), tuple(steps))


class Paced:
    """A `progress(done, total, what)` callback for the measuring steps that reports, to
    `report(done_s, total_s, what)`, the estimated seconds of the steps finished
    (`STEP_S` by `step_kind`) out of `total_s` (`Measurement.seconds`). A step ends when
    the next one is reported; labels that only group or end steps weigh nothing."""

    def __init__(self, total_s: float, report: Callable[[float, float, str], None]):
        self.total_s, self.report = total_s, report
        self.done_s = 0.0
        self._current: str | None = None

    def __call__(self, done: int, total: int, what: str) -> None:
        self._finish_current()
        self._current = step_kind(what) if done < total else None
        self.total_s = max(
            self.total_s, self.done_s + (STEP_S[self._current] if self._current else 0.0)
        )
        self.report(self.done_s, self.total_s, what)

    def _finish_current(self) -> None:
        if self._current is not None:
            self.done_s += STEP_S[self._current]
            self._current = None

    def end(self, what: str) -> None:
        """The measurement is over: everything done."""
        self._finish_current()
        self.total_s = self.done_s = max(self.total_s, self.done_s)
        self.report(self.done_s, self.total_s, what)


__all__ = [
    "GAIN_ENGINES",
    "GAIN_PRECISIONS",
    "Measurement",
    "Paced",
    "STEP_S",
    "ahead",
    "step_kind",
]
