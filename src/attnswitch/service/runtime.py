"""The service's working parts wired together: the encoder, the queue and its batcher, the
worker threads, the search index, the jobs, the metrics and the readiness state.

Threads: one model thread runs every encoder call (request batches and job encoding take
turns on it); a small CPU pool tokenises requests and renders large responses; the search
index has a small pool of threads, each with its own connection to the store, and every
search stops at its request's deadline (`index.SearchIndex`); a job has its own thread,
and the jobs' rows one more. The
event loop only parses, admits, routes and awaits, so health checks stay fast under load.

`embed` is the one path to the model for requests: readiness check (503), admission into
the bounded queue (429 with Retry-After when full, or when the work queued ahead would
outlast the request's deadline; a request's own work is estimated from its texts' lengths,
each at most the model's token limit), tokenising a bounded prefix of each text
(`limits.token_prefix`; strict requests: 422 for a text over the model's limit; 400 for a
text with no token but the tokenizer's own, such as "\x00" or a zero-width space),
batching, all within the request's deadline (504).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections import Counter
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnswitch.indexing.requests import Mode
from attnswitch.service.access import AccessControl
from attnswitch.service.audit import open_audit_log
from attnswitch.service.batching import Batcher, QueueFull
from attnswitch.service.config import ServiceConfig
from attnswitch.service.errors import ServiceError
from attnswitch.service.index import SearchIndex
from attnswitch.service.jobs import JobManager
from attnswitch.service.lifecycle import Readiness
from attnswitch.service.limits import CHARS_PER_TOKEN, token_prefix

if TYPE_CHECKING:
    from attnswitch.indexing.searcher import SearchResult
from attnswitch.service.memory import MemoryGuard
from attnswitch.service.metrics import ServiceMetrics

log = logging.getLogger("attnswitch.service")
WARMUP_TEXT = "attnswitch warms up its model"


class _SerialEncoder:
    """An encoder whose `encode` runs on the model thread (for indexing jobs); any other
    attribute is the wrapped encoder's."""

    def __init__(self, encoder: Any, executor: Executor):
        self._encoder = encoder
        self._executor = executor

    def encode(self, texts: Any, **kwargs: Any) -> np.ndarray:
        return self._executor.submit(self._encoder.encode, texts, **kwargs).result()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)


def model_name(path: Path) -> str:
    """A readable name for a model folder (the packaged default lives in `<package>/model`)."""
    return path.parent.name if path.name == "model" else path.name


