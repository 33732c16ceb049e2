"""The batcher on its own, with a recording encode function on a real worker thread:
admission bounds the queue, requests are grouped whole by token budget in arrival order,
each gets its own rows, a request that gave up is never encoded, failures reach their
requests, and the loop keeps serving after them."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from attnswitch.service.batching import Batcher, QueueFull


class Recorder:
    """encode(ids) -> one row per text: [first id, length]; records every call. It can be
    held (to let requests queue up) and told to fail."""

    def __init__(self) -> None:
        self.calls: list[list[list[int]]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False

    def __call__(self, ids: list[list[int]]) -> np.ndarray:
        self.gate.wait(10)
        self.calls.append(ids)
        if self.fail:
            raise RuntimeError("encoder broke")
        return np.array([[row[0], len(row)] for row in ids], dtype=np.float32)


def rows(first: int, n: int, length: int) -> list[list[int]]:
    return [[first + i] * length for i in range(n)]


async def with_batcher(body, *, capacity=64, batch_tokens=100, max_wait_s=0.01):
    recorder = Recorder()
    with ThreadPoolExecutor(1) as pool:
        batcher = Batcher(recorder, pool, capacity=capacity, batch_tokens=batch_tokens,
                          max_wait_s=max_wait_s)
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
        tasks = [asyncio.create_task(batcher.encode(batcher.admit(n), rows(100 * (k + 1), n, t)))
                 for k, (n, t) in enumerate(sizes)]
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
        assert batcher.expected_wait() == 0.0  # no rate measured yet: nothing refused
        await batcher.encode(batcher.admit(4, within_s=0.0), rows(1, 4, 10))
        recorder.gate.clear()
        busy = asyncio.create_task(batcher.encode(batcher.admit(1), rows(1, 1, 10)))
        await asyncio.sleep(0.05)
        queued = batcher.admit(10)  # waits behind the call in progress
        wait = batcher.expected_wait()
        assert wait > 0
        with pytest.raises(QueueFull, match="an answer within") as refused:
            batcher.admit(1, within_s=wait / 2)
        assert refused.value.retry_after >= 1
        batcher.admit(1, within_s=wait * 2).release()
        queued.release()
        recorder.gate.set()
        await busy

    run(body, capacity=64)


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
        queued = [asyncio.create_task(batcher.encode(batcher.admit(1), rows(k, 1, 2)))
                  for k in range(3)]
        await asyncio.sleep(0)
        failed = batcher.fail_pending(RuntimeError("shutting down"))
        outcomes = await asyncio.gather(*queued, return_exceptions=True)
        recorder.gate.set()
        await busy
        return failed, outcomes

    failed, outcomes = run(body)
    assert failed == 3
    assert all(isinstance(o, RuntimeError) for o in outcomes)
