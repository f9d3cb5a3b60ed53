"""Importing document vectors embedded elsewhere (POST /api/v1/embedding-runs/import): every bad upload
is a 4xx naming the problem with nothing stored; a good one is a succeeded run whose shards are the
embedded runs' own, so an SAE trains on it exactly as on the same vectors embedded here."""

from __future__ import annotations

import csv
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gateway.demo.corpus import generate_notes
from tests import factories
from tests.factories import npy
from tests.gateway.polling import wait_done

pytestmark = [pytest.mark.anyio]
N, D = 40, 384
NOTES_SEED = 5  # upload_notes' generated corpus
TINY = {"expansion_factor": 2, "k": 8, "max_steps": 40, "batch_size": 16, "checkpoint_every_steps": 20}


async def upload_notes(client, auth, n: int = N) -> int:  # noqa: ANN001
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text", "labels"])
    for note in generate_notes(n=n, seed=NOTES_SEED):
        w.writerow([note.id, note.text, "|".join(note.labels)])
    resp = await client.post("/api/v1/datasets", files={"file": ("notes.csv", buf.getvalue().encode())}, headers=auth)
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


async def external_ids(client, auth, dataset_id: int) -> list[str]:  # noqa: ANN001
    page = (await client.get(f"/api/v1/datasets/{dataset_id}/documents?limit=500", headers=auth)).json()
    return [d["external_id"] for d in sorted(page["items"], key=lambda d: d["position"])]


def unit_vectors(n: int = N, d: int = D, seed: int = 0) -> np.ndarray:
    return factories.unit_vectors(n, d, seed)


def parquet(ids: list, vectors: list | np.ndarray, *, id_column: str = "external_id", fixed: bool = True) -> bytes:
    """ids and vectors as Parquet; `fixed`: vector as a fixed-size list (rows of one length only)."""
    values = pa.array([list(map(float, v)) for v in vectors], type=pa.list_(pa.float32()))
    if fixed:
        values = values.cast(pa.list_(pa.float32(), len(vectors[0])))
    buf = io.BytesIO()
    pq.write_table(pa.table({id_column: ids, "vector": values}), buf)
    return buf.getvalue()


async def post_import(client, auth, body: bytes, filename: str, **fields: object):  # noqa: ANN001, ANN201
    return await client.post("/api/v1/embedding-runs/import", headers=auth, files={"file": (filename, body)},
                             data={k: str(v) for k, v in fields.items()})


