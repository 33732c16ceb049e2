"""Run on Ray: the pipeline of `run.py`, its stages spread over a Ray cluster.

    summary = run_on_ray(root, store, RunOptions.of(...), RayOptions(address=None))

The same job as `run.run` (the same `RunJob` logic for freshness, classification, skips,
failures, writes and the summary), with the work placed by Ray:

1. listing: `ingest.scan` as one Ray task; the driver deletes what left the root and keeps
   the files whose size, mtime and config match the store (fresh) out of everything below:
   nothing is scheduled for them;
2. reading/extracting (`ingest.load`) and chunking/tokenising (`chunk.chunk_document`) are two
   Ray Data `map` stages of CPU tasks (Ray Data fuses them into one task per block of
   files). A file whose content hash equals the stored one (under this config) is not
   chunked: the driver records it as unchanged;
3. encoding: the driver gathers `chunks_per_call` chunks, several documents at a time, as
   `run` does, and dispatches each batch to an `EncoderPool` of actors (`ray_encoders`),
   one pool per node kind (gpu, tpu, cpu), each actor on its own device with the engine
   native to it;
4. writing: each document of a finished batch is written in its own transaction
   (`IndexWriter.write_document`, the run's writer holding the run lock). With SQLite the
   driver writes (one writer, the store lives with the driver: no node needs it). With a
   server store (`Store.url`: PostgreSQL) the encoder actor writes its own batch's
   documents (`EncoderActor.encode_and_write`) under the driver's lock, and only reports
   come back. Either way a run killed at any moment, its driver by
   `kill -9` included, leaves whole documents only, and the next run redoes the rest.

Results are the single-process run's: the same chunker and tokenizer, the same config
fingerprint, the same engine (on the same hardware). With `engine="auto"` each actor picks
the engine native to its node (jax on a TPU host, torch elsewhere) while the index config
names the driver's choice; the engines are held to the same outputs by their parity test.

Faults: an encoder actor that dies is restarted by Ray (`max_restarts`) and its pending
batches run again there (`max_task_retries`); one whose restarts are spent is dropped and
its batches go to the others. A batch that fails inside the engine is retried one document
at a time, and a document failing alone is recorded as skipped ("encode failed"), as in
`run`. Every document is written at most once per run, and `write_document` replaces a
document's chunks, so no chunk is ever duplicated.

Ray is optional (`pip install 'attnswitch[ray]'`): it is imported only here and in
`ray_encoders`, inside functions, and `run.run` never imports either module.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import pickle
import socket
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnswitch.documents.chunk import Chunk, chunk_document
from attnswitch.documents.ingest import Document, SourceFile, load, scan
from attnswitch.errors import AttnswitchError, ConfigError
from attnswitch.indexing.store import Store, indexed_sha
from attnswitch.indexing.writer import IndexWriter
from attnswitch.jobs.encode import count_diff, settle
from attnswitch.jobs.encode_phase import AttentionCounts, DocumentSink, EncodeStart, EngineReport
from attnswitch.jobs.options import EncodeOptions, ReadOptions, RunOptions
from attnswitch.jobs.phases import Phases
from attnswitch.jobs.ray_encoders import (
    KINDS,
    READ_CPUS,
    EncoderPool,
    PoolSpec,
    RayRunError,
    import_ray,
    plan_pools,
)
from attnswitch.jobs.read_phase import Read, ReadRequest
from attnswitch.jobs.run import RunJob, check_root, drive
from attnswitch.jobs.run_state import RunProgress, RunTarget
from attnswitch.jobs.summary import RunSummary

if TYPE_CHECKING:
    from attnswitch.jobs.ray_encoders import Encoded
    from attnswitch.jobs.run_state import Pending, Vectors

log = logging.getLogger(__name__)
# Files per Ray Data block (one read-and-chunk task each), and at most this many blocks.
FILES_PER_BLOCK = 4
MAX_BLOCKS = 4096
CONNECT_TIMEOUT_S = 5.0


class RayConnectError(AttnswitchError, ConnectionError):
    """No Ray cluster answers at the address given."""


@dataclass(frozen=True)
class RayOptions:
    """address: a Ray cluster ("HOST:PORT" of its head, "ray://HOST:PORT", "auto"); None:
    join the local Ray (`RAY_ADDRESS`, else the latest `ray start` on this machine), else
    start one. Ignored when this process is already connected (`ray.init` done).
    cpu_actors, gpu_actors, tpu_actors: encoder actors per node kind (None: auto, see
    `ray_encoders.plan_pools`); cpus_per_actor: CPUs each CPU actor asks for (its torch
    threads; None: auto, see `plan_pools`). in_flight: batches queued per actor. max_restarts, max_task_retries: Ray's
    fault tolerance for the actors. startup_timeout_s: to wait for the actors' models to
    load; stall_timeout_s: to wait for any batch to finish. runtime_env: Ray's, for the
    job when this call connects. log_to_driver: show the workers' output here."""

    address: str | None = None
    cpu_actors: int | None = None
    gpu_actors: int | None = None
    tpu_actors: int | None = None
    cpus_per_actor: float | None = None
    in_flight: int = 2
    max_restarts: int = 3
    max_task_retries: int = 3
    startup_timeout_s: float = 600.0
    stall_timeout_s: float = 1800.0
    runtime_env: dict[str, Any] | None = None
    log_to_driver: bool = True

    def __post_init__(self) -> None:
        if self.cpus_per_actor is not None and not self.cpus_per_actor > 0:
            raise ConfigError(f"cpus_per_actor: expected > 0, got {self.cpus_per_actor}")
        if self.in_flight < 1:
            raise ConfigError(f"in_flight: expected >= 1, got {self.in_flight}")
        for name in ("cpu_actors", "gpu_actors", "tpu_actors"):
            n = getattr(self, name)
            if n is not None and n < 0:
                raise ConfigError(f"{name}: expected >= 0, got {n}")


