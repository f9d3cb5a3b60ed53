"""Through the gateway: a request names models from the allowlist, never a path; the 422 names the
field, lists the allowed names, and reads the same whether the path exists or not."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]


async def test_embedding_run_model_is_a_name(client, auth, tmp_path) -> None:  # noqa: ANN001
    ds = await client.post("/api/v1/datasets", headers=auth, files={"file": ("a.csv", b"text\nuna nota\n")})
    (tmp_path / "config.json").write_text("{}")
    answers = []
    for path in (str(tmp_path), str(tmp_path / "missing")):
        resp = await client.post("/api/v1/embedding-runs", headers=auth, json={"dataset_id": ds.json()["id"], "model": path})
        assert resp.status_code == 422 and resp.json()["field"] == "model", resp.text
        answers.append(resp.json()["detail"].replace(path, "PATH"))
    assert answers[0] == answers[1] and "default, all-MiniLM-L6-v2" in answers[0] and "smollm2" not in answers[0]
    assert (await client.get("/api/v1/embedding-runs", headers=auth)).json()["total"] == 0


def _sae_run_row(app) -> int:  # noqa: ANN001
    """An SAE run the caller may see (access is decided on the run before the body is read)."""
    from gateway.db import session_scope
    from gateway.domain.auth.accounts import default_project
    from gateway.domain.datasets.models import Dataset
    from gateway.domain.runs.models import EmbeddingRun, SaeRun

    with session_scope(app.state.factory) as session:
        ds = Dataset(name="d", format="csv", n_documents=1, project_id=default_project(session).id)
        session.add(ds)
        session.flush()
        emb = EmbeddingRun(dataset_id=ds.id, model="default", status="succeeded", dim=384, n_documents=1,
                           result={"shards": []})
        session.add(emb)
        session.flush()
        run = SaeRun(embedding_run_id=emb.id, status="succeeded", n_latents=8, d=384, k=2)
        session.add(run)
        session.flush()
        return run.id


async def test_llamacpp_model_is_a_name(app, client, auth) -> None:  # noqa: ANN001
    run = _sae_run_row(app)
    for path, body in [(f"/api/v1/sae-runs/{run}/interpretations", {"backends": [{"backend": "llamacpp", "model": "/etc/hosts"}]}),
                       (f"/api/v1/sae-runs/{run}/features/0/interpretations", {"backend": "llamacpp", "model": "../x.gguf"})]:
        resp = await client.post(path, headers=auth, json=body)
        assert resp.status_code == 422 and resp.json()["field"].endswith("model"), resp.text
        assert "smollm2-135m-instruct" in resp.text and "not an allowed model" in resp.text