async def test_bad_imports_name_the_problem_and_store_nothing(app, client, auth) -> None:  # noqa: ANN001
    ds = await upload_notes(client, auth)
    ids = await external_ids(client, auth, ds)
    x = unit_vectors()
    ragged = [v if i != 5 else v[:-1] for i, v in enumerate(x)]
    with_nan, with_inf, with_zero = x.copy(), x.copy(), x.copy()
    with_nan[12, 7], with_inf[3, 0], with_zero[9] = np.nan, np.inf, 0.0
    good_parquet = parquet(ids, x)
    cases = [  # (body, filename, form fields, status, field, fragments of the message)
        (npy(x[0]), "v.npy", {}, 422, "vector", ["2-D", "(384,)"]),
        (npy(x[:39]), "v.npy", {}, 422, "vector", ["39 rows", f"dataset {ds} has 40 documents"]),
        (parquet(ids, ragged, fixed=False), "v.parquet", {}, 422, "vector", ["row 5 has 383 values"]),
        (parquet(ids[:7] + ["X99"] + ids[8:], x), "v.parquet", {}, 422, "external_id", ["'X99'", "row 7"]),
        (parquet(ids[:7] + [ids[3]] + ids[8:], x), "v.parquet", {}, 422, "external_id",
         [f"'{ids[3]}' appears 2 times"]),
        (parquet(ids[:39], x[:39]), "v.parquet", {}, 422, "external_id", ["has no vector", f"'{ids[39]}'"]),
        (parquet(list(range(N)), x, id_column="position")[:-40], "v.parquet", {}, 422, "file", ["Parquet", "corrupt"]),
        (npy(with_nan), "v.npy", {}, 422, "vector", ["row 12", "NaN", "column 7"]),
        (parquet(ids, with_inf), "v.parquet", {}, 422, "vector", ["row 3", "infinite"]),
        (npy(with_zero), "v.npy", {}, 422, "vector", ["row 9", "all zeros"]),
        (npy(np.where(np.arange(N)[:, None] == 4, 1e300, x.astype(np.float64))), "v.npy", {}, 422, "vector",
         ["row 4", "beyond float32's range"]),
        (npy(x)[:-100], "v.npy", {}, 422, "file", ["truncated"]),
        (npy(x.astype(np.int64)), "v.npy", {}, 422, "vector", ["int64", "floating-point"]),
        (b"id,vector\nN1,0.5\n", "v.csv", {}, 422, "file", ["neither an .npy array nor a Parquet file"]),
        (good_parquet, "v.parquet", {"dim": 768}, 422, "dim", ["768", "384"]),
        (good_parquet, "v.parquet", {"query_pooling": "max"}, 422, "query_pooling", ["'max'"]),
        (good_parquet, "v.parquet", {"query_model": "/no/such/model"}, 422, "query_model", ["/no/such/model"]),
        (good_parquet, "v.parquet", {"dataset_id": 999}, 422, "dataset_id", ["999"]),
    ]
    for body, filename, fields, status, field, fragments in cases:
        resp = await post_import(client, auth, body, filename, **({"dataset_id": ds} | fields))
        assert resp.status_code == status, (field, resp.text)
        out = resp.json()
        assert out["field"] == field and all(f in out["detail"] for f in fragments), (fragments, out)
    # Bounded by the upload limit: the file itself, and the float32 matrix a compressed file unfolds to.
    constant = parquet(ids, np.full((N, D), 0.05, np.float32))
    app.state.settings.max_upload_bytes = len(constant) + 1000  # < N × D × 4 = 61,440 bytes
    assert len(constant) + 1000 < N * D * 4
    too_big = await post_import(client, auth, constant, "v.parquet", dataset_id=ds)
    assert too_big.status_code == 413 and "upload limit" in too_big.json()["detail"]
    over = await post_import(client, auth, npy(x), "v.npy", dataset_id=ds)
    assert over.status_code == 413
    # Nothing stored: no run row, no artifact, no file under the runs' prefix, no temporary left behind.
    assert (await client.get("/api/v1/embedding-runs", headers=auth)).json()["total"] == 0
    assert app.state.store.list("embedding-runs") == []
    assert list(app.state.settings.uploads_dir.iterdir()) == []


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_failed_write_leaves_nothing_behind(app, client, auth, monkeypatch) -> None:  # noqa: ANN001
    """The store failing after the run row and a shard were written: both are removed again."""
    from gateway.domain.runs import embedding_import

    real = embedding_import.write_shards

    def write_then_fail(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        real(*args, **kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(embedding_import, "write_shards", write_then_fail)
    ds = await upload_notes(client, auth)
    with pytest.raises(OSError, match="disk full"):
        await post_import(client, auth, npy(unit_vectors()), "v.npy", dataset_id=ds)
    assert (await client.get("/api/v1/embedding-runs", headers=auth)).json()["total"] == 0
    assert app.state.store.list("embedding-runs") == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_npy_import_trains_an_sae_and_refuses_text_without_a_query_model(app, client, auth) -> None:  # noqa: ANN001
    ds = await upload_notes(client, auth)
    x = 3.0 * unit_vectors(seed=1)  # not unit norm: the import scales them (normalize defaults to true)
    resp = await post_import(client, auth, npy(x.astype(np.float64)), "gpu-run.npy", dataset_id=ds, name="e5-large")
    assert resp.status_code == 201, resp.text
    run = resp.json()
    assert (run["status"], run["model"], run["pooling"], run["dim"], run["n_documents"]) == \
        ("succeeded", "imported:e5-large", "imported", D, N)
    assert run["n_chunks"] is None and run["result"]["chunks"] == [] and run["job_id"] is None
    assert run["result"]["norm_min"] == pytest.approx(3.0, rel=1e-5) and run["result"]["dtype"] == "float64"
    assert run["spec"]["query_normalize"] is True  # scaled here: a query model's texts would be too
    as_given = await post_import(client, auth, npy(x), "raw.npy", dataset_id=ds, normalize="false")
    assert as_given.status_code == 201 and as_given.json()["spec"]["query_normalize"] is False  # norm 3, kept
    (shard,) = run["result"]["shards"]
    assert shard["uri"].endswith(f"embedding-runs/{run['id']}/embeddings/shard-00000.npy")
    stored = np.load(app.state.store.local_path(shard["uri"]))
    assert stored.dtype == np.float32
    np.testing.assert_allclose(stored, unit_vectors(seed=1), rtol=0, atol=1e-6)
    events = (await client.get("/api/v1/audit-events", headers=auth)).json()
    (event,) = [e for e in events if e["action"] == "embedding_run.import" and e["target_id"] == str(run["id"])]
    assert event["target_id"] == str(run["id"]) and event["details"] == {"dataset_id": ds, "n_documents": N, "dim": D,
                                                                           "format": "npy"}

    (sae,) = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": run["id"], "config": TINY},
                                headers=auth)).json()
    done = await wait_done(client, auth, f"/api/v1/sae-runs/{sae['id']}", timeout=240)
    assert done["status"] == "succeeded", done
    assert 0 < done["metrics"]["fvu"] and done["metrics"]["l0"] <= 8

    # No model embeds texts like these vectors: a 409 that says so, never a 500.
    for body in ({"mode": "text", "text": "tosse e febbre"}, {"mode": "label", "method": "semantic", "query": "tosse"}):
        refused = await client.post(f"/api/v1/sae-runs/{sae['id']}/search", json=body, headers=auth)
        assert refused.status_code == 409, refused.text
        assert refused.json()["field"] == "query_model" and "imported vectors" in refused.json()["detail"]
    naming = await client.post(f"/api/v1/sae-runs/{sae['id']}/interpretations", json={"features": [0]}, headers=auth)
    assert naming.status_code == 409 and naming.json()["field"] == "query_model"
    one = await client.post(f"/api/v1/sae-runs/{sae['id']}/features/0/interpretations", json={"backend": "keywords"},
                            headers=auth)
    assert one.status_code == 409 and one.json()["field"] == "query_model"
    expression = await client.post(f"/api/v1/sae-runs/{sae['id']}/search", headers=auth,
                                   json={"mode": "expression", "expression": "F0 OR F1 OR F2"})
    assert expression.status_code == 200, expression.text  # what needs no text still works
    page = await client.get(f"/embedding-runs/{run['id']}", headers=auth)
    assert page.status_code == 200 and "imported from gpu-run.npy" in page.text and "no query model" in page.text
    search_page = await client.get(f"/sae-runs/{sae['id']}/search?mode=text&q=tosse", headers=auth)
    assert search_page.status_code == 422 and "no query model" in search_page.text


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_imported_vectors_are_the_embedded_ones(app, client, auth) -> None:  # noqa: ANN001
    """The vectors of an embedding run, exported and imported again (Parquet keyed by external_id, rows
    shuffled, as given): the same shard bytes, the same SAE, the same text search; naming works
    without chunk provenance."""
    ds = await upload_notes(client, auth, n=80)
    emb = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds}, headers=auth)
    emb = await wait_done(client, auth, f"/api/v1/embedding-runs/{emb.json()['id']}", timeout=240)
    assert emb["status"] == "succeeded", emb
    vectors = np.concatenate([np.load(app.state.store.local_path(s["uri"])) for s in emb["result"]["shards"]])
    ids = await external_ids(client, auth, ds)
    order = np.random.default_rng(0).permutation(len(ids))
    body = parquet([ids[i] for i in order], vectors[order])
    resp = await post_import(client, auth, body, "minilm.parquet", dataset_id=ds, normalize="false",
                             query_model="default", dim=D)
    assert resp.status_code == 201, resp.text
    imported = resp.json()
    assert imported["model"] == "imported:minilm" and imported["spec"]["id_column"] == "external_id"
    assert [s["sha256"] for s in imported["result"]["shards"]] == [s["sha256"] for s in emb["result"]["shards"]]
    assert app.state.store.exists(f"embedding-runs/{imported['id']}/search/flat.faiss")  # built on success

    runs = {}
    for run_id in (emb["id"], imported["id"]):
        (sae,) = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": run_id, "config": TINY},
                                    headers=auth)).json()
        runs[run_id] = await wait_done(client, auth, f"/api/v1/sae-runs/{sae['id']}", timeout=240)
        assert runs[run_id]["status"] == "succeeded", runs[run_id]
    ours, theirs = runs[imported["id"]], runs[emb["id"]]
    assert ours["metrics"] == pytest.approx(theirs["metrics"], rel=1e-6)

    query = {"mode": "text", "text": "bronchiolite con wheezing", "limit": 5}
    hits = [await client.post(f"/api/v1/sae-runs/{r['id']}/search", json=query, headers=auth) for r in (ours, theirs)]
    assert [h.status_code for h in hits] == [200, 200], hits[0].text
    assert [i["position"] for i in hits[0].json()["items"]] == [i["position"] for i in hits[1].json()["items"]]
    # unit vectors imported as given: the query is scaled to unit norm as the run's was, so the scores are the
    # same cosines and the query has the same features (an unscaled query ranked alike, but with other features)
    assert imported["spec"]["query_normalize"] is True
    assert [i["score"] for i in hits[0].json()["items"]] == pytest.approx([i["score"] for i in hits[1].json()["items"]],
                                                                          abs=1e-6)
    assert hits[0].json()["query_features"] == hits[1].json()["query_features"]

    densest = (await client.get(f"/api/v1/sae-runs/{ours['id']}/features?sort=density&limit=3", headers=auth)).json()
    naming = await client.post(f"/api/v1/sae-runs/{ours['id']}/interpretations", headers=auth,
                               json={"backends": [{"backend": "keywords"}],
                                     "features": [f["index"] for f in densest["items"]]})
    assert naming.status_code == 202, naming.text
    job = await wait_done(client, auth, f"/api/v1/jobs/{naming.json()['id']}", timeout=240)
    assert job["status"] == "succeeded", job  # excerpts from each document's start: no chunks to pick from
    assert job["result"]["n_named"] + job["result"]["n_skipped"] == 3


