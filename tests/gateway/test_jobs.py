"""Jobs: deterministic ids, progress persisted, cancellation, resume — in-process and on arq/Redis."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from arq.connections import RedisSettings
from arq.worker import Worker
from pydantic import BaseModel

from contracts.jobs import deterministic_job_id
from gateway.domain.jobs.handlers import HANDLERS
from contracts.jobs import dump_job_data, load_job_data
from gateway.domain.jobs.runner import ArqRunner, JobContext, JobDeps
from gateway.domain.jobs.service import RateMeter, submit
from gateway.worker import run_job
from tests.conftest import REDIS_URL

pytestmark = pytest.mark.anyio
RUNS: dict[str, int] = {}


class CountPayload(BaseModel):
    n: int
    tag: str
    sleep_s: float = 0.0
    forced: bool = True  # every step's progress written (False: as training steps report, throttled)
    fail_at_end: bool = False


async def count_handler(ctx: JobContext, payload: dict) -> dict:
    """A job that counts to n, checkpointing nothing: enough to exercise the machinery."""
    p = CountPayload.model_validate(payload)
    RUNS[p.tag] = RUNS.get(p.tag, 0) + 1
    meter = RateMeter(total=p.n, unit="steps")
    for i in range(1, p.n + 1):
        ctx.check_cancelled()
        await asyncio.sleep(p.sleep_s)
        ctx.report(meter.progress(i, message=f"step {i}"), force=p.forced)
    if p.fail_at_end:
        raise RuntimeError("after the last step")
    return {"counted": p.n}


@pytest.fixture(autouse=True)
def count_kind():  # noqa: ANN201
    HANDLERS["test.count"] = count_handler
    yield
    HANDLERS.pop("test.count", None)


async def wait_status(client, auth, job_id: str, statuses: set[str], timeout: float = 20) -> dict:  # noqa: ANN001
    async with asyncio.timeout(timeout):
        while True:
            job = (await client.get(f"/api/v1/jobs/{job_id}", headers=auth)).json()
            if job["status"] in statuses:
                return job
            await asyncio.sleep(0.05)


async def test_in_process_job_runs_once_with_progress(app, client, auth) -> None:  # noqa: ANN001
    tag = uuid.uuid4().hex
    payload = CountPayload(n=5, tag=tag)
    first = await submit(app.state.factory, app.state.runner, kind="test.count", queue="gateway", payload=payload)
    assert first.id == deterministic_job_id("test.count", payload)
    job = await wait_status(client, auth, first.id, {"succeeded", "failed"})
    assert job["status"] == "succeeded", job
    assert job["result"] == {"counted": 5}
    assert job["progress"]["done"] == 5 and job["progress"]["total"] == 5 and job["progress"]["unit"] == "steps"
    assert job["progress"]["message"] == "step 5"
    again = await submit(app.state.factory, app.state.runner, kind="test.count", queue="gateway", payload=payload)
    assert again.id == first.id and again.status == "succeeded"
    await asyncio.sleep(0.2)
    assert RUNS[tag] == 1  # enqueuing the same work twice ran it once
    listing = (await client.get("/api/v1/jobs?kind=test.count", headers=auth)).json()
    assert [j["id"] for j in listing["items"]] == [first.id]


@pytest.mark.parametrize("fails", [False, True])
async def test_a_finished_job_shows_its_last_progress(app, client, auth, fails: bool) -> None:  # noqa: ANN001
    """Progress is written at most every 0.5 s; what the throttle held back is written with the job's end (a
    succeeded SAE run showed 2,035 of 2,048 steps, a naming run "batch 46/48")."""
    job = await submit(app.state.factory, app.state.runner, kind="test.count", queue="gateway",
                       payload=CountPayload(n=300, tag=uuid.uuid4().hex, forced=False, fail_at_end=fails))
    done = await wait_status(client, auth, job.id, {"succeeded", "failed"})
    assert done["status"] == ("failed" if fails else "succeeded"), done
    assert (done["progress"]["done"], done["progress"]["total"]) == (300, 300)
    assert done["progress"]["message"] == "step 300"
    if not fails:
        assert done["progress"]["eta_seconds"] == 0.0


async def test_cancel_a_running_job_then_retry(app, client, auth) -> None:  # noqa: ANN001
    payload = CountPayload(n=200, tag=uuid.uuid4().hex, sleep_s=0.02)
    job = await submit(app.state.factory, app.state.runner, kind="test.count", queue="gateway", payload=payload)
    await wait_status(client, auth, job.id, {"running"})
    resp = await client.post(f"/api/v1/jobs/{job.id}/cancel", headers=auth)
    assert resp.status_code == 200
    done = await wait_status(client, auth, job.id, {"cancelled", "succeeded", "failed"})
    assert done["status"] == "cancelled" and done["progress"]["done"] < 200
    # The same work submitted again is queued again (a retry), with a new attempt.
    retried = await submit(app.state.factory, app.state.runner, kind="test.count", queue="gateway",
                           payload=payload.model_copy(update={"sleep_s": 0.02}))
    assert retried.id == job.id
    final = await wait_status(client, auth, job.id, {"succeeded", "failed"}, timeout=30)
    assert final["status"] == "succeeded" and final["attempts"] == 2


async def test_unknown_job_is_404_and_failures_are_recorded(app, client, auth) -> None:  # noqa: ANN001
    assert (await client.get("/api/v1/jobs/nope", headers=auth)).status_code == 404
    assert (await client.post("/api/v1/jobs/nope/cancel", headers=auth)).status_code == 404

    async def broken(ctx: JobContext, payload: dict) -> dict:
        raise ValueError("the input was wrong")

    HANDLERS["test.broken"] = broken
    try:
        job = await submit(app.state.factory, app.state.runner, kind="test.broken", queue="gateway",
                           payload=CountPayload(n=1, tag="b"))
        failed = await wait_status(client, auth, job.id, {"failed", "succeeded"})
    finally:
        HANDLERS.pop("test.broken")
    assert failed["status"] == "failed" and failed["error"] == "ValueError: the input was wrong"


async def test_the_heap_is_trimmed_after_every_job_failed_or_not(app, client, auth, monkeypatch) -> None:  # noqa: ANN001
    import gateway.domain.jobs.runner as runner

    trims: list[int] = []
    monkeypatch.setattr(runner, "trim_heap", lambda: trims.append(1) or True)

    async def broken(ctx: JobContext, payload: dict) -> dict:
        raise ValueError("no")

    HANDLERS["test.broken"] = broken
    try:
        ok = await submit(app.state.factory, app.state.runner, kind="test.count", queue="gateway",
                          payload=CountPayload(n=1, tag=uuid.uuid4().hex))
        await wait_status(client, auth, ok.id, {"succeeded", "failed"})
        bad = await submit(app.state.factory, app.state.runner, kind="test.broken", queue="gateway",
                           payload=CountPayload(n=1, tag=uuid.uuid4().hex))
        await wait_status(client, auth, bad.id, {"failed", "succeeded"})
    finally:
        HANDLERS.pop("test.broken")
    await asyncio.sleep(0.1)  # the runner trims after recording the status
    assert len(trims) == 2


def test_trim_heap_runs_on_glibc() -> None:
    import platform

    from artifacts.heap import trim_heap

    assert trim_heap() is (platform.libc_ver()[0] == "glibc")


@pytest.mark.redis
async def test_jobs_through_arq_and_redis(app, client, auth) -> None:  # noqa: ANN001
    """Distributed mode: the gateway enqueues on Redis, a real arq worker runs the job."""
    queue = f"gateway-test-{uuid.uuid4().hex[:6]}"  # a private queue: tests never share one
    runner = ArqRunner(REDIS_URL, queue_name=queue)
    tag = uuid.uuid4().hex
    payload = CountPayload(n=3, tag=tag)
    job = await submit(app.state.factory, runner, kind="test.count", queue="gateway", payload=payload)
    deps = JobDeps(app.state.settings, app.state.factory, app.state.store, app.state.services)
    worker = Worker(
        functions=[run_job], queue_name=queue, redis_settings=RedisSettings.from_dsn(REDIS_URL), burst=True,
        job_serializer=dump_job_data, job_deserializer=load_job_data, ctx={"deps": deps},
        handle_signals=False, poll_delay=0.05,
    )
    await worker.main()
    await worker.close()
    done = (await client.get(f"/api/v1/jobs/{job.id}", headers=auth)).json()
    assert done["status"] == "succeeded" and done["result"] == {"counted": 3}
    assert RUNS[tag] == 1
    await runner.close()


async def test_a_database_outage_runs_the_job_again_instead_of_failing_it(app, client, auth, monkeypatch) -> None:  # noqa: ANN001
    """Distributed mode: a step of a job that finds the database unreachable (here: a real connection refused)
    does not fail the job; arq runs it again after DATABASE_RETRY_DEFER_S, and on its last try the row says why."""
    from sqlalchemy import create_engine

    import gateway.worker as worker_module

    def unreachable() -> None:
        engine = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/test", connect_args={"connect_timeout": 2})
        try:
            engine.connect()
        finally:
            engine.dispose()

    async def outage_once(ctx: JobContext, payload: dict) -> dict:
        p = CountPayload.model_validate(payload)
        RUNS[p.tag] = RUNS.get(p.tag, 0) + 1
        if p.fail_at_end or RUNS[p.tag] == 1:
            unreachable()  # sqlalchemy's OperationalError, as while PostgreSQL restarts
        return {"runs": RUNS[p.tag]}

    HANDLERS["test.outage"] = outage_once
    monkeypatch.setattr(worker_module, "DATABASE_RETRY_DEFER_S", (0.05,))
    monkeypatch.setattr(worker_module.WorkerSettings, "max_tries", 3)
    queue = f"gateway-test-{uuid.uuid4().hex[:6]}"
    runner = ArqRunner(REDIS_URL, queue_name=queue)
    deps = JobDeps(app.state.settings, app.state.factory, app.state.store, app.state.services)
    try:
        tags = [uuid.uuid4().hex, uuid.uuid4().hex]
        jobs = [await submit(app.state.factory, runner, kind="test.outage", queue="gateway",
                             payload=CountPayload(n=1, tag=tags[0])),
                await submit(app.state.factory, runner, kind="test.outage", queue="gateway",
                             payload=CountPayload(n=1, tag=tags[1], fail_at_end=True))]  # the outage never ends
        worker = Worker(functions=[run_job], queue_name=queue, redis_settings=RedisSettings.from_dsn(REDIS_URL),
                        burst=True, job_serializer=dump_job_data, job_deserializer=load_job_data, ctx={"deps": deps},
                        handle_signals=False, poll_delay=0.05, max_tries=3)
        await worker.main()
        await worker.close()
    finally:
        HANDLERS.pop("test.outage", None)
        await runner.close()
    once, never = [(await client.get(f"/api/v1/jobs/{j.id}", headers=auth)).json() for j in jobs]
    assert (once["status"], once["result"], once["attempts"], once["error"]) == ("succeeded", {"runs": 2}, 2, None)
    assert (never["status"], never["attempts"], RUNS[tags[1]]) == ("failed", 3, 3)
    assert never["error"].startswith("database unavailable in 3 tries: (psycopg.OperationalError)"), never["error"]
