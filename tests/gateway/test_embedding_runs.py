"""Embedding runs through the gateway: the job, the embedder (in-process ASGI/worker), the shards."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gateway.polling import wait_done

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def upload_notes(client, auth, n: int = 40) -> int:  # noqa: ANN001
    long_tail = " ".join(["bronchiolite con wheezing e rientramenti"] * 80)  # over one 256-token window
    rows = [f"N{i},visita numero {i} per tosse e febbre" + (f" {long_tail}" if i % 7 == 0 else "") for i in range(n)]
    body = ("id,text\n" + "\n".join(rows) + "\n").encode()
    resp = await client.post("/api/v1/datasets", files={"file": ("n.csv", body)}, headers=auth)
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]



async def test_embedding_run_end_to_end(app, client, auth) -> None:  # noqa: ANN001
    ds_id = await upload_notes(client, auth)
    resp = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds_id, "shard_size": 16}, headers=auth)
    assert resp.status_code == 202, resp.text
    run = await wait_done(client, auth, f"/api/v1/embedding-runs/{resp.json()['id']}", timeout=120)
    assert run["status"] == "succeeded", run
    assert run["dim"] == 384 and run["n_documents"] == 40 and run["n_chunks"] > 40
    assert run["result"]["chunks_per_doc_histogram"]["1"] == 34
    # the run's row is written by the handler, the job's by the runner right after it: poll the job too
    job = await wait_done(client, auth, f"/api/v1/jobs/{run['job_id']}", timeout=30)
    assert job["status"] == "succeeded" and job["progress"]["done"] == 40 and job["progress"]["total"] == 40
    shards = [np.load(app.state.store.local_path(s["uri"])) for s in run["result"]["shards"]]
    vectors = np.concatenate(shards)
    assert vectors.shape == (40, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    # The same work asked again is the same run (200), not a second one.
    again = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds_id, "shard_size": 16}, headers=auth)
    assert again.status_code == 200 and again.json()["id"] == run["id"]
    from gateway.db import session_scope
    from gateway.domain.runs import repo

    with session_scope(app.state.factory) as session:  # as stored before the spec had `segments`
        row = repo.get_embedding_run(session, run_id=run["id"])
        row.spec = {k: v for k, v in row.spec.items() if k != "segments"}
    older = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds_id, "shard_size": 16}, headers=auth)
    assert older.status_code == 200 and older.json()["id"] == run["id"]
    listing = (await client.get(f"/api/v1/embedding-runs?dataset_id={ds_id}", headers=auth)).json()
    assert listing["total"] == 1


async def test_embedding_run_bad_input(app, client, auth) -> None:  # noqa: ANN001
    ds_id = await upload_notes(client, auth, n=3)
    missing = await client.post("/api/v1/embedding-runs", json={"dataset_id": 999}, headers=auth)
    assert missing.status_code == 422 and missing.json()["field"] == "dataset_id"
    bad_model = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds_id, "model": "/no/such/model"},
                                  headers=auth)
    assert bad_model.status_code == 422 and "/no/such/model" in bad_model.json()["detail"]
    assert bad_model.json()["field"] == "model"
    bad_pooling = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds_id, "pooling": "max"}, headers=auth)
    assert bad_pooling.status_code == 422 and "pooling" in bad_pooling.json()["field"]
    no_segments = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds_id, "document_vectors": "segments"},
                                    headers=auth)
    assert no_segments.status_code == 422 and "needs segments: true" in no_segments.json()["message"]
    assert no_segments.json()["field"] == "body.document_vectors"
    no_words = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds_id, "word_states": True}, headers=auth)
    assert no_words.status_code == 422 and no_words.json()["field"] == "body.word_states"
    assert "beside clause or sentence segments; this run has no segments" in no_words.json()["message"]
    runs = (await client.get("/api/v1/embedding-runs", headers=auth)).json()
    assert runs["total"] == 0


async def test_documents_from_their_segments_through_the_api(app, client, auth) -> None:  # noqa: ANN001
    """`document_vectors: segments`: the run succeeds, its page says how its documents were made, and
    asking for it again is the same run while the default spec is another."""
    ds_id = await upload_notes(client, auth, n=6)
    body = {"dataset_id": ds_id, "segments": True, "document_vectors": "segments"}
    resp = await client.post("/api/v1/embedding-runs", json=body, headers=auth)
    assert resp.status_code == 202, resp.text
    run = await wait_done(client, auth, f"/api/v1/embedding-runs/{resp.json()['id']}", timeout=120)
    assert run["status"] == "succeeded" and run["spec"]["document_vectors"] == "segments", run
    assert run["n_chunks"] == run["result"]["n_segments"]  # a document's chunks are its segments
    page = await client.get(f"/embedding-runs/{run['id']}", headers=auth)
    assert "Document vectors" in page.text and "the mean of each document's segment vectors" in page.text
    assert "Segments per document" in page.text and "segments per document</text>" in page.text
    assert "Chunks per document" not in page.text  # its chunks are its segments: the histogram counts those
    again = await client.post("/api/v1/embedding-runs", json=body, headers=auth)
    assert again.status_code == 200 and again.json()["id"] == run["id"]
    encoded = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds_id, "segments": True}, headers=auth)
    assert encoded.status_code == 202 and encoded.json()["id"] != run["id"]
    done = await wait_done(client, auth, f"/api/v1/embedding-runs/{encoded.json()['id']}", timeout=120)
    assert done["status"] == "succeeded", done
    plain = (await client.get(f"/embedding-runs/{done['id']}", headers=auth)).text
    assert "Document vectors" not in plain and done["spec"]["word_states"] is False  # words only when asked for
    assert "each word read in its note" not in plain
    assert "Chunks per document" in plain and "Segments per document" not in plain


def test_cli_embeds_with_segments_and_refuses_by_name(tmp_path, prisma_cli) -> None:  # noqa: ANN001
    """`prisma embed DATASET --segments clause --document-vectors segments`: the run the API would make;
    a spec it refuses exits 2 naming the option or field."""
    notes = tmp_path / "notes.csv"
    notes.write_text("id,text\n" + "".join(f"N{i},Tosse da {i} giorni. Torace: MV fisiologico.\n" for i in range(5)))
    assert prisma_cli("datasets", "import", str(notes), "--id-column", "id").exit_code == 0
    refused = prisma_cli("embed", "1", "--document-vectors", "segments")
    assert refused.exit_code == 2 and "document_vectors: 'segments'" in refused.output, refused.output
    unknown = prisma_cli("embed", "1", "--segments", "words")
    assert unknown.exit_code == 2 and "--segments: 'words'" in unknown.output
    done = prisma_cli("embed", "1", "--segments", "clause", "--document-vectors", "segments")
    assert done.exit_code == 0, done.output
    # a document's chunks are its segments ("Tosse da i giorni." "Torace:" "MV fisiologico."), not one chunk each
    assert "done: 5 documents, 15 chunks" in done.output