# ---- connecting ------------------------------------------------------------------------


def check_address(address: str | None, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse an address where nothing answers, at once (Ray itself retries for minutes).
    None, "auto" and "local" are left to `ray.init`; `RAY_ADDRESS` is checked when set."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None or address in ("auto", "local"):
        return
    host, _, port = address.split("://", 1)[-1].rstrip("/").rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise RayConnectError(
            f"address: expected HOST:PORT, ray://HOST:PORT, auto or local, got {address!r}"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise RayConnectError(
            f"address: expected a Ray cluster at {address}, got no answer ({exc}); start one "
            "with `ray start --head`, or give the head's address"
        ) from None


def connect(options: RayOptions) -> bool:
    """Connect this process to Ray (see `RayOptions.address`); True when this call
    connected, so the caller disconnects (`ray.shutdown()`) when done."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    check_address(options.address)
    try:
        ray.init(
            address=options.address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=options.log_to_driver,
            runtime_env=options.runtime_env,
        )
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        raise RayConnectError(
            f"address: expected a Ray cluster at "
            f"{options.address or 'the local Ray'}, got "
            f"{type(exc).__name__}: {exc}"
        ) from None
    return True


# ---- the Ray Data stages ---------------------------------------------------------------


def read_row(row: dict[str, Any], read: ReadOptions) -> dict[str, Any]:
    """Stage 1 (a CPU task): read, hash and extract one listed file (`ingest.load` with
    `read.load_kwargs()`)."""
    entry: SourceFile = pickle.loads(row["entry"])  # whole: its real names, its pinned root
    return {"doc": pickle.dumps(load(entry, **read.load_kwargs())), "known": row["known"]}


def chunk_row(
    row: dict[str, Any],
    model: str | None,
    fingerprint: str,
    max_tokens: int,
    overlap: int,
    chunking: str = "blocks",
    embed_headings: bool = False,
) -> dict[str, Any]:
    """Stage 2 (a CPU task): cut a read document into chunks (`chunk.chunk_document`);
    None when it has no text or its hash is the stored one (`known`: unchanged)."""
    doc: Document = pickle.loads(row["doc"])
    chunks: list[Chunk] | None = None
    if doc.ok and doc.sha256 != row["known"]:
        chunks = chunk_document(
            doc.text or "",
            doc.blocks,
            _tokenizer(model, fingerprint),
            chunking=chunking,
            max_tokens=max_tokens,
            overlap=overlap,
            embed_headings=embed_headings,
        )
    return {"doc": row["doc"], "chunks": pickle.dumps(chunks)}


@functools.lru_cache(maxsize=4)
def _tokenizer(model: str | None, fingerprint: str) -> Any:
    """The model's chunking tokenizer, once per worker process; the model files must be the
    driver's."""
    from attnswitch.engines import ModelSpec
    from attnswitch.engines.model import model_fingerprint
    from attnswitch.indexing.config import IndexMismatchError, chunk_tokenizer

    spec = ModelSpec.load(model)
    found = model_fingerprint(spec.path)
    if found != fingerprint:
        raise IndexMismatchError(
            f"model: expected the driver's model files ({fingerprint[:12]})"
            f" for chunking, got {found[:12]} at {spec.path}"
        )
    return chunk_tokenizer(spec)


# ---- the run's parts -------------------------------------------------------------------


class RaySource:
    """The `read_phase.DocumentSource` of a Ray run: the root listed by one Ray task, the
    files read and chunked by Ray Data stages (see the module doc) on the CPUs the encoder
    actors (`pools`) leave, streamed to the driver as they finish. The driver neither
    reads nor waits for reads: it hashes no file, and the wait is not timed as reading."""

    def __init__(self, ray_options: RayOptions, pools: list[PoolSpec], model: str | None):
        self.ray_options, self.pools, self.model = ray_options, pools, model

    @property
    def files_at_hand(self) -> bool:
        return False

    def listing(self, target: RunTarget, read: ReadOptions) -> list[SourceFile]:
        ray = import_ray()
        task = ray.remote(num_cpus=READ_CPUS)(scan)
        ref = task.remote(
            str(target.root.resolve()), include_hidden=read.include_hidden, rules=target.rules
        )
        listed: list[SourceFile] = ray.get(ref, timeout=self.ray_options.stall_timeout_s)
        return listed

    def documents(self, request: ReadRequest) -> Generator[Read, None, None]:
        """The read and chunk stages on Ray Data, each document with its chunks (None: not
        chunked, its stored hash is its own or it has no text)."""
        rows = self._stream(request)
        try:
            for row in rows:
                doc: Document = pickle.loads(row["doc"])
                chunks: list[Chunk] | None = pickle.loads(row["chunks"])
                yield doc, chunks
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()

    def _stream(self, request: ReadRequest) -> Iterator[dict[str, Any]]:
        ray = import_ray()
        from ray.data import ExecutionResources

        config = request.config
        items = []
        while request.entries:
            e = request.entries.popleft()
            known = indexed_sha(request.stored.get(e.source), config.fingerprint)
            items.append({"entry": pickle.dumps(e), "known": known})
        blocks = min(MAX_BLOCKS, math.ceil(len(items) / FILES_PER_BLOCK))
        ds = ray.data.from_items(items, override_num_blocks=blocks)
        ds = ds.map(read_row, fn_kwargs={"read": request.read}, num_cpus=READ_CPUS)
        ds = ds.map(
            chunk_row,
            fn_kwargs={
                "model": self.model,
                "fingerprint": config.model_fingerprint,
                "max_tokens": config.max_tokens,
                "overlap": config.overlap,
                "chunking": config.chunking,
                "embed_headings": config.embed_headings,
            },
            num_cpus=READ_CPUS,
        )
        ctx = ds.context
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        # The CPUs the encoder actors do not hold are the stages' to use, and no more.
        held = sum(p.actors * p.num_cpus for p in self.pools)
        free = max(READ_CPUS, float(ray.cluster_resources().get("CPU", 0)) - held)
        ctx.execution_options.resource_limits = ExecutionResources(cpu=free)
        ctx.execution_options.verbose_progress = False
        rows: Iterator[dict[str, Any]] = iter(ds.iter_rows())
        return rows


@dataclass
class _Batch:
    """Documents encoded in one actor call: (document, its chunks, "new" or "changed")."""

    group: list[Pending]

    def texts(self) -> list[str]:
        return [c.encoder_text for _, chunks, _ in self.group for c in chunks]


@dataclass
class ActorStats:
    """What one encoder actor did in a run (from its reports, `EncoderActor.encode`): its
    node kind, engine, device and threads; the nodes and processes it ran in (a restart is
    a new process); the chunks, tokens and seconds it encoded; the attention backends'
    calls and fallbacks; its memory watchdog's last verdict and its peak memory."""

    kind: str
    engine: str
    device: str
    threads: int
    node_ids: set[str] = field(default_factory=set)
    pids: set[int] = field(default_factory=set)
    chunks: int = 0
    tokens: int = 0
    seconds: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[str] = field(default_factory=Counter)
    memory: dict[str, Any] | None = None
    peak_rss_mb: float = 0.0
    peak_device_mb: float | None = None

    def add(self, batch: _Batch, report: dict[str, Any]) -> None:
        """Add what the actor's `report` says it did for `batch`."""
        self.node_ids.add(report["node_id"])
        self.pids.add(report["pid"])
        self.chunks += sum(len(c) for _, c, _ in batch.group)
        self.tokens += sum(c.n_tokens for _, chunks, _ in batch.group for c in chunks)
        self.seconds += report["seconds"]
        self.calls.update(report["calls"])
        self.fallbacks.update(report["fallbacks"])
        self.memory = report["memory"]
        self.peak_rss_mb = max(self.peak_rss_mb, report["peak_rss_mb"])
        if report["peak_device_mb"] is not None:
            self.peak_device_mb = max(self.peak_device_mb or 0.0, report["peak_device_mb"])

    def summary(self) -> dict[str, Any]:
        """The actor as the summary's `ray["actors"]` lists it."""
        return {
            "kind": self.kind,
            "engine": self.engine,
            "device": self.device,
            "threads": self.threads,
            "nodes": sorted(self.node_ids),
            "processes": len(self.pids),
            "chunks": self.chunks,
            "tokens": self.tokens,
            "encode_s": self.seconds,
            "backends": count_diff(self.calls, {}),
        }


@dataclass
class RayTiming:
    """The seconds of a Ray run's encoding side: `connect_s` (connecting to Ray),
    `start_s` (starting the actors), and the encoders' span, from the first batch sent
    (`first_sent`) to the last one back (`last_done`; perf_counter times, None before)."""

    connect_s: float = 0.0
    start_s: float = 0.0
    first_sent: float | None = None
    last_done: float | None = None
    span_s: float = 0.0  # set when the encoding closes

    def close(self) -> None:
        if self.first_sent is not None:
            self.span_s = (self.last_done or time.perf_counter()) - self.first_sent


class RayEncoding:
    """The `encode_phase.Encoding` of a Ray run: batches of documents go to an
    `EncoderPool` of actors (`pools`, started on the first batch; `remote_options`: the
    encode options the actors load their engines by), `in_flight` per actor, and come
    back as they finish; an actor writes its own batch when the store takes writes from
    other processes (`store_url`, `Store.url`), else the driver does. Its actors encode
    every chunk of a document (`encode_here` None)."""

    def __init__(
        self,
        store_url: str | None,
        ray_options: RayOptions,
        pools: list[PoolSpec],
        remote_options: EncodeOptions,
        connect_s: float = 0.0,
    ):
        self.store_url, self.ray_options, self.pools = store_url, ray_options, pools
        self.remote_options = remote_options
        self.name = f"attnswitch-encoder-{uuid.uuid4().hex[:8]}"
        self.timing = RayTiming(connect_s=connect_s)
        self.pool: EncoderPool | None = None
        self.todo: deque[_Batch] = deque()  # batches waiting for an actor's slot
        self.actors: dict[str, ActorStats] = {}  # actor id -> what it did
        self.infos: list[dict[str, Any]] = []  # what each actor planned, once started
        self.requeued = 0  # batches sent again after their actor was lost
        self._start: EncodeStart | None = None

    def begin(self, start: EncodeStart) -> None:
        self._start = start

    @property
    def start(self) -> EncodeStart:
        if self._start is None:
            raise RuntimeError("encoding: expected the run begun first, got none")
        return self._start

    @property
    def encode_here(self) -> None:
        return None

    @property
    def seconds(self) -> float:
        """The encoders' span (`RayTiming`)."""
        return self.timing.span_s

    def send(self, group: list[Pending], sink: DocumentSink) -> None:
        self.todo.append(_Batch(group))
        self._pump(sink, drain=False)

    def finish(self, sink: DocumentSink) -> None:
        self._pump(sink, drain=True)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.timing.close()

    def _pump(self, sink: DocumentSink, drain: bool) -> None:
        """Send queued batches to free actor slots and settle the finished ones. Blocks
        while a batch waits for a slot, and with `drain` until every batch is done."""
        pool = self.pool
        if pool is None:
            if not self.todo:
                return
            pool = self._start_pool()
        while True:
            while self.todo and pool.has_slot():
                batch = self.todo.popleft()
                pool.submit(batch.texts(), batch, self._remote_write(batch))
                if self.timing.first_sent is None:
                    self.timing.first_sent = time.perf_counter()
            if not pool.running:
                if self.todo:
                    raise RayRunError(
                        f"encoder actors: expected a live actor for {len(self.todo)} batches, "
                        f"got none ({len(pool.dropped)} died and spent their restarts)"
                    )
                return
            block = bool(self.todo) or drain
            stall = self.ray_options.stall_timeout_s
            finished = pool.wait(stall if block else 0)
            if block and not finished:
                raise TimeoutError(
                    f"encoder actors: expected a batch to finish within "
                    f"{stall:g} s, got none ({pool.running} running)"
                )
            for tag, outcome in finished:
                self._settle(tag, outcome, sink)
            if not block and not self.todo:
                return

    def _remote_write(self, batch: _Batch) -> dict[str, Any] | None:
        """What an actor needs to write `batch` itself, when the store takes writes from
        other processes (`Store.url`); None: the driver writes."""
        if self.store_url is None:
            return None
        config = self.start.config
        return {
            "url": self.store_url,
            "config": config.fingerprint,
            "run_id": self.start.run_id,
            "vector_fingerprint": config.vector_fingerprint,
            "documents": [(doc, chunks) for doc, chunks, _ in batch.group],
        }

    def _start_pool(self) -> EncoderPool:
        start = self.start
        started = time.perf_counter()
        start.progress.stage = "starting actors"
        start.on_progress(start.progress)
        self.pool = pool = EncoderPool(
            self.pools,
            self.remote_options,
            start.config.model_fingerprint,
            in_flight=self.ray_options.in_flight,
            max_restarts=self.ray_options.max_restarts,
            max_task_retries=self.ray_options.max_task_retries,
            name=self.name,
        )
        try:
            self.infos = pool.start(self.ray_options.startup_timeout_s)
        finally:
            self.timing.start_s = time.perf_counter() - started
            start.progress.load_s += self.timing.start_s
        start.progress.stage = "encoding"
        start.on_progress(start.progress)
        return pool

    def _settle(self, batch: _Batch, outcome: Encoded | Exception, sink: DocumentSink) -> None:
        """Write a finished batch, or queue it again (its actor died), or retry its documents
        one at a time (the engine failed): `encode.settle`, as `LocalEncoding.send` does."""
        from ray.exceptions import RayActorError, RayTaskError

        if isinstance(outcome, RayActorError):
            self.requeued += 1
            log.warning(
                "run: an encoder actor was lost (%s); its batch of %d documents goes to another",
                type(outcome).__name__,
                len(batch.group),
            )
            self.todo.appendleft(batch)
            return
        vectors: Vectors | Exception | None
        if isinstance(outcome, BaseException):
            cause = outcome.cause if isinstance(outcome, RayTaskError) else outcome
            vectors = cause if isinstance(cause, Exception) else RuntimeError(str(outcome))
        else:
            vectors, report = outcome  # vectors None: the actor wrote them
            self.timing.last_done = time.perf_counter()
            self._record(batch, report)
        settle(
            batch.group,
            vectors,
            write=sink.write,
            fail=sink.fail,
            retry=lambda singles: self.todo.extendleft(map(_Batch, reversed(singles))),
        )

    def _record(self, batch: _Batch, report: dict[str, Any]) -> None:
        stats = self.actors.get(report["actor_id"])
        if stats is None:
            stats = self.actors[report["actor_id"]] = ActorStats(
                report["kind"], report["engine"], report["device"], report["threads"]
            )
        stats.add(batch, report)

    # -- summary ------------------------------------------------------------------------

    def report(self, calls_before: AttentionCounts) -> EngineReport:
        """The actors' side of the summary (`calls_before` is this process's: unused, the
        actors count their own calls)."""
        ray = import_ray()
        stats = list(self.actors.values())
        calls: Counter[str] = Counter()
        fallbacks: Counter[str] = Counter()
        for s in stats:
            calls.update(s.calls)
            fallbacks.update(s.fallbacks)
        devices = sorted({s.device for s in stats})
        peaks = [s.peak_device_mb for s in stats if s.peak_device_mb is not None]
        try:
            nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
            address = ray.get_runtime_context().gcs_address
        except Exception:  # disconnected already
            nodes, address = None, None
        summary = {
            "address": address,
            "nodes": nodes,
            "connect_s": self.timing.connect_s,
            "start_s": self.timing.start_s,
            "read_cpus": READ_CPUS,
            "pools": [dataclasses.asdict(p) for p in self.pools],
            "kinds": self._kinds(stats),
            "actors": [s.summary() for s in stats],
            "requeued_batches": self.requeued,
        }
        return {
            "engine": None,
            "device": ", ".join(devices) or None,
            "backends": count_diff(calls, {}),
            "fallbacks": count_diff(fallbacks, {}),
            "peak_device_mb": max(peaks) if peaks else None,
            "memory": _memory(stats),
            "ray": summary,
        }

    def time_parts(self, phases: Phases, progress: RunProgress, wall: float) -> dict[str, float]:
        """Where the wall time went: measuring, listing, Ray's connect and the actors' start
        (`load`), and the encoders' span (`encode`: from the first batch sent to the last
        one back); reading, chunking and storing run inside that span, on the cluster and
        in this process, so they are not parts of their own here."""
        return phases.breakdown(
            wall,
            measure=progress.measure_s,
            load=progress.load_s,
            encode=self.seconds,
            read=0.0,
            chunk=0.0,
            store=0.0,
        )

    def _kinds(self, stats: list[ActorStats]) -> dict[str, dict[str, Any]]:
        """Per node kind: what its pool did. `tokens_per_s` is the pool's rate while busy:
        the sum over its actors of tokens / busy seconds."""
        out = {}
        for kind in KINDS:
            mine = [s for s in stats if s.kind == kind]
            infos = [i for i in self.infos if i["kind"] == kind]
            if not mine and not infos:
                continue
            calls: Counter[str] = Counter()
            for s in mine:
                calls.update(s.calls)
            devices = sorted({i["device"] for i in infos} | {s.device for s in mine})
            note = None
            if kind != "cpu" and devices == ["cpu"]:
                note = (
                    f"these actors hold a {kind.upper()} resource of Ray, but their node "
                    f"shows no {kind.upper()} device: they encoded on its CPU"
                )
            out[kind] = {
                "actors": len(infos),
                "nodes": len({i["node_id"] for i in infos} | {n for s in mine for n in s.node_ids}),
                "chunks": sum(s.chunks for s in mine),
                "tokens": sum(s.tokens for s in mine),
                "encode_s": sum(s.seconds for s in mine),
                "tokens_per_s": sum(s.tokens / s.seconds for s in mine if s.seconds > 0) or None,
                "engines": sorted({i["engine"] for i in infos} | {s.engine for s in mine}),
                "devices": devices,
                "backends": count_diff(calls, {}),
                "restarts": sum(len(s.pids) - 1 for s in mine),
                "peak_rss_mb": max((s.peak_rss_mb for s in mine), default=None),
                "note": note,
            }
        return out


def _memory(stats: list[ActorStats]) -> dict[str, Any]:
    """The actors' memory watchdogs, as one verdict: growing when any actor's is."""
    verdicts = [(s.kind, s.memory) for s in stats if s.memory]
    if not verdicts:
        return {"growing": False, "samples": 0, "reason": "no encoding: memory not sampled"}
    growing = [f"{kind} actor: {v['reason']}" for kind, v in verdicts if v["growing"]]
    reason = (
        "; ".join(growing)
        if growing
        else f"none of {len(verdicts)} actors growing (e.g. {verdicts[0][1]['reason']})"
    )
    return {
        "growing": bool(growing),
        "samples": sum(v["samples"] for _, v in verdicts),
        "source": ", ".join(sorted({str(v.get("source")) for _, v in verdicts})),
        "reason": reason,
    }


def run_on_ray(
    root: str | os.PathLike[str],
    store: Store,
    options: RunOptions = RunOptions(),
    ray_options: RayOptions = RayOptions(),
    *,
    on_progress: Callable[[RunProgress], None] | None = None,
) -> RunSummary:
    """Index `root` into `store` on Ray (see the module doc); the summary is `run`'s, with
    `ray` filled: the pools, and per node kind its actors, nodes, chunks, tokens, tokens/s,
    engines, devices and attention backends. Connects to Ray unless this process already
    is (and then leaves the connection as it found it). The run is the plain one: the
    quick pass (`EncodeOptions.quick`) is the single-process run's."""
    started = time.perf_counter()
    root = check_root(root)
    ray = import_ray()
    connected_here = connect(ray_options)
    try:
        connect_s = time.perf_counter() - started
        nodes = sum(
            1 for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0
        )
        pools = plan_pools(
            ray.cluster_resources(),
            nodes=nodes,
            cpu_actors=ray_options.cpu_actors,
            gpu_actors=ray_options.gpu_actors,
            tpu_actors=ray_options.tpu_actors,
            cpus_per_actor=ray_options.cpus_per_actor,
        )
        # Workers load the model by absolute path (None: each node's packaged default), and
        # the engine and precision as asked (each actor resolves "auto" on its node).
        model = options.encode.model
        remote = dataclasses.replace(
            options.encode, model=None if model is None else str(Path(model).resolve())
        )
        job = RunJob(
            RunTarget(root, store, IndexWriter(store)),
            dataclasses.replace(options, encode=dataclasses.replace(options.encode, quick=False)),
            RaySource(ray_options, pools, remote.model),
            RayEncoding(store.url, ray_options, pools, remote, connect_s),
            on_progress,
        )
        job.progress.load_s = connect_s  # like a model load: not encoding time
        return drive(job, started)
    finally:
        if connected_here:
            ray.shutdown()
