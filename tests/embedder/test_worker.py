"""The arq worker: JSON payloads, progress in Redis, the result as JSON."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from contracts.embed import EmbeddingRunSpec, EmbedJobPayload, EmbedJobResult
from contracts.jobs import Progress, dump_job_data, load_job_data
from services.embedder import worker
from services.embedder.app import create_app
from services.embedder.config import EmbedderSettings, get_settings
from services.embedder.models import ModelCache

pytestmark = pytest.mark.anyio


class RecordingRedis:
    """Progress writes recorded; shard claims always granted (one worker); helpers recorded."""

    def __init__(self) -> None:
        self.sets: list[tuple[str, str, int | None]] = []
        self.claims: list[str] = []
        self.enqueued: list[str] = []

    async def set(self, key: str, value: str, ex: int | None = None, nx: bool = False, px: int | None = None) -> bool:
        if nx:
            self.claims.append(key)
        else:
            self.sets.append((key, value, ex))
        return True

    async def pexpire(self, key: str, ms: int) -> None:
        pass

    async def enqueue_job(self, function: str, *args: Any, _job_id: str, **kw: Any) -> None:
        self.enqueued.append(_job_id)


def test_worker_settings_are_json_on_the_embedder_queue() -> None:
    assert worker.WorkerSettings.queue_name == "embedder"
    assert worker.WorkerSettings.functions == [worker.embed_run, worker.embed_run_helper]
    job = {"t": 1, "f": "embed_run", "a": [{"run_id": 1}], "k": {}, "et": 123}
    assert load_job_data(dump_job_data(job)) == job
    assert load_job_data(json.dumps(job).encode()) == job  # what the gateway enqueues


async def test_the_app_and_the_worker_in_one_process_load_a_model_once() -> None:
    """Embedded mode runs the embedder app (text search, an import's query model) and its worker (embedding runs,
    naming's labels) in one process: they share one cache, so a model's weights are held once, not twice."""
    ctx: dict[str, Any] = {}
    await worker.startup(ctx)
    app = create_app(EmbedderSettings(artifact_root="file:///elsewhere"))  # as embedded mode makes it
    assert app.state.models is ctx["models"]
    assert app.state.models.get(None).model is ctx["models"].get(None).model
    assert ModelCache.shared(EmbedderSettings(precision="fp32")) is not ctx["models"]  # other settings, another cache


async def test_embed_run_reports_progress_and_returns_json(store, snapshot, make_corpus, settings, models) -> None:
    snap = snapshot(make_corpus(7))
    payload = EmbedJobPayload(run_id=3, snapshot_uri=snap.uri, artifact_prefix="embedding-runs/3",
                              spec=EmbeddingRunSpec(max_length=18, shard_size=4))
    redis = RecordingRedis()
    ctx: dict[str, Any] = {"job_id": "embed-abc", "redis": redis, "settings": settings, "models": models,
                           "store": store}
    out = await worker.embed_run(ctx, payload.model_dump(mode="json"))
    result = EmbedJobResult.model_validate(out)
    assert json.loads(json.dumps(out)) == out
    assert (result.n_documents, result.shards_computed) == (7, 2)
    assert redis.claims == [f"prisma:claim:embedding-runs/3:{i}" for i in range(2)], "each shard claimed once"
    assert redis.enqueued == [f"embed-abc:helper{i}" for i in range(settings.helpers)]
    assert redis.sets, "progress published"
    assert {key for key, _, _ in redis.sets} == {"prisma:progress:embed-abc"}
    assert all(ex == 24 * 3600 for _, _, ex in redis.sets)
    last = Progress.model_validate_json(redis.sets[-1][1])
    assert (last.done, last.total, last.unit) == (7, 7, "documents")


async def test_embed_run_rejects_bad_payload(settings, models, store) -> None:
    ctx = {"job_id": "x", "redis": RecordingRedis(), "settings": settings, "models": models, "store": store}
    with pytest.raises(ValueError):
        await worker.embed_run(ctx, {"run_id": "not-a-number", "snapshot_uri": "a", "artifact_prefix": "b"})


@pytest.mark.redis
@pytest.mark.slow
async def test_burst_worker_runs_a_json_job_from_redis(store, snapshot, make_corpus, monkeypatch) -> None:
    from arq import create_pool
    from arq.connections import RedisSettings
    from arq.worker import Worker

    monkeypatch.setenv("PRISMA_EMBEDDER_ARTIFACT_ROOT", store.root)
    monkeypatch.setenv("PRISMA_EMBEDDER_PRECISION", "fp32")
    monkeypatch.setenv("PRISMA_EMBEDDER_THREADS", "1")
    get_settings.cache_clear()
    snap = snapshot(make_corpus(5))
    payload = EmbedJobPayload(run_id=4, snapshot_uri=snap.uri, artifact_prefix="embedding-runs/4",
                              spec=EmbeddingRunSpec(max_length=18, shard_size=4))
    queue = f"embedder-test-{uuid.uuid4().hex[:8]}"
    redis_settings = RedisSettings.from_dsn("redis://127.0.0.1:6379/0")
    pool = await create_pool(redis_settings, job_serializer=lambda o: json.dumps(o).encode(),
                             job_deserializer=json.loads, default_queue_name=queue)
    try:
        job = await pool.enqueue_job("embed_run", payload.model_dump(mode="json"), _job_id=f"embed-{queue}")
        assert job is not None
        w = Worker(
            functions=worker.WorkerSettings.functions, queue_name=queue, redis_settings=redis_settings,
            on_startup=worker.WorkerSettings.on_startup, job_serializer=dump_job_data,
            job_deserializer=load_job_data, burst=True, poll_delay=0.05, max_jobs=1,
            handle_signals=False,
        )
        await w.main()
        await w.close()
        result = EmbedJobResult.model_validate(await job.result(timeout=5))
        assert result.n_documents == 5
        progress = Progress.model_validate_json(await pool.get(worker.progress_key(job.job_id)))
        assert progress.done == 5
    finally:
        await pool.delete(worker.progress_key(f"embed-{queue}"))
        await pool.aclose()
        get_settings.cache_clear()
