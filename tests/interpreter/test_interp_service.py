"""The HTTP app (through ASGITransport) and the worker's job function (embedded-mode ctx)."""

from __future__ import annotations

import httpx
import pytest
from pydantic import SecretStr

from contracts.interpret import BackendOptions, InterpretRequest, InterpretResult, InterpretRunPayload
from services.interpreter.app import create_app
from services.interpreter.config import InterpreterSettings
from services.interpreter.worker import WorkerSettings, interpret_run, startup

from tests.interpreter.conftest import topic_embed  # noqa: E402


@pytest.mark.anyio
async def test_interpret_one_feature_over_http(synthetic):
    store, ref = synthetic
    settings = InterpreterSettings(artifact_root=store.root, service_token=SecretStr("s3cret"))
    app = create_app(settings, embed_texts=topic_embed)
    body = InterpretRequest(corpus=ref, feature=3, control_labels=["eczema, rash"]).model_dump(mode="json")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://interp") as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        assert (await client.post("/interpret", json=body)).status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        response = await client.post("/interpret", json=body, headers=auth)
        assert response.status_code == 200, response.text
        result = InterpretResult.model_validate(response.json())
        best = result.interpretations[result.best]
        assert "migraine" in best.label and best.reliable and best.control_embedding < 0.7
        bad = {**body, "feature": 99}
        assert (await client.post("/interpret", json=bad, headers=auth)).status_code == 422
        det = {**body, "scoring": {"detection": True}}
        assert (await client.post("/interpret", json=det, headers=auth)).status_code == 422
        assert (await client.get("/openapi.json")).status_code == 404  # the schema is not served
        assert "/interpret" in app.openapi()["paths"]


@pytest.mark.anyio
async def test_worker_job_reports_progress_in_embedded_mode(synthetic):
    store, ref = synthetic
    ctx = {"settings": InterpreterSettings(artifact_root=store.root), "embed_texts": topic_embed}
    await startup(ctx)
    seen = []
    ctx.update(job_id="j1", report=seen.append)
    payload = InterpretRunPayload(run_id=7, corpus=ref, artifact_prefix="interp/worker", batch_features=4,
                                  backends=[BackendOptions(backend="keywords")])
    result = await interpret_run(ctx, payload.model_dump(mode="json"))
    assert result["n_named"] == 7 and seen[-1].done == 8
    assert WorkerSettings.queue_name == "interpreter" and WorkerSettings.job_serializer({"a": 1}) == b'{"a": 1}'
