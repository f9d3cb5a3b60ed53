"""Through the gateway: a request names models from the allowlist, never a path; the 422 names the
field, lists the allowed names, and reads the same whether the path exists or not."""

from __future__ import annotations

import pytest

from gateway.db import session_scope
from tests.factories import add_stub_dataset, add_succeeded_embedding_run, add_succeeded_sae_run

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]


async def test_embedding_run_model_is_a_name(client, auth, tmp_path) -> None:  # noqa: ANN001
    ds = await client.post("/api/v1/datasets", headers=auth, files={"file": ("a.csv", b"text\nuna nota\n")})
    (tmp_path / "config.json").write_text("{}")
    answers = []
    for path in (str(tmp_path), str(tmp_path / "missing")):
        resp = await client.post("/api/v1/embedding-runs", headers=auth, json={"dataset_id": ds.json()["id"], "model": path})
        assert resp.status_code == 422 and resp.json()["field"] == "model", resp.text
        answers.append(resp.json()["detail"].replace(path, "PATH"))
    assert answers[0] == answers[1] and "default, multilingual-e5-small, all-MiniLM-L6-v2" in answers[0] and "smollm2" not in answers[0]
    assert (await client.get("/api/v1/embedding-runs", headers=auth)).json()["total"] == 0


def _sae_run_row(app) -> int:  # noqa: ANN001
    """An SAE run the caller may see (access is decided on the run before the body is read)."""
    with session_scope(app.state.factory) as session:
        ds = add_stub_dataset(session, name="d", n_documents=1)
        emb = add_succeeded_embedding_run(session, dataset_id=ds.id, dim=384, n_documents=1)
        return add_succeeded_sae_run(session, embedding_run_id=emb.id, d=384, n_latents=8, k=2).id


async def test_llamacpp_model_is_a_name(app, client, auth) -> None:  # noqa: ANN001
    run = _sae_run_row(app)
    for path, body in [(f"/api/v1/sae-runs/{run}/interpretations", {"backends": [{"backend": "llamacpp", "model": "/etc/hosts"}]}),
                       (f"/api/v1/sae-runs/{run}/features/0/interpretations", {"backend": "llamacpp", "model": "../x.gguf"})]:
        resp = await client.post(path, headers=auth, json=body)
        assert resp.status_code == 422 and resp.json()["field"].endswith("model"), resp.text
        assert "smollm2-135m-instruct" in resp.text and "not an allowed model" in resp.text