class Service:
    """See the module doc. Create inside or outside a loop; `start()` and `stop()` run on
    the serving loop (the app's lifespan calls them)."""

    def __init__(self, config: ServiceConfig):
        self.config = config
        self.readiness = Readiness()
        self.access = AccessControl(config.access_file, config.api_key_file)
        open_audit_log(config.audit_log)
        self.model_pool = ThreadPoolExecutor(1, thread_name_prefix="attnswitch-model")
        self.cpu_pool = ThreadPoolExecutor(2, thread_name_prefix="attnswitch-cpu")
        self.metrics = ServiceMetrics(
            queue_depth=lambda: float(self.batcher.depth),
            search_busy=lambda: float(self.index.busy),
        )
        self.batcher = Batcher(
            self._encode_ids,
            self.model_pool,
            capacity=config.max_queue_items,
            batch_tokens=config.batch_tokens,
            max_wait_s=config.max_wait_ms / 1e3,
            on_batch=self.metrics.record_batch,
        )
        self.memory = MemoryGuard(self.metrics.registry, config.memwatch_interval_s)
        self.index = SearchIndex(
            config.store_location, jobs=config.jobs_folder is not None, fill=config.query_fill
        )
        self.jobs = JobManager(
            config.store_location, config.jobs_folder, self._job_encoder, self._run_options
        )
        self.encoder: Any = None
        self.special_tokens = 0  # the tokens the model's tokenizer adds to every text
        self.model = "attnswitch"
        self.engine = config.engine
        self.precision = config.precision or "auto"
        self.model_arg: str | None = config.model
        self.started_at = int(time.time())
        self.counts: Counter[str] = Counter()
        self._tasks: list[asyncio.Task] = []

    # -- life ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the batcher and the warm-up; returns at once (see `lifecycle`)."""
        self._tasks = [
            asyncio.create_task(self.batcher.run(), name="attnswitch-batcher"),
            asyncio.create_task(self._warm_up(), name="attnswitch-warm-up"),
            asyncio.create_task(self.memory.run(), name="attnswitch-memwatch"),
        ]

    async def _warm_up(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.model_pool, self._load)
        except Exception as exc:
            reason = f"warm-up failed: {type(exc).__name__}: {exc}"
            log.error("attnswitch serve: %s", reason)
            self.readiness.set_failed(reason)
            return
        # jobs a dead (or drained) server left unfinished go on, now that the model is here;
        # before ready, so that no client reads such a job between its two lives
        try:
            await loop.run_in_executor(None, self.jobs.resume)
        except ServiceError as exc:
            log.warning("attnswitch serve: interrupted jobs not resumed: %s", exc.message)
        except Exception:  # a bug in resuming must not keep the server from serving
            log.exception("attnswitch serve: interrupted jobs not resumed")
        self.readiness.set_ready()
        # on stderr like the stop summary: the one line that says what serves (the engine
        # "auto" picked), whatever logging the host process configured
        print(
            f"attnswitch serve: ready {json.dumps(self.serving(), sort_keys=True)}",
            file=sys.stderr,
            flush=True,
        )

    def serving(self) -> dict[str, Any]:
        """What serves: the model's name, the engine (the auto pick or the one asked for),
        the precision, and what the engine runs on."""
        return {
            "model": self.model,
            "engine": self.engine,
            "precision": self.precision,
            "runs_on": self.encoder.describe(),
        }

    def _load(self) -> None:
        """Resolve the model (the index's own unless told otherwise), load it, encode once."""
        from attnswitch.engines import get_engine
        from attnswitch.indexing.config import model_fingerprint, special_tokens

        cfg = self.config
        model, engine, precision = cfg.model, cfg.engine, cfg.precision
        if (stored := self.index.stored_config()) is not None:  # None too when unreadable
            model = stored.model if cfg.model is None else model
            precision = precision or stored.precision
        precision = precision or "auto"
        # "auto" (engine or precision) is the measured pick of `attnswitch run` on this
        # machine (engines.autopick, engines.autoprecision)
        encoder = get_engine(model, engine, precision)
        precision = encoder.precision
        encoder.encode([WARMUP_TEXT])
        self.special_tokens = special_tokens(encoder.spec.tokenizer())
        self.index.fingerprint = model_fingerprint(encoder.spec.path)
        self.model_arg, self.engine, self.precision = model, encoder.engine, precision
        self.model = model_name(Path(encoder.spec.path))
        self.encoder = encoder

    def begin_drain(self) -> None:
        """Stop taking work (called from the signal handler, before uvicorn drains)."""
        self.readiness.drain()
        self.jobs.request_stop()

    async def stop(self) -> None:
        """After uvicorn drained the connections: stop the job, the batcher, the threads;
        log what was admitted and answered."""
        self.begin_drain()
        loop = asyncio.get_running_loop()
        job_stopped = await loop.run_in_executor(None, self.jobs.stop, self.config.drain_timeout_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.counts["failed_at_shutdown"] += self.batcher.fail_pending(
            ServiceError(503, "server: shutting down", code="draining")
        )
        await loop.run_in_executor(None, self.index.close)
        self.model_pool.shutdown(wait=False, cancel_futures=True)
        self.cpu_pool.shutdown(wait=False, cancel_futures=True)
        summary = self.summary()
        summary["job_stopped"] = job_stopped
        await loop.run_in_executor(None, self.jobs.close)
        print(
            f"attnswitch serve: stopped {json.dumps(summary, sort_keys=True)}",
            file=sys.stderr,
            flush=True,
        )

    def summary(self) -> dict[str, Any]:
        """Requests admitted to the queue and how each ended; `unanswered` counts admitted
        requests that got no answer (0 after a clean drain)."""
        c = self.counts
        ended = sum(
            c[k] for k in ("completed", "timed_out", "refused", "failed", "failed_at_shutdown")
        )
        return {
            **{
                k: c[k]
                for k in (
                    "admitted",
                    "completed",
                    "timed_out",
                    "refused",
                    "failed",
                    "failed_at_shutdown",
                    "queue_full",
                )
            },
            "unanswered": c["admitted"] - ended,
            "jobs": self.jobs.counts(),
        }

    # -- requests --------------------------------------------------------------------------

    def _encode_ids(self, ids: list[list[int]]) -> np.ndarray:
        return self.encoder.encode_ids(ids)

    def _job_encoder(self) -> Any:
        if self.encoder is None:
            raise RuntimeError("encoder: expected a loaded model, got none (still warming up)")
        return _SerialEncoder(self.encoder, self.model_pool)

    def _run_options(self) -> Any:
        from attnswitch.jobs.options import EncodeOptions, RunOptions

        # the engine as asked for ("auto" unless --engine named one), not the one it
        # resolved to, so that a job's summary gives the real reason for the pick
        return RunOptions(
            encode=EncodeOptions(
                model=self.model_arg,
                engine=self.config.engine,
                precision=self.precision,
                chunks_per_call=self.config.job_chunks_per_call,
            )
        )

    def deadline(self, requested: float | None) -> float:
        """The loop time by which a request must be answered: the server's timeout, or the
        client's shorter one (`X-Request-Timeout`)."""
        timeout = self.config.request_timeout_s
        if requested is not None and 0 < requested < timeout:
            timeout = requested
        return asyncio.get_running_loop().time() + timeout

    async def embed(
        self,
        texts: list[str],
        *,
        truncate: bool,
        route: str,
        deadline: float,
        param: str = "input",
        is_list: bool = True,
    ) -> tuple[np.ndarray, int]:
        """Vectors float32 `[len(texts), dim]` and the model tokens they took (see the
        module doc for the refusals)."""
        self.readiness.check()
        loop = asyncio.get_running_loop()
        try:
            ticket = self.batcher.admit(
                len(texts), within_s=deadline - loop.time(), tokens=self._token_estimate(texts)
            )
        except QueueFull as exc:
            raise self._queue_full(exc) from None
        self.counts["admitted"] += 1
        try:
            async with asyncio.timeout_at(deadline):
                ids = await loop.run_in_executor(
                    self.cpu_pool, self._tokenize, texts, truncate, param, is_list
                )
                vectors = await self.batcher.encode(ticket, ids, within_s=deadline - loop.time())
        except QueueFull as exc:  # its real token count no longer fits in time
            self.counts["refused"] += 1
            raise self._queue_full(exc) from None
        except TimeoutError:
            self.counts["timed_out"] += 1
            self.metrics.rejected.labels("deadline").inc()
            raise ServiceError(
                504,
                "deadline: expected an answer within the request's "
                "timeout, got none in time; retry, or send fewer texts",
                code="deadline_exceeded",
            ) from None
        except ServiceError as exc:
            self.counts["refused" if exc.status < 500 else "failed"] += 1
            raise
        except BaseException:
            self.counts["failed"] += 1
            raise
        finally:
            ticket.release()
        self.counts["completed"] += 1
        tokens = sum(len(row) for row in ids)
        self.metrics.tokens.labels(route).inc(tokens)
        self.metrics.items.labels(route).inc(len(texts))
        return vectors, tokens

    def _token_estimate(self, texts: list[str]) -> int:
        """The model tokens `texts` will likely take, before they are tokenised: about 4
        characters a token, at most the model's limit each (what a long text costs once
        cut; only its prefix is tokenised, `limits.token_prefix`)."""
        limit = self.encoder.spec.max_seq_length
        return sum(min(limit, len(text) // 4 + self.special_tokens + 1) for text in texts)

    def _queue_full(self, exc: QueueFull) -> ServiceError:
        """The 429 for a refused admission, counted."""
        self.counts["queue_full"] += 1
        self.metrics.rejected.labels("queue_full").inc()
        return ServiceError(
            429, str(exc), code="queue_full", headers={"Retry-After": str(exc.retry_after)}
        )

    def _tokenize(
        self, texts: list[str], truncate: bool, param: str, is_list: bool
    ) -> list[list[int]]:
        from attnswitch.engines import EncodeInputError

        for i, text in enumerate(texts):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:  # JSON may carry lone surrogates ("\ud800")
                where = f"{param}[{i}]" if is_list else param
                raise ServiceError(
                    422,
                    f"{where}: expected Unicode text, got an unpaired "
                    f"surrogate at character {exc.start}",
                    code="invalid_text",
                    param=where,
                ) from None
        limit = self.encoder.spec.max_seq_length
        prefixes = [token_prefix(text, limit) for text in texts]
        for i, (text, prefix) in enumerate(zip(texts, prefixes)):
            if not truncate and len(prefix) < len(text):
                where = f"{param}[{i}]" if is_list else param
                raise ServiceError(
                    422,
                    f"{where}: expected at most {limit} tokens for this "
                    f'model (or "truncate": true), got a text of {len(text)} '
                    f"characters, more than {limit * CHARS_PER_TOKEN} this "
                    "server tokenises",
                    code="too_many_tokens",
                    param=where,
                )
        try:
            ids = self.encoder.tokenize(prefixes, truncate=truncate)
        except EncodeInputError as exc:
            where = exc.argument.replace("texts", param) if is_list else param
            message = (
                str(exc)
                .replace(exc.argument, where, 1)
                .replace("truncate=True", '"truncate": true')
            )
            raise ServiceError(422, message, code="too_many_tokens", param=where) from None
        for i, row in enumerate(ids):
            if len(row) <= self.special_tokens:
                where = f"{param}[{i}]" if is_list else param
                raise ServiceError(
                    400,
                    f"{where}: expected a text with at least one token "
                    "for this model, got none (only characters the tokenizer "
                    "drops)",
                    code="empty_input",
                    param=where,
                )
        return ids

    async def search(
        self,
        query: str,
        k: int,
        deadline: float,
        mode: str = Mode.HYBRID,
        ef: int | None = None,
        where: Any = None,
        group: str = "chunk",
    ) -> tuple[SearchResult, int]:
        """The answer for `query` (`searcher.SearchResult`: the `k` best chunks for
        `requests.Mode`, ANN beam `ef`, only documents the filter `where` keeps, grouped by
        `group` ("chunk" or "document": `requests.SearchRequest.group`); when a
        filter found nothing, how many documents it keeps; what the search encoded of an
        index not fully encoded yet) and the tokens the query's encoding took (none when
        the mode needs no vector: the query is not encoded). Encoding, waiting for a search thread and the
        search itself all end by `deadline` (504); the search's own work stops there too
        (`index.SearchIndex.search`), so its thread is free again for the next."""
        from attnswitch.indexing.requests import SearchRequest
        from attnswitch.indexing.store_errors import StoreInputError

        try:
            request = SearchRequest(query, k, mode, where, ef, group)
        except StoreInputError as exc:  # the schema admits only what the request does
            raise ServiceError(422, str(exc), code="invalid_type", param=exc.argument) from None
        vector, tokens = None, 0
        if request.needs_vector:
            vectors, tokens = await self.embed(
                [query],
                truncate=True,
                route="/v1/search",
                deadline=deadline,
                param="query",
                is_list=False,
            )
            vector = vectors[0]
        loop = asyncio.get_running_loop()
        # the deadline on the clock the search threads read (the loop's may be another)
        stop_at = time.monotonic() + (deadline - loop.time())
        try:
            async with asyncio.timeout_at(deadline):
                result = await loop.run_in_executor(
                    self.index.executor, self.index.search, request, vector, stop_at
                )
        except StoreInputError as exc:
            raise ServiceError(409, f"index: {exc}", code="index_mismatch") from None
        except TimeoutError:  # the request's deadline, or the search stopped at it
            raise self.search_timed_out() from None
        return result, tokens

    def search_timed_out(self) -> ServiceError:
        """The 504 of a search past its request's deadline, counted."""
        self.metrics.rejected.labels("deadline").inc()
        return ServiceError(
            504,
            "deadline: expected search results within the request's timeout, got none in time",
            code="deadline_exceeded",
        )

    async def in_cpu_pool(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.cpu_pool, fn, *args)
