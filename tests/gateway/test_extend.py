"""POST /api/v1/sae-runs/{id}/extend after notes were appended: the new notes get the codes POST .../encode gives
their texts (the trained SAE, no retraining; each clause's too), search and a concept's apply find them, the
statistics count them, the run says how many notes it learned from and how many were added since."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.db import session_scope
from gateway.domain.concepts.service import dense_vectors
from gateway.demo.corpus import generate_notes
from gateway.domain.runs.models import SaeRun
from tests.gateway.polling import wait_done
from tests.gateway.shared_runs import SMALL
from tests.gateway.test_label_pages import as_role  # noqa: F401 - fixture

pytestmark = pytest.mark.anyio
N_OLD, N_NEW = 30, 7


@pytest.fixture
def backend() -> str:
    """SQLite only: the run is embedded for real (the part that costs)."""
    return "sqlite"


def csv_bytes(notes) -> bytes:  # noqa: ANN001
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text"])
    w.writerows([n.id, n.text] for n in notes)
    return buf.getvalue().encode()


def stored(app, run_id: int, name: str) -> sp.csr_matrix:  # noqa: ANN001
    with session_scope(app.state.factory) as session:
        uri = session.get(SaeRun, run_id).result["artifacts"][name]["uri"]
    return sp.load_npz(io.BytesIO(app.state.store.read_bytes(uri))).tocsr()


async def trained_run(client, auth) -> tuple[int, int]:  # noqa: ANN001
    """(dataset id, SAE run id): a real embedding run with segments of N_OLD notes and a small SAE on it."""
    old = list(generate_notes(n=N_OLD, seed=5))
    ds = (await client.post("/api/v1/datasets", files={"file": ("n.csv", csv_bytes(old))}, headers=auth)).json()["id"]
    # fp32: a text's vector is then the same bit for bit in any batch; under bf16 on CPU it may differ by about
    # 1e-3 with the batch's row count (oneDNN picks its matmul kernel by shape), and this compares codes exactly.
    emb = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds, "segments": True, "precision": "fp32"},
                            headers=auth)
    emb = await wait_done(client, auth, f"/api/v1/embedding-runs/{emb.json()['id']}", timeout=240)
    resp = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": SMALL}, headers=auth)
    run = await wait_done(client, auth, f"/api/v1/sae-runs/{resp.json()[0]['id']}", timeout=240)
    assert run["status"] == "succeeded" and run["config"]["sae"]["document_codes"] == "max_over_segments", run
    return ds, run["id"]


async def test_extension_encodes_appended_notes_as_the_run_would(app, client, auth, as_role) -> None:  # noqa: ANN001, F811
    ds, run_id = await trained_run(client, auth)
    before = stored(app, run_id, "codes_csr")
    assert (await client.post(f"/api/v1/sae-runs/{run_id}/extend", headers=auth)).status_code == 409  # nothing new

    new = [replace(n, id=f"new-{i}") for i, n in enumerate(generate_notes(n=N_NEW, seed=77))]  # ids: the old's
    resp = await client.post(f"/api/v1/datasets/{ds}/documents", files={"file": ("m.csv", csv_bytes(new))},
                             headers=auth)
    assert resp.status_code == 201, resp.text
    run = (await client.get(f"/api/v1/sae-runs/{run_id}", headers=auth)).json()
    assert run["coverage"] == {"trained_documents": N_OLD, "encoded_documents": N_OLD,
                               "dataset_documents": N_OLD + N_NEW, "added_since_training": N_NEW, "not_encoded": N_NEW}
    editor, _ = await as_role("editor", ds)
    page = (await editor.get(f"/sae-runs/{run_id}")).text
    assert f"{N_NEW} notes were added to the dataset since this SAE was trained" in page
    assert f"Encode the {N_NEW} new notes" in page
    viewer, _ = await as_role("viewer", ds)
    page = (await viewer.get(f"/sae-runs/{run_id}")).text
    assert "since this SAE was trained" in page and "Encode the" not in page

    query = {"mode": "text", "text": new[-1].text, "limit": 5}
    found = (await client.post(f"/api/v1/sae-runs/{run_id}/search", headers=auth, json=query)).json()
    assert found["total"] == N_OLD and max(d["position"] for d in found["items"]) < N_OLD  # not yet encoded

    resp = await client.post(f"/api/v1/sae-runs/{run_id}/extend", headers=auth, json={"batch_documents": 3})
    assert resp.status_code == 202, resp.text
    assert resp.json()["from_documents"] == N_OLD and resp.json()["to_documents"] == N_OLD + N_NEW
    job = await wait_done(client, auth, f"/api/v1/jobs/{resp.json()['job_id']}", timeout=240)
    assert job["status"] == "succeeded", job
    assert job["result"]["batches"] == 3

    run = (await client.get(f"/api/v1/sae-runs/{run_id}", headers=auth)).json()
    assert run["coverage"]["encoded_documents"] == N_OLD + N_NEW and run["coverage"]["not_encoded"] == 0
    assert run["coverage"]["added_since_training"] == N_NEW  # the SAE still learned from the first N_OLD
    assert run["training_text"]["documents"] == N_OLD
    page = (await editor.get(f"/sae-runs/{run_id}")).text
    assert "All have codes from the trained SAE" in page and "Encode the" not in page

    codes = stored(app, run_id, "codes_csr")
    assert codes.shape[0] == N_OLD + N_NEW
    assert (codes[:N_OLD] != before).nnz == 0  # the old notes' codes are untouched
    enc = await client.post(f"/api/v1/sae-runs/{run_id}/encode", headers=auth,
                            json={"texts": [n.text for n in new], "top": 256})
    assert enc.status_code == 200, enc.text
    items = enc.json()["items"]
    for i, item in enumerate(items):
        row = codes[N_OLD + i].toarray().ravel()
        assert int(np.count_nonzero(row)) == item["n_active"], i
        shown = {f["index"]: f["activation"] for f in item["features"]}  # the strongest `top` of them
        assert {j: float(row[j]) for j in shown} == pytest.approx(shown, rel=1e-4, abs=1e-5), i
    segments = stored(app, run_id, "segment_codes")
    with session_scope(app.state.factory) as session:
        index_uri = session.get(SaeRun, run_id).result["artifacts"]["segments"]["uri"]
    with np.load(io.BytesIO(app.state.store.read_bytes(index_uri))) as index:
        position, start, end = index["position"], index["char_start"], index["char_end"]
    assert segments.shape[0] == len(position) and position[-1] == N_OLD + N_NEW - 1
    last = np.flatnonzero(position == N_OLD + N_NEW - 1)
    assert [(int(start[r]), int(end[r])) for r in last] == [(s["start"], s["end"]) for s in items[-1]["segments"]]

    # statistics count over every note now (the SAE's own function); names and families stay
    feature, act = max(((f["index"], f["activation"]) for f in items[-1]["features"]), key=lambda x: x[1])
    detail = (await client.get(f"/api/v1/sae-runs/{run_id}/features/{feature}", headers=auth)).json()
    assert detail["density"] == pytest.approx(codes[:, feature].nnz / (N_OLD + N_NEW))

    # text search finds a new note by its text, ranked by its clauses too (the SAE run's own index of every note)
    found = await client.post(f"/api/v1/sae-runs/{run_id}/search", headers=auth, json=query)
    assert found.status_code == 200, found.text
    found = found.json()
    assert found["total"] == N_OLD + N_NEW and found["ranked_by"] == "documents and segments"
    assert found["items"][0]["position"] == N_OLD + N_NEW - 1, [(d["position"], d["score"]) for d in found["items"]]
    with session_scope(app.state.factory) as session:
        artifacts = session.get(SaeRun, run_id).result["artifacts"]
    assert {"appended_vectors", "text_index", "segment_ranker"} <= set(artifacts)
    with session_scope(app.state.factory) as session:  # a concept's dense baseline reads every note's vector
        dense = dense_vectors(app.state, session.get(SaeRun, run_id))
    assert dense.shape[0] == N_OLD + N_NEW and np.allclose(np.linalg.norm(dense, axis=1), 1, atol=1e-5)
    assert int(np.argmax(dense @ dense[-1])) == N_OLD + N_NEW - 1

    # search finds the new note, and a concept applied to the run includes it
    expr = f"F{feature} >= {act * 0.999:.6f}"
    found = await client.post(f"/api/v1/sae-runs/{run_id}/search", headers=auth,
                              json={"mode": "expression", "expression": expr, "limit": 100})
    assert found.status_code == 200, found.text
    assert N_OLD + N_NEW - 1 in [d["position"] for d in found.json()["items"]]
    concept = await client.post("/api/v1/concepts", headers=auth,
                                json={"sae_run_id": run_id, "name": "new", "kind": "expression", "expression": expr})
    assert concept.status_code == 201, concept.text
    job = (await client.post(f"/api/v1/concepts/{concept.json()['id']}/apply", headers=auth)).json()
    done = await wait_done(client, auth, f"/api/v1/jobs/{job['id']}", timeout=120)
    assert done["status"] == "succeeded", done
    export = await client.get(f"/api/v1/concepts/{concept.json()['id']}/export.csv", headers=auth)
    assert "new-6" in export.text
