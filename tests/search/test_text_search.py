"""Text search and semantic label search on a real pipeline (SQLite, embedded mode): generated
notes embedded with MiniLM (the gateway tests' shared run), a small SAE, features named by the keywords back-end. The index is
built when the embedding run succeeds; a document's own text finds that document first, with the
SAE features the run stored for it."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.db import session_scope
from gateway.demo.corpus import generate_notes
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.runs.models import SaeRun
from tests.gateway.polling import wait_done
from tests.gateway.shared_runs import N_NOTES, NOTES_SEED, SMALL, embedding_run  # noqa: F401 - fixture

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def backend() -> str:
    return "sqlite"  # one back-end is enough: this is about the services, not the database


@pytest.fixture
async def pipeline(client, auth, embedding_run) -> dict:  # noqa: ANN001, F811
    """The gateway tests' shared run of N_NOTES generated notes (computed once per test process, imported from its
    vectors after: the same vectors, so a note's own text still finds it at cosine 1), a small SAE, named."""
    emb = embedding_run
    (sae,) = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": SMALL},
                                headers=auth)).json()
    sae = await wait_done(client, auth, f"/api/v1/sae-runs/{sae['id']}", timeout=240)
    assert sae["status"] == "succeeded", sae
    job = await client.post(f"/api/v1/sae-runs/{sae['id']}/interpretations",
                            json={"backends": [{"backend": "keywords"}]}, headers=auth)
    assert (await wait_done(client, auth, f"/api/v1/jobs/{job.json()['id']}", timeout=240))["status"] == "succeeded"
    return {"embedding_run": emb, "sae_run": sae, "texts": [n.text for n in generate_notes(n=N_NOTES, seed=NOTES_SEED)]}


async def test_text_and_semantic_label_search(client, auth, app, pipeline) -> None:  # noqa: ANN001
    emb, sae = pipeline["embedding_run"], pipeline["sae_run"]
    with session_scope(app.state.factory) as session:  # built when the embedding run succeeded
        kinds = [a.kind for a in artifact_repo.for_owner(session, owner_type="embedding_run", owner_id=emb["id"])]
    assert kinds.count("faiss-index") == 1

    # the stored codes, and every feature's name (the keywords back-end leaves some unnamed): the target is the
    # first note with a named feature among its strongest 8, so that the names' passage through the search shows
    with session_scope(app.state.factory) as session:
        csr_uri = session.get(SaeRun, sae["id"]).result["artifacts"]["codes_csr"]["uri"]
    codes = sp.load_npz(io.BytesIO(app.state.store.read_bytes(csr_uri)))
    labels: dict[int, str | None] = {}
    while len(labels) < codes.shape[1]:
        page = (await client.get(f"/api/v1/sae-runs/{sae['id']}/features?sort=index&limit=500&offset={len(labels)}",
                                 headers=auth)).json()
        labels |= {f["index"]: f["label"] for f in page["items"]}

    def strongest(position: int) -> list[int]:
        row = codes.getrow(position)
        return [int(i) for i in row.indices[np.argsort(-row.data)]][:8]

    target = next((p for p in range(N_NOTES) if any(labels[i] for i in strongest(p))), None)
    assert target is not None, "the keywords back-end named none of any note's features"
    resp = await client.post(f"/api/v1/sae-runs/{sae['id']}/search", headers=auth,
                             json={"mode": "text", "text": pipeline["texts"][target], "limit": 5, "top_features": 8})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["index"] == "flat" and body["total"] == N_NOTES
    first = body["items"][0]
    assert first["position"] == target and first["score"] == pytest.approx(1.0, abs=1e-3)
    assert [d["score"] for d in body["items"]] == sorted((d["score"] for d in body["items"]), reverse=True)
    # the query's features are the ones the run stored for that document, strongest first, with their names
    stored = strongest(target)
    assert [f["index"] for f in body["query_features"]] == stored
    assert [f["label"] for f in body["query_features"]] == [labels[i] for i in stored]
    assert {f["index"] for f in first["features"]} == set(stored)
    page2 = (await client.post(f"/api/v1/sae-runs/{sae['id']}/search", headers=auth,
                               json={"mode": "text", "text": pipeline["texts"][target], "limit": 5, "offset": 5})).json()
    assert not {d["position"] for d in page2["items"]} & {d["position"] for d in body["items"]}

    named = (await client.get(f"/api/v1/sae-runs/{sae['id']}/features?sort=density&limit=5", headers=auth)).json()
    label = next(f["label"] for f in named["items"] if f["label"])
    sem = await client.post(f"/api/v1/sae-runs/{sae['id']}/search", headers=auth,
                            json={"mode": "label", "method": "semantic", "query": label, "limit": 3})
    assert sem.status_code == 200, sem.text
    top = sem.json()["items"][0]
    assert top["label"] == label and top["score"] == pytest.approx(1.0, abs=1e-3)
    assert sem.json()["total"] >= 5
