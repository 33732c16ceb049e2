"""The bounded queue in front of the model, and the batcher that empties it.

Admission: `Batcher.admit(n)` takes room for `n` texts in the queue at once, or raises
`QueueFull` (the service answers 429 with Retry-After without waiting). Room is held from
admission (before tokenising) until the texts' encoder call starts, or the request gives up
(`Ticket.release`, also on deadline); so at most `capacity` texts ever wait for the model.
Given `within_s`, admission also refuses when the texts already queued would, at the rate
measured so far, take longer than that to encode: a request that cannot meet its deadline
gets 429 at once rather than 504 later (a queue sized for a fast device stays safe on a
slow one).

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

    def __init__(self, encode: Callable[[list[list[int]]], np.ndarray], executor: Executor, *,
                 capacity: int, batch_tokens: int, max_wait_s: float,
                 on_batch: Callable[[BatchStats], None] | None = None):
        self._encode = encode
        self._executor = executor
        self.capacity = capacity
        self.batch_tokens = batch_tokens
        self.max_wait_s = max_wait_s
        self._on_batch = on_batch or (lambda stats: None)
        self._queued = 0
        self._pending: collections.deque[_Request] = collections.deque()
        self._wakeup = asyncio.Event()
        self._tokens_per_item = 64.0  # running estimates, for Retry-After
        self._tokens_per_s = 0.0
        self.busy = False

    @property
    def depth(self) -> int:
        """Texts admitted and not yet in an encoder call."""
        return self._queued

    def admit(self, items: int, within_s: float | None = None) -> Ticket:
        if self._queued + items > self.capacity:
            raise QueueFull(f"room for {items} texts", f"a full queue ({self.capacity} texts "
                            "waiting at most)", self.retry_after())
        if within_s is not None and self.expected_wait() > within_s:
            raise QueueFull(f"an answer within {within_s:.3g} s",
                            f"{self._queued} texts queued, about {self.expected_wait():.3g} s "
                            "of work", self.retry_after())
        self._queued += items
        return Ticket(self, items)

    def expected_wait(self) -> float:
        """Seconds the texts queued now will likely take to encode (0 before any batch ran:
        no rate measured yet)."""
        if self._tokens_per_s <= 0:
            return 0.0
        return self._queued * self._tokens_per_item / self._tokens_per_s

    def retry_after(self) -> int:
        """Whole seconds until the queued texts are likely encoded (1 to 60)."""
        return max(1, min(MAX_RETRY_AFTER_S, math.ceil(self.expected_wait())))

    async def encode(self, ticket: Ticket, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """The vectors of one admitted request's token ids, once its batch has run."""
        if ticket.released:
            raise RuntimeError("ticket: expected one still holding room, got a released one")
        future = asyncio.get_running_loop().create_future()
        rows = [list(r) for r in ids]
        self._pending.append(_Request(ticket, rows, sum(len(r) for r in rows), future))
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
        self.busy = True
        try:
            vectors: Any = await loop.run_in_executor(self._executor, self._encode, ids)
        except Exception as exc:
            for request in group:
                if not request.future.done():
                    request.future.set_exception(exc)
            return
        finally:
            self.busy = False
        seconds = time.perf_counter() - start
        self._learn(len(ids), tokens, seconds)
        self._on_batch(BatchStats(len(group), len(ids), tokens, seconds))
        offset = 0
        for request in group:
            n = len(request.ids)
            if not request.future.done():
                request.future.set_result(vectors[offset:offset + n])
            offset += n

    def _learn(self, items: int, tokens: int, seconds: float) -> None:
        if items:
            self._tokens_per_item = 0.8 * self._tokens_per_item + 0.2 * tokens / items
        if seconds > 0:
            rate = tokens / seconds
            self._tokens_per_s = rate if self._tokens_per_s == 0 else (
                0.8 * self._tokens_per_s + 0.2 * rate)

    def fail_pending(self, exc: BaseException) -> int:
        """Fail every queued request with `exc` (shutdown); returns how many there were."""
        failed = 0
        while self._pending:
            request = self._pending.popleft()
            if not request.future.done():
                request.future.set_exception(exc)
                failed += 1
        return failed
