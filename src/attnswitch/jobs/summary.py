"""A run's summary: `RunSummary`, what `attnswitch run` prints and `--json` and the runs
table keep, made from a finished `run.RunJob` by `summarise`."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from attnswitch.indexing.records import root_key
from attnswitch.jobs.encode import peak_rss_mb

if TYPE_CHECKING:
    from attnswitch.jobs.encode_phase import AttentionCounts, Encoding
    from attnswitch.jobs.options import RunOptions
    from attnswitch.jobs.run_state import Resolution, RunCounts, RunProgress, RunTarget


@dataclass(frozen=True)
class RunSummary:
    """The outcome of a run (`to_dict` for JSON and the runs table). Counts are of documents
    (files) of this root; `chunks_encoded`/`tokens_encoded` count only this run's encoding;
    `tokens_per_s` = tokens_encoded / encode_s (chunks_per_s likewise). `ray` is None here;
    a Ray run (`ray_run.run_on_ray`) fills it with its pools per node kind, and its `load_s`
    is Ray's connect and the actors' start. `measure_s`: seconds spent choosing the engine
    and precision: measuring them on a first run here, checking an engine against torch
    float32 once (near 0 when they were recorded: every run after the first here).
    `time_parts`: where the wall time went (`phases.PARTS`, then `other`, the rest), in
    seconds that add up to `wall_s`.
    `chunks_reused`: chunks that took a vector stored already or encoded once for another
    chunk of this run (same text for the encoder), not in `chunks_encoded`. `copied`: new
    or changed files whose content an indexed document has (counted in `new`/`changed`),
    given its chunks and vectors without being extracted or encoded; `moved`: stored
    documents found at another path of the root (not counted as new or deleted).
    Two passes (`jobs/passes.py`): `chunks_quick` chunks were written by the quick pass
    with a quick vector only (those that kept a stored full vector are in `chunks_reused`),
    `chunks_filled` given their full vector by the full pass (encoded, in
    `chunks_encoded`, or reused), `chunks_unencoded` of the index have none yet;
    `searchable_s`: seconds from the start until every file read was searchable (the quick
    pass's end; None: a run of one pass), `full_pass_s`: the full pass's seconds."""

    run_id: int
    status: str
    root: str
    db: str
    files: int
    new: int
    changed: int
    unchanged: int
    deleted: int
    skipped: int
    failed: int
    indexed: int
    chunks_encoded: int
    tokens_encoded: int
    chunks_stored: int
    wall_s: float
    load_s: float
    encode_s: float
    tokens_per_s: float | None
    chunks_per_s: float | None
    model: str
    engine: str
    engine_reason: str
    precision: str
    layout: str
    device: str | None
    backends: dict[str, int]
    fallbacks: dict[str, int]
    peak_rss_mb: float
    peak_device_mb: float | None
    memory: dict[str, Any]
    cost: dict[str, Any]
    skipped_by_reason: dict[str, int]
    skipped_files: list[dict[str, str]]
    notes: list[dict[str, str]]
    config: str
    ray: dict[str, Any] | None = None
    measure_s: float = 0.0
    precision_reason: str = ""
    chunks_reused: int = 0
    copied: int = 0
    moved: int = 0
    time_parts: dict[str, float] = field(default_factory=dict)
    chunks_quick: int = 0
    chunks_filled: int = 0
    chunks_unencoded: int = 0
    searchable_s: float | None = None
    full_pass_s: float = 0.0
    permissions_changed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def counts(self) -> dict[str, int]:
        return {
            k: getattr(self, k)
            for k in ("new", "changed", "unchanged", "deleted", "skipped", "failed", "indexed")
        }


class FinishedRun(Protocol):
    """What `summarise` reads of a run (`run.RunJob`, which imports this module)."""

    @property
    def target(self) -> RunTarget: ...
    @property
    def options(self) -> RunOptions: ...
    @property
    def counts(self) -> RunCounts: ...
    @property
    def progress(self) -> RunProgress: ...
    @property
    def encoding(self) -> Encoding: ...
    @property
    def resolved(self) -> Resolution: ...
    def time_parts(self, wall: float) -> dict[str, float]: ...


def summarise(
    job: FinishedRun, status: str, started: float, calls_before: AttentionCounts
) -> RunSummary:
    """The summary of `job` ended with `status` (`started`: its perf_counter start;
    `calls_before`: the attention counters before it ran)."""
    wall = time.perf_counter() - started
    target, counts, resolution = job.target, job.counts, job.resolved
    key = root_key(target.root)
    st = target.store
    indexed, stored_chunks = st.root_counts(key)
    tokens = counts.tokens
    encode_s = job.encoding.seconds
    report = job.encoding.report(calls_before)
    device = report["device"]
    return RunSummary(
        run_id=target.run_id,
        status=status,
        root=key,
        db=st.location,
        files=job.progress.files_total,
        new=counts.new,
        changed=counts.changed,
        unchanged=counts.unchanged,
        deleted=counts.deleted,
        skipped=counts.skipped,
        failed=counts.failed,
        indexed=indexed,
        chunks_encoded=counts.chunks + counts.filled_encoded,
        tokens_encoded=tokens,
        chunks_reused=counts.reused + counts.filled - counts.filled_encoded,
        chunks_quick=counts.quick,
        chunks_filled=counts.filled,
        chunks_unencoded=target.writer.store.unencoded_count(),
        searchable_s=job.progress.searchable_s,
        full_pass_s=job.progress.fill_s,
        copied=counts.copied,
        moved=counts.moved,
        permissions_changed=counts.permissions_changed,
        chunks_stored=stored_chunks,
        wall_s=wall,
        load_s=job.progress.load_s,
        encode_s=encode_s,
        tokens_per_s=tokens / encode_s if tokens and encode_s > 0 else None,
        chunks_per_s=(counts.chunks + counts.filled_encoded) / encode_s
        if tokens and encode_s > 0
        else None,
        model=resolution.config.describe(),
        engine=str(report["engine"] or resolution.engine),  # the engine that encoded last
        engine_reason=resolution.engine_reason,
        precision=resolution.config.precision,
        precision_reason=resolution.precision_reason,
        layout=job.options.encode.layout,
        device=device,
        backends=report["backends"],
        fallbacks=report["fallbacks"],
        peak_rss_mb=peak_rss_mb(),
        peak_device_mb=report["peak_device_mb"],
        memory=report["memory"],
        cost=_cost(tokens, encode_s, device, job.options.hourly_usd),
        skipped_by_reason=dict(Counter(d.skip.value for d in counts.skips if d.skip)),
        skipped_files=[{"source": d.source, "reason": d.reason or ""} for d in counts.skips],
        notes=counts.notes,
        config=resolution.config.fingerprint,
        ray=report["ray"],
        measure_s=job.progress.measure_s,
        time_parts=job.time_parts(wall),
    )


def _cost(
    tokens: int, seconds: float, device: str | None, hourly_usd: float | None
) -> dict[str, Any]:
    from attnswitch.observe.cost import cost

    if not tokens or seconds <= 0:
        return {"usd_per_million_tokens": None, "reason": "no tokens encoded"}
    try:
        c = cost(tokens, seconds, device, hourly_usd=hourly_usd)
    except ValueError as exc:
        return {"usd_per_million_tokens": None, "reason": str(exc)}
    return {
        "usd_per_million_tokens": c.usd_per_million_tokens,
        "hourly_usd": c.hourly_usd,
        "price_source": c.price_source,
        "device": c.device,
        "reason": None,
    }
