"""Deleting a dataset deletes everything computed from it: embedding runs (vectors, FAISS indexes),
SAE runs (codes), concepts (matches), their rows, their catalogued artifacts and their files."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from gateway.db import session_scope
from gateway.domain.artifacts import repo as artifact_repo
from gateway.domain.artifacts.models import Artifact
from gateway.domain.concepts.models import Concept
from gateway.domain.features.models import Feature
from gateway.domain.jobs.models import Job
from gateway.domain.runs.models import EmbeddingRun, SaeRun
from tests.gateway.polling import wait_done

pytestmark = pytest.mark.anyio


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


async def test_deleting_a_dataset_deletes_its_runs_concepts_indexes_and_files(app, client, auth,
                                                                              labelled_run) -> None:  # noqa: ANN001
    run = labelled_run
    store = app.state.store
    created = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": run.run_id, "name": "bronch", "kind": "expression", "expression": "F0 > 0"})
    concept_id = created.json()["id"]
    job = (await client.post(f"/api/v1/concepts/{concept_id}/apply", headers=auth)).json()
    assert (await wait_done(client, auth, f"/api/v1/jobs/{job['id']}", timeout=60))["status"] == "succeeded"
    with session_scope(app.state.factory) as session:
        emb_id = session.get(SaeRun, run.run_id).embedding_run_id
        session.add(Job(id="sae-still-running", kind="sae_train", queue="gateway", status="running"))
        session.flush()
        session.get(SaeRun, run.run_id).job_id = "sae-still-running"
        for key, kind in [(f"embedding-runs/{emb_id}/embeddings/shard-00000.npy", "embeddings"),
                          (f"embedding-runs/{emb_id}/search/text.faiss", "faiss-index")]:
            info = store.write_bytes(key, b"vectors of patient notes", kind=kind)
            artifact_repo.record(session, info=info,
                                 owner_type="embedding_run", owner_id=emb_id)
    root = Path(store.local_path("datasets")).parent
    before = files_under(root)
    for prefix in (f"datasets/{run.dataset_id}/", f"embedding-runs/{emb_id}/search/", f"sae-runs/{run.run_id}/",
                   f"concepts/{concept_id}/"):
        assert any(f.startswith(prefix) for f in before), (prefix, before)
    other = await client.post("/api/v1/datasets", headers=auth, files={"file": ("o.csv", b"text\nkept\n")})
    kept = files_under(root)

    assert (await client.delete(f"/api/v1/datasets/{run.dataset_id}", headers=auth)).status_code == 204

    left = files_under(root)
    assert left == [f for f in kept if f.startswith(f"datasets/{other.json()['id']}/")], left
    with session_scope(app.state.factory) as session:
        for model in (EmbeddingRun, SaeRun, Concept, Feature):
            assert session.scalar(select(func.count()).select_from(model)) == 0, model
        owners = {(a.owner_type, a.owner_id) for a in session.scalars(select(Artifact))}
        assert owners == {("dataset", other.json()["id"])}
        assert session.get(Job, "sae-still-running").cancel_requested  # stops before writing there again
    assert (await client.get(f"/api/v1/sae-runs/{run.run_id}", headers=auth)).status_code == 404
    deleted = (await client.get("/api/v1/audit-events?action=dataset.delete", headers=auth)).json()[0]
    assert deleted["details"] == {"n_documents": 400, "embedding_runs": 1, "sae_runs": 1, "concepts": 1}


async def test_deleting_a_concept_deletes_its_matches_and_keeps_the_run(app, client, auth,
                                                                       labelled_run) -> None:  # noqa: ANN001
    run, store = labelled_run, app.state.store
    ids = []
    for name in ("kept", "tried"):
        created = await client.post("/api/v1/concepts", headers=auth, json={
            "sae_run_id": run.run_id, "name": name, "kind": "expression", "expression": "F0 > 0"})
        ids.append(created.json()["id"])
    kept, tried = ids
    job = (await client.post(f"/api/v1/concepts/{tried}/apply", headers=auth)).json()
    assert (await wait_done(client, auth, f"/api/v1/jobs/{job['id']}", timeout=60))["status"] == "succeeded"
    root = Path(store.local_path("datasets")).parent
    assert any(f.startswith(f"concepts/{tried}/") for f in files_under(root))

    assert (await client.delete(f"/api/v1/concepts/{tried}", headers=auth)).status_code == 204

    assert not any(f.startswith(f"concepts/{tried}/") for f in files_under(root))
    for path in (f"/api/v1/concepts/{tried}", f"/api/v1/concepts/{tried}/export.csv"):
        gone = await client.get(path, headers=auth)
        assert gone.status_code == 404 and f"concept {tried} not found" in gone.text, path
    listed = (await client.get("/api/v1/concepts", headers=auth)).json()
    assert [c["id"] for c in listed["items"]] == [kept]
    assert (await client.get(f"/api/v1/sae-runs/{run.run_id}", headers=auth)).status_code == 200  # the run stays
    with session_scope(app.state.factory) as session:
        assert {(a.owner_type, a.owner_id) for a in session.scalars(select(Artifact))
                if a.owner_type == "concept"} == set()
    event = (await client.get("/api/v1/audit-events?action=concept.delete", headers=auth)).json()[0]
    assert (event["target_id"], event["details"]) == (
        str(tried), {"name": "tried", "kind": "expression", "sae_run_id": run.run_id})
    again = await client.delete(f"/api/v1/concepts/{tried}", headers=auth)
    assert again.status_code == 404
