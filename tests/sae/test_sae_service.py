"""The HTTP app (through ASGITransport) and the worker function (with an in-memory Redis stand-in)."""

from __future__ import annotations

import json

import httpx
import pytest
import torch
from sae_fixtures import tiny_payload

from artifacts import ArtifactStore
from contracts.jobs import Progress
from services.sae.app import create_app
from services.sae.config import SaeSettings
from services.sae.io import save_sae
from services.sae.model import TopKSae
from services.sae.worker import WorkerSettings, progress_key, sae_train, startup

pytestmark = pytest.mark.anyio


@pytest.fixture
def saved(tmp_path):
    store = ArtifactStore(str(tmp_path))
    sae = TopKSae(4, 16, 3, seed=0)
    save_sae(store, "runs/1", sae, None)
    return store, sae


def _client(store: ArtifactStore, token: str | None = None) -> httpx.AsyncClient:
    app = create_app(SaeSettings(artifact_root=store.root, service_token=token))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sae")


async def test_encode_returns_top_k(saved):
    store, sae = saved
    async with _client(store) as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        r = await client.post("/encode", json={"vectors": [[1, 0, 0, 0], [0, 1, 2, 3]],
                                               "sae_uri": store.uri("runs/1")})
    assert r.status_code == 200
    features = r.json()["features"]
    with torch.no_grad():
        acts, idx = sae.encode(torch.tensor([[1.0, 0, 0, 0]]))
    want = {int(i): float(a) for a, i in zip(acts[0], idx[0]) if a > 0}
    assert {f["index"]: pytest.approx(f["activation"]) for f in features[0]} == {
        i: pytest.approx(a) for i, a in want.items()}


@pytest.mark.parametrize("body,status", [
    ({"vectors": [[1, 2, 3]], "sae_uri": "RUNS"}, 422),  # wrong dimension
    ({"vectors": [[1, 2, 3, 4], [1]], "sae_uri": "RUNS"}, 422),  # ragged
    ({"vectors": [], "sae_uri": "RUNS"}, 422),
    ({"vectors": [[1, 2, 3, 4]], "sae_uri": "MISSING"}, 404),
    ({"vectors": [[1, 2, 3, 4]], "sae_uri": "file:///elsewhere/x"}, 422),
])
async def test_encode_validation(saved, body, status):
    store, _ = saved
    body = {**body, "sae_uri": body["sae_uri"].replace("RUNS", store.uri("runs/1"))
            .replace("MISSING", store.uri("runs/404"))}
    async with _client(store) as client:
        assert (await client.post("/encode", json=body)).status_code == status


async def test_service_token(saved):
    store, _ = saved
    body = {"vectors": [[1, 2, 3, 4]], "sae_uri": store.uri("runs/1")}
    async with _client(store, token="s3cret") as client:
        assert (await client.get("/health")).status_code == 200
        assert (await client.post("/encode", json=body)).status_code == 401
        assert (await client.post("/encode", json=body, headers={"Authorization": "Bearer nope"})).status_code == 401
        ok = await client.post("/encode", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


class FakeRedis:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def set(self, key: str, value: str, ex: int | None = None) -> None:
        self.values[key] = value


async def test_worker_trains_and_publishes_progress(tmp_path):
    store = ArtifactStore(str(tmp_path))
    payload = tiny_payload(store)
    ctx = {"settings": SaeSettings(artifact_root=store.root), "redis": FakeRedis(), "job_id": "job-1"}
    await startup(ctx)
    result = await sae_train(ctx, json.loads(WorkerSettings.job_serializer(payload.model_dump(mode="json"))))
    assert result["steps_done"] == payload.config.max_steps
    progress = Progress.model_validate_json(ctx["redis"].values[progress_key("job-1")])
    assert progress.done == progress.total == payload.config.max_steps
    assert WorkerSettings.queue_name == "sae"
