"""The arq worker `prisma worker` runs: jobs held by a renewed lease, Redis outages waited out.

arq marks a started job with an in-progress key that lives for the whole job timeout (hours
here), so the job of a SIGKILLed worker would wait that long before any worker took it again.
Here the key lives `lease_s` and is renewed while the job runs: a crashed worker's job is
taken over (and resumes from its checkpoints) within a lease. A lost Redis connection no longer
ends the worker: it waits and reconnects, as the compose restart policy would otherwise have to.
arq's `start_jobs` takes a job slot (its semaphore and job counter) before it asks Redis whether the
job is free; a connection lost in between leaked the slot, and with one job a worker (max_jobs 1)
never started another after a Redis restart. Here a job that did not start gives its slot back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from arq.constants import in_progress_key_prefix
from arq.worker import Worker, get_kwargs
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.exceptions import WatchError

log = logging.getLogger(__name__)
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, ConnectionError, OSError, WatchError)
"""What a lost connection raises; redis-py reports one lost during WATCH as a WatchError ("A ConnectionError
occurred on while watching one or more keys"), which start_jobs itself catches only around EXEC."""


class LeasedWorker(Worker):
    def __init__(self, *, lease_s: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lease_s = lease_s
        self.in_progress_timeout_s = lease_s  # what start_jobs sets the in-progress key to
        self._renewed_at = 0.0

    async def heart_beat(self) -> None:
        await super().heart_beat()
        now = time.monotonic()
        if now - self._renewed_at < self.lease_s / 3:
            return
        self._renewed_at = now
        for job_id, task in list(self.tasks.items()):
            if not task.done():
                await self.pool.pexpire(in_progress_key_prefix + job_id, int(self.lease_s * 1000))

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """arq's, one job at a time, giving back the slot of a job that an error kept from starting."""
        for job_id in job_ids:
            counter = self.job_counter
            try:
                await super().start_jobs([job_id])
            except BaseException:
                if job_id.decode() not in self.tasks and self.job_counter == counter + 1:
                    self.job_counter = counter
                    self.sem.release()
                raise

    async def _poll_iteration(self) -> None:
        try:
            await super()._poll_iteration()
        except REDIS_DOWN as exc:
            log.warning("redis unavailable (%s); retrying", type(exc).__name__)
            await asyncio.sleep(1.0)


def leased_worker(settings_cls: type, *, lease_s: float) -> LeasedWorker:
    """A worker configured by an arq WorkerSettings class, with a `lease_s` job lease; it logs
    'worker ready' once its start-up (model loading) is done."""
    kwargs = get_kwargs(settings_cls)
    startup = kwargs.get("on_startup")

    async def on_startup(ctx: dict[str, Any]) -> None:
        if startup is not None:
            await startup(ctx)
        log.info("worker ready", extra={"queue": kwargs.get("queue_name")})

    return LeasedWorker(lease_s=lease_s, **{**kwargs, "on_startup": on_startup})
