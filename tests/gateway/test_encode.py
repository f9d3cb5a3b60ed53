"""POST /api/v1/sae-runs/{id}/encode: a stored note sent as text gets the codes the run stored for it (a real
embedding run and SAE, whole notes; the run with segments is checked in tests/concepts/test_classify.py), its
strongest features named; bad input is a 4xx naming the field; the call is audited by count."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import scipy.sparse as sp
from sqlalchemy import select

from gateway.db import session_scope
from gateway.demo.corpus import generate_notes
from gateway.domain.auth.models import AuditEvent
from gateway.domain.runs.models import EmbeddingRun, SaeRun
from tests.factories import add_coded_sae_run
from tests.gateway.polling import wait_done
from tests.gateway.shared_runs import SMALL

pytestmark = pytest.mark.anyio
N_NOTES = 30


@pytest.fixture
def backend() -> str:
    """SQLite only: the run is embedded for real (the part that costs), and nothing here depends on the database."""
    return "sqlite"


async def upload(client, auth, texts: list[str]) -> int:  # noqa: ANN001
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text"])
    w.writerows([f"N{i}", t] for i, t in enumerate(texts))
    resp = await client.post("/api/v1/datasets", files={"file": ("n.csv", buf.getvalue().encode())}, headers=auth)
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


def stored_codes(app, run_id: int) -> sp.csr_matrix:  # noqa: ANN001
    """The run's document codes as its pipeline stored them, [notes, n]."""
    with session_scope(app.state.factory) as session:
        uri = session.get(SaeRun, run_id).result["artifacts"]["codes_csr"]["uri"]
    return sp.load_npz(io.BytesIO(app.state.store.read_bytes(uri))).tocsr()


async def test_a_stored_note_sent_as_text_gets_its_stored_codes(app, client, auth) -> None:  # noqa: ANN001
    texts = [n.text for n in generate_notes(n=N_NOTES, seed=5)]
    ds = await upload(client, auth, texts)
    emb = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds}, headers=auth)
    emb = await wait_done(client, auth, f"/api/v1/embedding-runs/{emb.json()['id']}", timeout=240)
    resp = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": SMALL}, headers=auth)
    run = await wait_done(client, auth, f"/api/v1/sae-runs/{resp.json()[0]['id']}", timeout=240)
    assert run["status"] == "succeeded", run

    resp = await client.post(f"/api/v1/sae-runs/{run['id']}/encode", headers=auth, json={"texts": texts, "top": 256})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["model"]["name"] == emb["model"] and body["sae_run_id"] == run["id"]
    codes = stored_codes(app, run["id"])
    for i, item in enumerate(body["items"]):
        row = codes[i]
        assert item["segments"] is None and item["n_active"] == row.nnz
        got = {f["index"]: f["activation"] for f in item["features"]}
        assert sorted(got) == sorted(row.indices.tolist())
        assert max(abs(got[f] - a) for f, a in zip(row.indices.tolist(), row.data.tolist())) <= 1e-4
        acts = [f["activation"] for f in item["features"]]
        assert acts == sorted(acts, reverse=True)
    top = await client.post(f"/api/v1/sae-runs/{run['id']}/encode", headers=auth, json={"texts": texts[:2], "top": 3})
    assert [len(i["features"]) for i in top.json()["items"]] == [3, 3]

    with session_scope(app.state.factory) as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "sae_run.encode")).all()
        assert [(e.details["count"], e.details["sae_run_id"]) for e in events] == [(N_NOTES, run["id"]), (2, run["id"])]
        assert not any(texts[0][:40] in str(e.details) for e in events)


@pytest.fixture
async def coded_run(app, client, auth) -> int:  # noqa: ANN001
    """A run with codes but no model (its vectors imported): what it refuses comes before any embedding."""
    ds = await upload(client, auth, ["una nota", "un'altra nota"])
    with session_scope(app.state.factory) as session:
        return add_coded_sae_run(session, app.state.store, dataset_id=ds,
                                 codes=sp.csr_matrix(np.eye(2, 4, dtype=np.float32))).id


@pytest.mark.parametrize(("texts", "status", "field"), [
    ([], 422, "body.texts"),
    (["x"] * 257, 422, "body.texts"),
    (["one", "  "], 422, "texts.1"),
    (["one", "two", "é" * 1001], 413, "texts.2"),  # 2002 bytes of UTF-8
])
async def test_bad_texts_are_named(app, client, auth, coded_run, texts, status, field) -> None:  # noqa: ANN001
    app.state.settings.max_document_bytes = 2000
    resp = await client.post(f"/api/v1/sae-runs/{coded_run}/encode", headers=auth, json={"texts": texts})
    assert resp.status_code == status and resp.json()["field"] == field, resp.text


async def test_a_run_without_a_model_here_is_a_409(app, client, auth, coded_run) -> None:  # noqa: ANN001
    with session_scope(app.state.factory) as session:
        session.get(EmbeddingRun, session.get(SaeRun, coded_run).embedding_run_id).pooling = "imported"
    resp = await client.post(f"/api/v1/sae-runs/{coded_run}/encode", headers=auth, json={"texts": ["una nota"]})
    assert resp.status_code == 409 and resp.json()["field"] == "sae_run_id", resp.text


async def test_an_unknown_run_is_a_404(client, auth) -> None:  # noqa: ANN001
    resp = await client.post("/api/v1/sae-runs/999999/encode", headers=auth, json={"texts": ["x"]})
    assert resp.status_code == 404
