"""The batcher on its own, with a recording encode function on a real worker thread:
admission bounds the queue, requests are grouped whole by token budget in arrival order,
each gets its own rows, a request that gave up is never encoded, failures reach their
requests, and the loop keeps serving after them."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from attnswitch.service.batching import Batcher, QueueFull


class Recorder:
    """encode(ids) -> one row per text: [first id, length]; records every call. It can be
    held (to let requests queue up), slowed (`delay` seconds a call) and told to fail."""

    def __init__(self) -> None:
        self.calls: list[list[list[int]]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False
        self.delay = 0.0

    def __call__(self, ids: list[list[int]]) -> np.ndarray:
        self.gate.wait(10)
        time.sleep(self.delay)
        self.calls.append(ids)
        if self.fail:
            raise RuntimeError("encoder broke")
        return np.array([[row[0], len(row)] for row in ids], dtype=np.float32)


def rows(first: int, n: int, length: int) -> list[list[int]]:
    return [[first + i] * length for i in range(n)]


async def with_batcher(body, *, capacity=64, batch_tokens=100, max_wait_s=0.01):
    recorder = Recorder()
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(
            recorder, pool, capacity=capacity, batch_tokens=batch_tokens, max_wait_s=max_wait_s
        )
        task = asyncio.create_task(batcher.run())
        try:
            return await body(batcher, recorder)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def run(body, **kwargs):
    return asyncio.run(with_batcher(body, **kwargs))


def test_requests_are_grouped_by_token_budget_in_arrival_order() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        recorder.gate.clear()  # hold the model so that everything queues behind one call
        first = asyncio.create_task(batcher.encode(batcher.admit(1), rows(0, 1, 5)))
        await asyncio.sleep(0.05)
        sizes = [(3, 10), (2, 20), (1, 30), (4, 10), (1, 90)]  # (texts, tokens each)
        tasks = [
            asyncio.create_task(batcher.encode(batcher.admit(n), rows(100 * (k + 1), n, t)))
            for k, (n, t) in enumerate(sizes)
        ]
        await asyncio.sleep(0.05)
        assert batcher.depth == sum(n for n, _ in sizes)
        recorder.gate.set()
        results = await asyncio.gather(first, *tasks)
        return results, recorder.calls, batcher.depth

    results, calls, depth = run(body)
    # budget 100: [30 + 40 + 30] fits, then [40 + 90] does not -> [40], then [90]
    assert [sum(len(r) for r in call) for call in calls] == [5, 100, 40, 90]
    for k, (n, t) in enumerate([(1, 5), (3, 10), (2, 20), (1, 30), (4, 10), (1, 90)]):
        first_id = 0 if k == 0 else 100 * k
        np.testing.assert_array_equal(results[k], [[first_id + i, t] for i in range(n)])
    assert depth == 0


def test_a_request_over_the_budget_goes_alone() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        out = await batcher.encode(batcher.admit(2), rows(7, 2, 80))
        return out, recorder.calls

    out, calls = run(body, batch_tokens=100)
    assert len(calls) == 1 and out.shape == (2, 2)


def test_admission_bounds_the_queue_and_frees_room_as_batches_start() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        recorder.gate.clear()
        held = batcher.admit(6)
        with pytest.raises(QueueFull) as full:
            batcher.admit(3)
        assert full.value.retry_after >= 1
        second = batcher.admit(2)  # exactly fills the queue
        assert batcher.depth == 8
        task = asyncio.create_task(batcher.encode(held, rows(1, 6, 3)))
        await asyncio.sleep(0.05)  # its batch started: its room is free again
        assert batcher.depth == 2
        batcher.admit(6).release()
        second.release()
        recorder.gate.set()
        await task
        return batcher.depth

    assert run(body, capacity=8) == 0


def test_admission_refuses_what_cannot_meet_its_deadline() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        assert batcher.expected_wait() == 0.0 and batcher.tokens_per_s() is None
        await batcher.encode(batcher.admit(4, within_s=0.0), rows(1, 4, 10))  # alone: admitted
        assert batcher.tokens_per_s() > 0
        recorder.gate.clear()
        busy = asyncio.create_task(batcher.encode(batcher.admit(1), rows(1, 1, 10)))
        await asyncio.sleep(0.05)
        queued = batcher.admit(10)  # waits behind the call in progress
        wait = batcher.expected_wait()
        assert wait > 0
        with pytest.raises(QueueFull, match="an answer within") as refused:
            batcher.admit(1, within_s=wait)  # the work ahead fits, not within the margin
        assert refused.value.retry_after >= 1
        batcher.admit(1, within_s=4 * wait + 1.0).release()
        queued.release()
        recorder.gate.set()
        await busy

    run(body, capacity=64)


def test_admission_counts_the_call_in_progress() -> None:
    """With nothing queued, a long call in progress still delays the next request."""

    async def body(batcher: Batcher, recorder: Recorder):
        recorder.delay = 0.1
        await batcher.encode(batcher.admit(1), rows(1, 1, 50))  # measures about 500 tokens/s
        rate = batcher.tokens_per_s()
        recorder.gate.clear()
        busy = asyncio.create_task(batcher.encode(batcher.admit(20), rows(1, 20, 50)))
        await asyncio.sleep(0.05)
        assert batcher.depth == 0 and batcher.busy
        assert batcher.expected_wait() > 0.5 * 1000 / rate
        with pytest.raises(QueueFull, match="an answer within"):
            batcher.admit(1, within_s=1000 / rate)
        recorder.gate.set()
        await busy

    run(body, capacity=64, batch_tokens=2000)


def test_before_the_first_rate_at_most_one_call_is_admitted() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        recorder.gate.clear()  # the first call never ends: no rate is measured
        first = batcher.admit(8, within_s=30.0)  # alone: admitted whatever its size
        busy = asyncio.create_task(batcher.encode(first, rows(1, 8, 40)))
        await asyncio.sleep(0.05)
        second = batcher.admit(1, within_s=30.0)  # 8 in flight + 1 <= 10 per call (640 / 64)
        batcher.admit(1, within_s=30.0).release()
        held = batcher.admit(1, within_s=30.0)
        with pytest.raises(QueueFull, match="before the throughput is measured"):
            batcher.admit(1, within_s=30.0)
        for ticket in (second, held):
            ticket.release()
        recorder.gate.set()
        await busy

    run(body, capacity=64, batch_tokens=640)


def test_a_request_longer_than_its_estimate_is_refused_after_tokenising() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        recorder.delay = 0.05
        await batcher.encode(batcher.admit(1), rows(1, 1, 64))  # about 1,300 tokens/s
        rate = batcher.tokens_per_s()
        recorder.gate.clear()
        busy = asyncio.create_task(batcher.encode(batcher.admit(1), rows(1, 1, 64)))
        await asyncio.sleep(0.05)
        within = 40 * 64 / rate  # room for about 20 texts of 64 tokens
        ticket = batcher.admit(1, within_s=within)
        with pytest.raises(QueueFull, match="an answer within"):
            await batcher.encode(ticket, rows(2, 1, 64 * 100), within_s=within)
        assert ticket.released and batcher.depth == 0
        recorder.gate.set()
        await busy
        return recorder.calls

    calls = run(body, capacity=64, batch_tokens=10_000)
    assert all(call[0][0] != 2 for call in calls)  # never encoded


def test_the_call_cost_separates_the_fixed_cost_of_a_call() -> None:
    """Small calls cost mostly their fixed part: it must not read as a slow rate for the
    full calls a queue is served in. Calls of one size give no fit: all per token."""
    batcher = Batcher(Recorder(), None, capacity=64, batch_tokens=1000, max_wait_s=0.0)
    assert batcher.call_cost() is None
    for tokens in (10, 1000, 500, 20, 750):
        batcher._learn(1, tokens, 0.1 + 0.0001 * tokens)
    per_call, per_token = batcher.call_cost()
    assert per_call == pytest.approx(0.1) and per_token == pytest.approx(0.0001)
    assert batcher.tokens_per_s() < 0.5 * 1 / per_token  # the plain rate is far too low

    same = Batcher(Recorder(), None, capacity=64, batch_tokens=1000, max_wait_s=0.0)
    for _ in range(3):
        same._learn(1, 100, 0.2)
    assert same.call_cost() == (0.0, pytest.approx(0.002))


class SlowModel:
    """encode(ids): sleeps 5 ms per call plus 0.4 ms per token (a model of a busy CPU)."""

    def __call__(self, ids: list[list[int]]) -> np.ndarray:
        time.sleep(0.005 + 0.0004 * sum(len(r) for r in ids))
        return np.zeros((len(ids), 2), dtype=np.float32)


def test_under_overload_admitted_requests_meet_their_deadline() -> None:
    """200 clients, 4 texts of 16 tokens each, a 1 s deadline: about 5 s of work arrives in
    1 s. Every request is answered or refused with QueueFull at once; none that was admitted
    runs past its deadline, cold (before any rate) or warm."""
    deadline_s = 1.0

    async def client(batcher: Batcher, k: int) -> str:
        await asyncio.sleep(0.005 * k)  # arrivals spread over 1 s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s
        try:
            ticket = batcher.admit(4, within_s=deadline - loop.time())
        except QueueFull:
            return "429"
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.sleep(0.002)  # tokenising
                await batcher.encode(ticket, rows(k, 4, 16), within_s=deadline - loop.time())
        except QueueFull:
            return "429"
        except TimeoutError:
            return "504"
        finally:
            ticket.release()
        return "200"

    async def main() -> list[str]:
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(SlowModel(), pool, capacity=1024, batch_tokens=512, max_wait_s=0.005)
            task = asyncio.create_task(batcher.run())
            try:
                return await asyncio.gather(*(client(batcher, k) for k in range(200)))
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    outcomes = asyncio.run(main())
    counts = {o: outcomes.count(o) for o in ("200", "429", "504")}
    assert counts["504"] == 0, counts
    assert counts["200"] > 0 and counts["429"] > 0, counts


def test_a_request_that_gave_up_is_not_encoded() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        recorder.gate.clear()
        busy = asyncio.create_task(batcher.encode(batcher.admit(1), rows(1, 1, 4)))
        await asyncio.sleep(0.05)
        ticket = batcher.admit(1)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await batcher.encode(ticket, rows(555, 1, 4))
        assert ticket.released and batcher.depth == 0
        recorder.gate.set()
        await busy
        await batcher.encode(batcher.admit(1), rows(9, 1, 4))
        return recorder.calls

    calls = run(body)
    assert [call[0][0] for call in calls] == [1, 9]  # 555 never reached the encoder


def test_a_failing_call_fails_its_requests_and_the_loop_goes_on() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        recorder.fail = True
        with pytest.raises(RuntimeError, match="encoder broke"):
            await batcher.encode(batcher.admit(2), rows(1, 2, 3))
        recorder.fail = False
        return await batcher.encode(batcher.admit(1), rows(4, 1, 3)), batcher.depth

    out, depth = run(body)
    np.testing.assert_array_equal(out, [[4, 3]])
    assert depth == 0


def test_fail_pending_answers_every_queued_request() -> None:
    async def body(batcher: Batcher, recorder: Recorder):
        recorder.gate.clear()
        busy = asyncio.create_task(batcher.encode(batcher.admit(1), rows(1, 1, 2)))
        await asyncio.sleep(0.05)
        queued = [
            asyncio.create_task(batcher.encode(batcher.admit(1), rows(k, 1, 2))) for k in range(3)
        ]
        await asyncio.sleep(0)
        failed = batcher.fail_pending(RuntimeError("shutting down"))
        outcomes = await asyncio.gather(*queued, return_exceptions=True)
        recorder.gate.set()
        await busy
        return failed, outcomes

    failed, outcomes = run(body)
    assert failed == 3
    assert all(isinstance(o, RuntimeError) for o in outcomes)
