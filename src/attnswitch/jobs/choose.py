"""Which engine and precision a run encodes with, and whether measuring them first repays.

`engine="auto"` and `precision="auto"` are measured on their first use on a machine
(`engines.explain_engine`, `engines.explain_precision`): a minute or two on a small CPU,
remembered afterwards. A job too small to repay that keeps the default instead, and says
so: the recorded picks where there are some, else float32 on the engine quickest to start
(`engines.unmeasured_choice`). The rule (`worth_measuring`), in numbers:

- the job: the bytes of the files it has to read, at `TOKENS_PER_BYTE` (measured on
  examples/corpus: 2.68 MB of HTML, PDF, Markdown and text gave 524,090 tokens), encoded at
  `TOKENS_PER_CORE_S` per core by the default (ONNX Runtime fp32: 23 chunks/s of about 150
  tokens on 2 cores);
- what measuring could save: that encoding time times (1 - 1 / gain), gain being the most a
  measured pick was seen to run faster than the default (`Measurement.gain`: 3.6x where
  precisions are to choose from, 1.3x between engines alone);
- its cost: the measurement's estimate (`Measurement.seconds`, from its steps).

It measures when the saving reaches the cost. On a 2-core AVX2 CPU (one precision, four
engines: about 50 s) that is a job of about 800k tokens (4 MB of files); with bf16 to
choose too (about 2 minutes) about 600k. examples/corpus itself (2.5 minutes of encoding,
of which measuring could save 35 s) keeps the default. The rule looks at this job only: a
later, larger job measures, and `attnswitch engines` measures on demand.

A run that measures says so first (what for, about how long), shows each step, and counts
the time as its `measure` part; so does the first check of an engine against torch float32
(`engines.check_engine`), which a named engine, or the default, needs once.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from attnswitch.jobs.encode import EncodeOptions

_Options = TypeVar("_Options", bound="EncodeOptions")

# Tokens per byte of the files a job reads, and the default's encoding rate per core:
# see the module doc.
TOKENS_PER_BYTE = 0.2
TOKENS_PER_CORE_S = 1750.0


@dataclass(frozen=True)
class Choice:
    """The engine and precision a run encodes with, why each, whether anything was
    measured or checked to choose them (`measured`), and the engine option to load it by
    (`load_as`: "auto" keeps the measured plan's fallbacks; a name loads that engine)."""

    engine: str
    precision: str
    engine_reason: str
    precision_reason: str
    measured: bool
    load_as: str = "auto"

    def options(self, options: _Options) -> _Options:
        """`options` (a run's `options.EncodeOptions`) with this engine and precision."""
        return dataclasses.replace(options, engine=self.load_as, precision=self.precision)


def usable_cores() -> int:
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def worth_measuring(job_bytes: int, measure_s: float, gain: float, cores: int) -> tuple[bool, str]:
    """Whether a job reading `job_bytes` repays a measurement of about `measure_s` seconds
    that may speed its encoding up by `gain` on `cores` cores; and the figures, in words."""
    tokens = job_bytes * TOKENS_PER_BYTE
    encode_s = tokens / (TOKENS_PER_CORE_S * max(cores, 1))
    saving = encode_s * (1 - 1 / gain) if gain > 1 else 0.0
    words = (
        f"this job is about {_round(tokens)} tokens, about {_seconds(encode_s)} of "
        f"encoding, which measuring could cut by {_seconds(saving)} at most, for "
        f"{_seconds(measure_s)} of measuring"
    )
    return saving >= measure_s, words


def _round(tokens: float) -> str:
    if tokens >= 1e6:
        return f"{tokens / 1e6:.1f}M"
    if tokens >= 1e3:
        return f"{tokens / 1e3:.0f}k"
    return f"{tokens:.0f}"


def _seconds(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.0f} s" if seconds >= 1 else "under a second"
    if seconds < 90:
        return f"{round(seconds / 10) * 10:.0f} s"
    return f"{round(seconds / 60):.0f} minutes"


def choose(
    options: EncodeOptions,
    job_bytes: Callable[[], int],
    on_measure: Callable[[float, float, str], None],
    say: Callable[[str], None],
) -> Choice:
    """The engine and precision of a run with `options` (its `options.EncodeOptions`).
    `job_bytes()` (asked only when something would be measured) gives the bytes the job reads;
    `on_measure(done, total, what)` follows a measurement or check in progress, and
    `say(line)` tells the user what is about to happen."""
    from attnswitch import engines
    from attnswitch.jobs.encode import resolve_engine, resolve_precision

    engine = "torch" if options.layout != "padded" and options.engine == "auto" else options.engine
    ahead = engines.measurement_ahead(options.model, engine, options.precision)
    if ahead is None:
        resolved, precision_reason = resolve_precision(options)
        name, engine_reason = resolve_engine(resolved)
        return _checked(
            Choice(
                name, resolved.precision, engine_reason, precision_reason, False, options.engine
            ),
            options,
            on_measure,
            say,
        )
    worth, figures = worth_measuring(job_bytes(), ahead.seconds, ahead.gain, usable_cores())
    if worth:
        say(f"measuring {ahead.purpose()}: about {_seconds(ahead.seconds)} ({figures})")
        paced = ahead.paced(on_measure)
        resolved, precision_reason = resolve_precision(options, paced)
        name, engine_reason = resolve_engine(resolved, paced)
        paced.end(f"picked {name}, {resolved.precision}")
        return _checked(
            Choice(name, resolved.precision, engine_reason, precision_reason, True, options.engine),
            options,
            on_measure,
            say,
        )
    name, precision, why_engine, why_precision = engines.unmeasured_choice(
        options.model, engine, options.precision
    )
    say(
        f"not measuring engines for this job ({figures}): {name}, {precision}; "
        "`attnswitch engines` measures them"
    )
    return _checked(
        Choice(
            name,
            precision,
            f"{why_engine}; not measured: {figures}",
            f"{why_precision}; not measured: a job this small",
            False,
            name,
        ),
        options,
        on_measure,
        say,
    )


def _checked(
    choice: Choice,
    options: EncodeOptions,
    on_measure: Callable[[float, float, str], None],
    say: Callable[[str], None],
) -> Choice:
    """`choice`, its engine checked against torch float32 first when that was never done
    here (announced, and counted as measuring)."""
    from attnswitch import engines

    if options.layout != "padded" or engines.parity_known(
        options.model, choice.engine, choice.precision
    ):
        return choice
    say(
        f"checking {choice.engine} ({choice.precision}) against torch float32, once on this "
        "machine: about 20 s"
    )
    engines.check_engine(options.model, choice.engine, choice.precision, on_measure)
    return dataclasses.replace(choice, measured=True)
