"""The bounded queue in front of the model, and the batcher that empties it.

Admission: `Batcher.admit(n)` takes room for `n` texts in the queue at once, or raises
`QueueFull` (the service answers 429 with Retry-After without waiting). Room is held from
admission (before tokenising) until the texts' encoder call starts, or the request gives up
(`Ticket.release`, also on deadline); so at most `capacity` texts ever wait for the model.

Given `within_s` (the time left to the request's deadline), admission also refuses work
that would not finish in time, so that an admitted request gets its answer rather than a
504 later:

- the work ahead is the rest of the encoder call in progress plus every text admitted and
  not yet encoding (their tokens once tokenised, an estimate per text before);
- its time comes from the last `RATE_WINDOW` encoder calls (a call's wait for the model
  thread counts as its time), fitted as seconds = per call + per token x tokens, so that
  the fixed cost of many small calls is not taken for a slow rate when the queue will be
  served in full calls of `batch_tokens` (when the calls seen are all of one size, the
  cost is all per token: pessimistic for larger calls, never optimistic);
- a request is admitted when that work, its own and one `max_wait_s` fit in
  `ADMIT_MARGIN` of `within_s` (the margin absorbs the rate's noise, tokenising and
  rendering), or when nothing at all is ahead of it;
- before the first call has measured a rate, at most one call's worth of texts
  (`batch_tokens` at the estimated tokens per text) may be ahead of a request;
- `encode(ticket, ids, within_s=...)` checks again with the request's real token count
  once it is tokenised, before it joins the queue.

Batching: `Batcher.run()` is one asyncio task. It takes the queued requests in arrival
order, waits up to `max_wait_s` for more once one is queued, and gathers whole requests up
to `batch_tokens` model tokens (a request larger than the budget goes alone); then it calls
`encode(ids)` once for all their texts on the model's executor (a worker thread), so the
event loop never runs model code, and hands each request its rows. One encoder call runs at
a time; the next batch gathers while it runs. A request whose deadline passed before its
batch started is dropped from the queue unencoded.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_RETRY_AFTER_S = 60
ADMIT_MARGIN = 0.5  # admitted work must fit in this share of the time left to the deadline
RATE_WINDOW = 16  # encoder calls the cost estimate spans


class QueueFull(Exception):
    """No room in the queue; `retry_after` (whole seconds) estimates when there will be."""

    def __init__(self, expected: str, got: str, retry_after: int):
        self.retry_after = retry_after
        super().__init__(f"queue: expected {expected}, got {got}; retry after {retry_after} s")


class Ticket:
    """Room for `items` texts in the queue, held until released (idempotent)."""

    def __init__(self, batcher: Batcher, items: int):
        self._batcher = batcher
        self.items = items
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._batcher._queued -= self.items


@dataclass
class _Request:
    ticket: Ticket
    ids: list[list[int]]
    tokens: int
    future: asyncio.Future = field(repr=False)


@dataclass(frozen=True)
class BatchStats:
    """One encoder call: how many requests, texts and tokens it served, and its seconds."""

    requests: int
    items: int
    tokens: int
    seconds: float


class Batcher:
    """See the module doc. `encode(ids)` returns float32 `[len(ids), dim]` in order."""

    def __init__(
        self,
        encode: Callable[[list[list[int]]], np.ndarray],
        executor: Executor,
        *,
        capacity: int,
        batch_tokens: int,
        max_wait_s: float,
        on_batch: Callable[[BatchStats], None] | None = None,
    ):
        self._encode = encode
        self._executor = executor
        self.capacity = capacity
        self.batch_tokens = batch_tokens
        self.max_wait_s = max_wait_s
        self._on_batch = on_batch or (lambda stats: None)
        self._queued = 0
        self._pending: collections.deque[_Request] = collections.deque()
        self._wakeup = asyncio.Event()
        self._tokens_per_item = 64.0  # running estimate, for texts not tokenised yet
        self._recent: collections.deque[tuple[int, float]] = collections.deque(
            maxlen=RATE_WINDOW
        )  # (tokens, seconds) of the last encoder calls
        self._in_flight: tuple[int, int, float] | None = None  # (texts, tokens, start)

    @property
    def depth(self) -> int:
        """Texts admitted and not yet in an encoder call."""
        return self._queued

    @property
    def busy(self) -> bool:
        """Whether an encoder call is in progress."""
        return self._in_flight is not None

    def admit(
        self, items: int, within_s: float | None = None, tokens: float | None = None
    ) -> Ticket:
        """Room for `items` texts, or `QueueFull` (see the module doc for `within_s`).
        `tokens`: the caller's estimate of their model tokens (default: the running
        average per text)."""
        if self._queued + items > self.capacity:
            raise QueueFull(
                f"room for {items} texts",
                f"a full queue ({self.capacity} texts waiting at most)",
                self.retry_after(),
            )
        if within_s is not None:
            self._check_time(
                items * self._tokens_per_item if tokens is None else tokens, within_s, self._queued
            )
        self._queued += items
        return Ticket(self, items)

    def _check_time(self, tokens: float, within_s: float, queued_items: int) -> None:
        """Raise `QueueFull` unless `tokens` more, behind the work ahead (`queued_items`
        texts admitted and not encoding, and the call in progress), fit in time."""
        in_flight_items = self._in_flight[0] if self._in_flight else 0
        if queued_items + in_flight_items == 0:
            return  # nothing ahead: the request gets the model to itself
        if self.tokens_per_s() is None:
            cold_items = max(1, int(self.batch_tokens // self._tokens_per_item))
            if queued_items + in_flight_items + tokens / self._tokens_per_item > cold_items:
                raise QueueFull(
                    "at most one encoder call's worth of texts queued before "
                    "the throughput is measured",
                    f"{queued_items + in_flight_items} texts ahead",
                    1,
                )
            return
        queued_tokens = self._queued_tokens_estimate(self._queued - queued_items)
        need = self._in_flight_left() + self._work_s(queued_tokens + tokens) + self.max_wait_s
        if need > ADMIT_MARGIN * within_s:
            raise QueueFull(
                f"an answer within {within_s:.3g} s",
                f"{queued_items + in_flight_items} texts ahead, about {need:.3g} s "
                f"of work with this request (admitted up to {ADMIT_MARGIN:g} of "
                "the time left)",
                self.retry_after(),
            )

    def tokens_per_s(self) -> float | None:
        """The encoder's throughput over the last `RATE_WINDOW` calls (None before any)."""
        tokens = sum(t for t, _ in self._recent)
        seconds = sum(s for _, s in self._recent)
        return tokens / seconds if tokens and seconds > 0 else None

    def call_cost(self) -> tuple[float, float] | None:
        """(seconds per call, seconds per token) fitted to the last calls by least squares
        (see the module doc); None before any call."""
        if self.tokens_per_s() is None:
            return None
        tokens = np.array([t for t, _ in self._recent], dtype=np.float64)
        seconds = np.array([s for _, s in self._recent], dtype=np.float64)
        spread = tokens - tokens.mean()
        if len(tokens) >= 3 and (spread**2).mean() > (0.25 * tokens.mean()) ** 2:
            per_token = float(spread @ (seconds - seconds.mean()) / (spread @ spread))
            per_call = float(seconds.mean() - per_token * tokens.mean())
            if per_token > 0 and per_call >= 0:
                return per_call, per_token
        return 0.0, float(seconds.sum() / tokens.sum())

    def _work_s(self, tokens: float) -> float:
        """Seconds to encode `tokens` queued tokens, in calls of `batch_tokens`."""
        cost = self.call_cost()
        if cost is None or tokens <= 0:
            return 0.0
        per_call, per_token = cost
        return per_call * math.ceil(tokens / self.batch_tokens) + per_token * tokens

    def _in_flight_left(self) -> float:
        """Seconds the encoder call in progress likely still takes."""
        cost = self.call_cost()
        if self._in_flight is None or cost is None:
            return 0.0
        _, tokens, start = self._in_flight
        return max(0.0, cost[0] + cost[1] * tokens - (time.perf_counter() - start))

    def _queued_tokens_estimate(self, exclude_items: int = 0) -> float:
        """Tokens admitted and not encoding: counted once tokenised, estimated before
        (less `exclude_items` texts not tokenised yet)."""
        pending_items = pending_tokens = 0
        for request in self._pending:
            if not request.future.done():
                pending_items += len(request.ids)
                pending_tokens += request.tokens
        untokenised = max(0, self._queued - exclude_items - pending_items)
        return pending_tokens + untokenised * self._tokens_per_item

    def expected_wait(self) -> float:
        """Seconds until every text admitted so far is encoded: the rest of the call in
        progress and the queued texts (0 before any call has been measured)."""
        return self._in_flight_left() + self._work_s(self._queued_tokens_estimate())

    def retry_after(self) -> int:
        """Whole seconds until the queued texts are likely encoded (1 to 60)."""
        return max(1, min(MAX_RETRY_AFTER_S, math.ceil(self.expected_wait())))

    async def encode(
        self, ticket: Ticket, ids: Sequence[Sequence[int]], within_s: float | None = None
    ) -> np.ndarray:
        """The vectors of one admitted request's token ids, once its batch has run. Given
        `within_s`, first `QueueFull` unless its real token count still fits in time."""
        if ticket.released:
            raise RuntimeError("ticket: expected one still holding room, got a released one")
        rows = [list(r) for r in ids]
        tokens = sum(len(r) for r in rows)
        if within_s is not None:
            try:
                self._check_time(tokens, within_s, self._queued - ticket.items)
            except QueueFull:
                ticket.release()
                raise
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Request(ticket, rows, tokens, future))
        self._wakeup.set()
        try:
            return await future
        finally:
            ticket.release()

    async def run(self) -> None:
        """Serve the queue until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            group = await self._gather(loop)
            if group:
                await self._serve(loop, group)

    async def _gather(self, loop: asyncio.AbstractEventLoop) -> list[_Request]:
        while not self._live():
            self._wakeup.clear()
            await self._wakeup.wait()
        end = loop.time() + self.max_wait_s
        while self._queued_tokens() < self.batch_tokens:
            remaining = end - loop.time()
            if remaining <= 0:
                break
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except TimeoutError:
                break
        group: list[_Request] = []
        tokens = 0
        while self._pending:
            head = self._pending[0]
            if head.future.done():  # gave up (deadline, disconnect) before its turn
                self._pending.popleft()
                continue
            if group and tokens + head.tokens > self.batch_tokens:
                break
            group.append(self._pending.popleft())
            tokens += head.tokens
        return group

    def _live(self) -> bool:
        while self._pending and self._pending[0].future.done():
            self._pending.popleft()
        return bool(self._pending)

    def _queued_tokens(self) -> int:
        return sum(r.tokens for r in self._pending if not r.future.done())

    async def _serve(self, loop: asyncio.AbstractEventLoop, group: list[_Request]) -> None:
        for request in group:
            request.ticket.release()  # out of the queue: in the model's hands
        ids = [row for request in group for row in request.ids]
        tokens = sum(request.tokens for request in group)
        start = time.perf_counter()
        self._in_flight = (len(ids), tokens, start)
        try:
            vectors: Any = await loop.run_in_executor(self._executor, self._encode, ids)
        except Exception as exc:
            for request in group:
                if not request.future.done():
                    request.future.set_exception(exc)
            return
        finally:
            self._in_flight = None
        seconds = time.perf_counter() - start
        self._learn(len(ids), tokens, seconds)
        self._on_batch(BatchStats(len(group), len(ids), tokens, seconds))
        offset = 0
        for request in group:
            n = len(request.ids)
            if not request.future.done():
                request.future.set_result(vectors[offset : offset + n])
            offset += n

    def _learn(self, items: int, tokens: int, seconds: float) -> None:
        if items:
            self._tokens_per_item = 0.8 * self._tokens_per_item + 0.2 * tokens / items
        if tokens and seconds > 0:
            self._recent.append((tokens, seconds))

    def fail_pending(self, exc: BaseException) -> int:
        """Fail every queued request with `exc` (shutdown); returns how many there were."""
        failed = 0
        while self._pending:
            request = self._pending.popleft()
            if not request.future.done():
                request.future.set_exception(exc)
                failed += 1
        return failed
