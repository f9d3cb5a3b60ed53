"""The worker's Redis outage handling against the real Redis: a connection lost while arq claims a job must not
cost the worker its job slot (with one slot, it then never started another job after a Redis restart: the
distributed Redis-restart test's next jobs waited out their timeouts in a full run)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from arq import create_pool
from arq.connections import RedisSettings
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.leased_worker import LeasedWorker
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.anyio


async def double(ctx: dict, x: int) -> int:  # noqa: ARG001
    return 2 * x


def dumps(o: object) -> bytes:
    return json.dumps(o).encode()


async def test_a_job_claimed_while_redis_drops_is_started_once_redis_is_back() -> None:
    queue = f"test-leased-{uuid.uuid4().hex[:8]}"
    settings = RedisSettings.from_dsn(REDIS_URL)
    pool = await create_pool(settings, job_serializer=dumps, job_deserializer=json.loads)
    worker = LeasedWorker(lease_s=30, functions=[double], queue_name=queue, redis_pool=pool, max_jobs=1,
                          job_serializer=dumps, job_deserializer=json.loads, poll_delay=0.05)
    try:
        job = await pool.enqueue_job("double", 21, _queue_name=queue)
        assert job is not None
        real = pool.pipeline
        calls = 0

        def dropped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            """The first claim's transaction loses its connection (as when Redis restarts), later ones do not."""
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RedisConnectionError("Connection closed by server.")
            return real(*args, **kwargs)

        pool.pipeline = dropped  # type: ignore[method-assign]
        await worker._poll_iteration()  # logs "redis unavailable" and waits, as the worker loop does
        assert calls == 1 and not worker.tasks
        assert worker.job_counter == 0  # the slot is back: before the fix it stayed taken
        await worker._poll_iteration()  # Redis is back: the job starts
        assert list(worker.tasks) == [job.job_id]
        await asyncio.wait_for(worker.tasks[job.job_id], 10)
        assert await job.result(timeout=10) == 42
    finally:
        pool.pipeline = real  # type: ignore[method-assign]
        await worker.close()
        await pool.delete(queue)
        await pool.aclose()