def test_rows_are_matched_by_any_id_column() -> None:
    """external_id, doc_id or position: each row's dataset position, whatever the rows' order."""
    from gateway.domain.runs.errors import RunInputError
    from gateway.domain.runs.vector_files import DatasetKeys, match_ids

    keys = DatasetKeys(3, np.arange(10, 15), pa.array(["a", "b", "c", "d", "e"]))
    want = [4, 0, 2, 1, 3]
    assert match_ids(pa.array(["e", "a", "c", "b", "d"]), "external_id", keys).tolist() == want
    assert match_ids(pa.array([14, 10, 12, 11, 13]), "doc_id", keys).tolist() == want
    assert match_ids(pa.array(want), "position", keys).tolist() == want
    for ids, column, fragment in [(pa.array([10, 11, 12, 13, 99]), "doc_id", "99 (first at row 4)"),
                                  (pa.array([0, 1, 2, 3, 5]), "position", "5 (first at row 4)"),
                                  (pa.array([0, 1, 2, 3, None]), "position", "row 4 has no id")]:
        with pytest.raises(RunInputError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            match_ids(ids, column, keys)
    no_ids = DatasetKeys(3, np.arange(10, 12), pa.array(["a", None]))
    with pytest.raises(RunInputError, match="key the vectors by doc_id or position"):
        match_ids(pa.array(["a", "b"]), "external_id", no_ids)


def test_cli_imports_embeddings(tmp_path, prisma_cli) -> None:  # noqa: ANN001
    """`prisma embeddings import DATASET FILE`: the same checks and run as the API, exit 2 when refused."""
    notes = tmp_path / "notes.csv"
    notes.write_text("id,text\n" + "".join(f"N{i},visita {i} per tosse\n" for i in range(N)))
    assert prisma_cli("datasets", "import", str(notes), "--id-column", "id").exit_code == 0
    good, bad = tmp_path / "v.parquet", tmp_path / "bad.npy"
    good.write_bytes(parquet([f"N{i}" for i in range(N)], unit_vectors()))
    bad.write_bytes(npy(unit_vectors()[:30]))
    refused = prisma_cli("embeddings", "import", "1", str(bad))
    assert refused.exit_code == 2 and "30 rows" in refused.output
    done = prisma_cli("embeddings", "import", "1", str(good), "--name", "e5")
    assert done.exit_code == 0, done.output
    assert "embedding run 1 (imported:e5): 40 vectors of dimension 384" in done.output
