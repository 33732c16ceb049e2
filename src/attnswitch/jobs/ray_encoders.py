"""Encoder actors for a Ray run: one model per actor, on the accelerator (or CPU slot) that
Ray placed it on, each planning its own engine and attention backend there.

- `plan_pools(cluster, options)` sizes one pool per node kind ("gpu", "tpu", "cpu") from
  the cluster's resources, and refuses pools the cluster cannot hold (Ray would otherwise
  wait for them forever).
- `EncoderActor` (made a Ray actor by `EncoderPool`) loads the model on start, checks that
  its model files are the driver's (same fingerprint), picks the engine for what it got
  (`run.resolve_engine`: the run's engine, or with "auto" the fastest engine measured on
  that node's device with parity to torch float32) and encodes batches of chunk texts. Each call returns the vectors and a report:
  node kind, node id, device, engine, attention backends used, seconds, memory. With a
  server store (`Store.url`, PostgreSQL) it writes the batch's documents itself, each in
  its own transaction (`encode_and_write`), and returns no vectors.
- `EncoderPool` holds the actors and dispatches batches to them: each actor takes up to
  `in_flight` batches (so the next is queued while one runs), the least busy first, and
  `wait` returns the finished ones. Nothing more: placement is Ray's, and so is fault
  tolerance. Actors are created with `max_restarts` and `max_task_retries`, so an actor
  that dies (a node lost, `ray.kill(actor, no_restart=False)`) is restarted by Ray and its
  pending batches run again there; the caller only sees them finish later. An actor whose
  restarts are spent raises `RayActorError` for its batches: the pool drops it and the
  caller queues them again on the others.

Every Ray import is inside a function: importing this module imports no Ray.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from attnswitch.errors import AttnswitchError, ConfigError

if TYPE_CHECKING:
    import numpy.typing as npt
    from ray import ObjectRef

    from attnswitch.indexing.store import Store
    from attnswitch.jobs.encode import EncodeOptions

    # Vectors float32 `[N, dim]`, one per text.
    Vectors = npt.NDArray[np.float32]
    # What an encoder actor's call returns: its vectors (None: it wrote them) and report.
    Encoded = tuple[Vectors | None, dict[str, Any]]

KINDS = ("gpu", "tpu", "cpu")
# CPUs left to the Ray Data stages (listing, reading, chunking) when pools are sized.
READ_CPUS = 0.5


class RayUnavailableError(AttnswitchError, ImportError):
    """Ray is not installed: the `ray` extra of attnswitch is needed."""


class RayRunError(AttnswitchError, RuntimeError):
    """The Ray cluster cannot run the encoders (they fail to start, or all died)."""


def import_ray() -> ModuleType:
    """The `ray` module, or a clear error naming the extra that installs it."""
    try:
        import ray
        import ray.data  # noqa: F401  (ray without its data extra lacks pyarrow)
    except ImportError as exc:
        raise RayUnavailableError(
            f"ray: expected Ray with Ray Data for --ray (pip install 'attnswitch[ray]'), "
            f"got {type(exc).__name__}: {exc}"
        ) from None
    return ray


@dataclass(frozen=True)
class PoolSpec:
    """`actors` encoder actors of one node kind, each asking Ray for `num_cpus` CPUs,
    `num_gpus` GPUs and `resources` (e.g. {"TPU": 1})."""

    kind: str
    actors: int
    num_cpus: float
    num_gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)

    def ray_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.resources:
            out["resources"] = dict(self.resources)
        return out


def plan_pools(
    cluster: dict[str, float],
    *,
    nodes: int = 1,
    cpu_actors: int | None = None,
    gpu_actors: int | None = None,
    tpu_actors: int | None = None,
    cpus_per_actor: float | None = None,
) -> list[PoolSpec]:
    """The encoder pools for a cluster with these total resources (`ray.cluster_resources()`)
    over `nodes` nodes with CPUs.

    None means auto: one GPU actor per GPU, one TPU actor per TPU chip (Ray's "TPU"
    resource), and CPU actors only where there is no accelerator. An accelerator actor
    also holds one CPU, and `READ_CPUS` stay free for the read and chunk tasks. CPU actors
    (`cpus_per_actor` CPUs each, as many as fit when only that is given):

    - on one node, one per CPU, sharing what is left (at most one CPU each): one actor per
      core with one torch thread each is the fastest layout measured on CPU (see
      docs/results/ray_scaling.md), and one node's free CPU cannot be split up;
    - on several nodes, one CPU each, as many as fit: whole-CPU actors leave whole CPUs
      free, so some node always has room for the read and chunk tasks (fractions spread
      over nodes could leave each with less than `READ_CPUS`, and the reading would wait
      forever).

    Pools the cluster cannot hold are refused (ValueError).
    """
    if cpus_per_actor is not None and not cpus_per_actor > 0:
        raise ConfigError(f"cpus_per_actor: expected > 0, got {cpus_per_actor}")
    for name, n in (
        ("cpu_actors", cpu_actors),
        ("gpu_actors", gpu_actors),
        ("tpu_actors", tpu_actors),
    ):
        if n is not None and n < 0:
            raise ConfigError(f"{name}: expected >= 0, got {n}")
    cpus, gpus, tpus = (float(cluster.get(k, 0)) for k in ("CPU", "GPU", "TPU"))
    gpu = int(gpus) if gpu_actors is None else gpu_actors
    tpu = int(tpus) if tpu_actors is None else tpu_actors
    for name, n, have, resource in (
        ("gpu_actors", gpu, gpus, "GPU"),
        ("tpu_actors", tpu, tpus, "TPU"),
    ):
        if n > have:
            raise ConfigError(
                f"{name}: expected at most {int(have)} (the cluster's {resource} "
                f"resources), got {n}"
            )
    left = cpus - gpu - tpu - READ_CPUS
    shared = cpus_per_actor is None and nodes <= 1
    if cpu_actors is not None:
        cpu = cpu_actors
    elif gpu or tpu:
        cpu = 0
    elif shared:
        cpu = max(1, math.floor(cpus))
    else:
        cpu = max(1, math.floor(left / (cpus_per_actor or 1.0)))
    if gpu + tpu + cpu == 0:
        raise ConfigError(
            "pools: expected at least one encoder actor, got none "
            "(--ray-cpu-actors, --ray-gpu-actors, --ray-tpu-actors)"
        )
    per = cpus_per_actor or 1.0
    if shared:  # Ray counts resources in units of 1e-4
        per = min(1.0, math.floor(max(left, 0.0) / max(cpu, 1) * 1e4) / 1e4)
    if cpu and (per <= 0 or cpu * per > left + 1e-9):
        most = max(0, math.floor(left / per)) if per > 0 else 0
        raise ConfigError(
            f"cpu_actors: {cpu} actors of {per:g} CPU, with {gpu + tpu} accelerator actors "
            f"of 1 CPU each, leave less than {READ_CPUS:g} of the cluster's {cpus:g} CPUs "
            f"for reading and chunking; expected at most {most} CPU actors (or fewer CPUs "
            "per actor)"
        )
    pools = [
        PoolSpec("gpu", gpu, 1.0, num_gpus=1.0),
        PoolSpec("tpu", tpu, 1.0, resources={"TPU": 1.0}),
        PoolSpec("cpu", cpu, float(per)),
    ]
    return [p for p in pools if p.actors]


class EncoderActor:
    """One encoder on one node (see the module doc). `options` is the run's `EncodeOptions`;
    `model_fingerprint` the driver's (`IndexConfig.model_fingerprint`): an actor whose
    model files differ refuses to start."""

    # The store `encode_and_write` writes to, opened by its first call, and its URL.
    _store: Store
    _store_url: str

    def __init__(self, kind: str, options: EncodeOptions, model_fingerprint: str) -> None:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        import ray

        from attnswitch.engines import ModelSpec
        from attnswitch.engines.model import model_fingerprint as fingerprint_of
        from attnswitch.indexing.config import IndexMismatchError
        from attnswitch.jobs.encode import (
            ChunkEncoder,
            device_name,
            load_encoder,
            resolve_engine,
        )

        started = time.perf_counter()
        ctx = ray.get_runtime_context()
        self.options = options
        spec = ModelSpec.load(options.model)
        found = fingerprint_of(spec.path)
        if found != model_fingerprint:
            raise IndexMismatchError(
                f"model: expected the driver's model files ({model_fingerprint[:12]}) on node "
                f"{ctx.get_node_id()[:12]}, got {found[:12]} at {spec.path}; install the same "
                "model on every node"
            )
        engine, _ = resolve_engine(options)
        # the resources Ray gave this actor (ray leaves the method unannotated)
        assigned: dict[str, float] = ctx.get_assigned_resources()  # type: ignore[no-untyped-call]
        threads = max(1, math.floor(assigned.get("CPU", 1.0)))
        if engine == "torch":
            import torch

            torch.set_num_threads(threads)  # the CPUs Ray gave this actor, no more
        self.encoding = ChunkEncoder(
            load_encoder(options, spec), options.chunks_per_call, options.batch_tokens
        )
        self.info = {
            "kind": kind,
            "node_id": ctx.get_node_id(),
            "actor_id": ctx.get_actor_id(),
            "pid": os.getpid(),
            "engine": engine,
            "device": device_name(self.encoding.encoder) or "unknown",
            "threads": threads,
            "resources": dict(assigned),
            "load_s": time.perf_counter() - started,
        }

    def ready(self) -> dict[str, Any]:
        """What this actor planned (node kind, node id, engine, device, load seconds)."""
        return dict(self.info)

    def encode_and_write(
        self, texts: Sequence[str], write: dict[str, Any]
    ) -> tuple[None, dict[str, Any]]:
        """Encode `texts` (`encode`), then write `write["documents"]` ([(document, its
        chunks)], the texts' owners in order) to the store at `write["url"]`, each document
        in its own transaction, under `write["config"]` and `write["run_id"]`. A retried
        call writes them again: `write_document` replaces a document's chunks."""
        from attnswitch.indexing.location import open_store

        vectors, report = self.encode(texts)
        if getattr(self, "_store_url", None) != write["url"]:
            if getattr(self, "_store", None) is not None:
                self._store.close()
            self._store, self._store_url = open_store(write["url"]), write["url"]
        start = 0
        for doc, chunks in write["documents"]:
            self._store.write_document(
                doc,
                chunks,
                vectors[start : start + len(chunks)],
                config=write["config"],
                run_id=write["run_id"],
                vector_fingerprint=write.get("vector_fingerprint"),
            )
            start += len(chunks)
        return None, report

    def encode(self, texts: Sequence[str]) -> tuple[Vectors, dict[str, Any]]:
        """Vectors float32 `[len(texts), dim]` of `texts`, in encode calls of at most
        `chunks_per_call` texts, and a report of the call (`info` plus seconds, attention
        backend calls and fallbacks, memory)."""
        from attnswitch.jobs.encode import (
            count_diff,
            memory_report,
            peak_device_mb,
            peak_rss_mb,
        )
        from attnswitch.observe.metrics import stats

        before, seconds_before = stats(), self.encoding.seconds
        vectors = self.encoding.encode(texts)
        after = stats()
        report = {
            **self.info,
            "seconds": self.encoding.seconds - seconds_before,
            "calls": count_diff(after["calls"], before["calls"]),
            "fallbacks": count_diff(after["fallbacks"], before["fallbacks"]),
            "memory": memory_report(self.encoding.watchdog),
            "peak_rss_mb": peak_rss_mb(),
            "peak_device_mb": peak_device_mb(self.encoding.encoder),
        }
        return vectors, report


@dataclass
class _Actor:
    kind: str
    handle: Any  # a Ray ActorHandle: ray does not type the methods called through one
    busy: int = 0


class EncoderPool:
    """The encoder actors of a run, over one or more node kinds (see the module doc).

    `submit(texts, tag, write)` sends a batch to the least busy actor with a free slot
    (with `write`, see `EncoderActor.encode_and_write`, the actor writes it);
    `wait(timeout)` returns `[(tag, result or exception)]` for the batches that finished
    (a result is `(vectors, report)`, vectors None when the actor wrote them); `close()` kills the actors. Actors are named
    `{name}-{kind}-{i}` (`ray list actors`, `ray.get_actor`).
    """

    def __init__(
        self,
        pools: Sequence[PoolSpec],
        options: EncodeOptions,
        model_fingerprint: str,
        *,
        in_flight: int = 2,
        max_restarts: int = 3,
        max_task_retries: int = 3,
        name: str = "attnswitch-encoder",
    ):
        if in_flight < 1:
            raise ConfigError(f"in_flight: expected >= 1, got {in_flight}")
        self.pools = list(pools)
        self.name = name
        self.in_flight = in_flight
        self._args = (options, model_fingerprint)
        self._fault = {"max_restarts": max_restarts, "max_task_retries": max_task_retries}
        self.actors: list[_Actor] = []
        self.dropped: list[_Actor] = []
        self.infos: list[dict[str, Any]] = []
        self._running: dict[ObjectRef[Encoded], tuple[_Actor, Any]] = {}  # ref: (actor, tag)

    def start(self, timeout: float) -> list[dict[str, Any]]:
        """Create the actors and wait until each has loaded its model (`ready`).

        Accelerator pools start first and are waited for before the CPU pool is created,
        so that CPU actors cannot take the CPUs an accelerator actor needs on its node."""
        ray = import_ray()
        remote = ray.remote(EncoderActor)
        deadline = time.monotonic() + timeout
        for group in (
            [p for p in self.pools if p.kind != "cpu"],
            [p for p in self.pools if p.kind == "cpu"],
        ):
            new = [
                _Actor(
                    p.kind,
                    remote.options(
                        name=f"{self.name}-{p.kind}-{i}", **p.ray_options(), **self._fault
                    ).remote(p.kind, *self._args),
                )
                for p in group
                for i in range(p.actors)
            ]
            if not new:
                continue
            self.actors += new
            refs = [a.handle.ready.remote() for a in new]
            done, pending = ray.wait(
                refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic())
            )
            if pending:
                waiting = sorted({a.kind for a, r in zip(new, refs) if r in pending})
                asks = {p.kind: p.ray_options() for p in self.pools if p.kind in waiting}
                raise TimeoutError(
                    f"encoder actors: expected all ready within {timeout:g} s, got "
                    f"{len(pending)} of {len(refs)} not ready ({', '.join(waiting)}); "
                    f"the cluster may lack the resources they ask for: {asks}"
                )
            try:
                self.infos += ray.get(done)
            except ray.exceptions.RayActorError as exc:  # its __init__ raised
                raise RayRunError(f"encoder actors: expected all to start, got {exc}") from exc
        return self.infos

    @property
    def running(self) -> int:
        return len(self._running)

    def has_slot(self) -> bool:
        return any(a.busy < self.in_flight for a in self.actors)

    def submit(self, texts: list[str], tag: Any, write: dict[str, Any] | None = None) -> None:
        actor = min((a for a in self.actors if a.busy < self.in_flight), key=lambda a: a.busy)
        ref = (
            actor.handle.encode.remote(texts)
            if write is None
            else actor.handle.encode_and_write.remote(texts, write)
        )
        actor.busy += 1
        self._running[ref] = (actor, tag)

    def wait(self, timeout: float | None) -> list[tuple[Any, Encoded | Exception]]:
        """The batches that finished within `timeout` seconds (None: until one does).
        An actor that raised `RayActorError` because it is dead for good (`ActorDiedError`)
        is dropped from the pool."""
        ray = import_ray()
        from ray.exceptions import ActorDiedError

        if not self._running:
            return []
        done, _ = ray.wait(list(self._running), num_returns=1, timeout=timeout)
        if done:  # and whatever else is finished by now
            done, _ = ray.wait(list(self._running), num_returns=len(self._running), timeout=0)
        out: list[tuple[Any, Encoded | Exception]] = []
        for ref in done:
            actor, tag = self._running.pop(ref)
            actor.busy -= 1
            try:
                out.append((tag, ray.get(ref)))
            except Exception as exc:  # the caller tells task errors from actor deaths
                if isinstance(exc, ActorDiedError) and actor in self.actors:
                    self.actors.remove(actor)
                    self.dropped.append(actor)
                out.append((tag, exc))
        return out

    def handles(self, kind: str | None = None) -> list[Any]:
        """The live actors' handles (of one kind), e.g. to `ray.kill` one in a test."""
        return [a.handle for a in self.actors if kind is None or a.kind == kind]

    def close(self) -> None:
        ray = import_ray()
        for actor in self.actors + self.dropped:
            try:
                ray.kill(actor.handle)
            except Exception:  # already gone
                pass
        self.actors, self._running = [], {}
