"""Segment vectors imported beside document vectors (the `segments` part of POST
/api/v1/embedding-runs/import, `prisma embeddings import --segments`): every bad file is a 4xx naming
the field with nothing stored; a good one is stored exactly as an embedded run with `segments: true`
stores its own, so an SAE trained on segments comes out the same."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from services.embedder.segments import segment_spans
from tests.gateway.polling import wait_done
from tests.gateway.test_embedding_import import TINY, D, N, npy, unit_vectors, upload_notes

pytestmark = [pytest.mark.anyio]
ON_SEGMENTS = {**TINY, "train_on": "segments", "document_codes": "max_over_segments"}


async def documents(client, auth, dataset_id: int) -> tuple[list[str], list[str]]:  # noqa: ANN001
    """(external ids, texts) in position order."""
    page = (await client.get(f"/api/v1/datasets/{dataset_id}/documents?limit=500", headers=auth)).json()
    items = sorted(page["items"], key=lambda d: d["position"])
    return [d["external_id"] for d in items], [d["text"] for d in items]


def seg_parquet(ids: list, start, end, vectors, *, id_column: str = "external_id") -> bytes:  # noqa: ANN001
    values = pa.array([list(map(float, v)) for v in vectors], type=pa.list_(pa.float32()))
    buf = io.BytesIO()
    pq.write_table(pa.table({id_column: ids, "char_start": np.asarray(start, np.int64),
                             "char_end": np.asarray(end, np.int64), "vector": values}), buf)
    return buf.getvalue()


def seg_npz(compressed: bool = False, **arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


async def post(client, auth, doc_body: bytes, seg_body: bytes, seg_name: str, **fields: object):  # noqa: ANN001, ANN201
    return await client.post("/api/v1/embedding-runs/import", headers=auth,
                             files={"file": ("v.npy", doc_body), "segments": (seg_name, seg_body)},
                             data={k: str(v) for k, v in fields.items()})


async def test_bad_segment_files_name_the_field_and_store_nothing(app, client, auth) -> None:  # noqa: ANN001
    ds = await upload_notes(client, auth)
    ids, texts = await documents(client, auth, ds)
    doc, start, end = segment_spans(texts)  # [S] each: what the embedder would cut
    s = len(doc)
    sid = [ids[i] for i in doc]
    v = unit_vectors(s, seed=3)
    good_docs = npy(unit_vectors())
    length = np.array([len(t) for t in texts])
    past, negative, empty = end.copy(), start.copy(), end.copy()
    past[4] = length[doc[4]] + 1
    negative[6] = -1
    empty[2] = start[2]
    with_nan, big = v.copy(), v.copy()
    with_nan[5, 9] = np.nan
    big[7, 3] = 1e5
    dup = sid[:1] + sid[:-1], np.r_[start[:1], start[:-1]], np.r_[end[:1], end[:-1]]
    good_npz = dict(external_id=np.array(sid), char_start=start, char_end=end, vectors=v)
    cases = [  # (body, filename, form fields, field, fragments of the message)
        (seg_parquet(sid, start, end, v[:, :-1]), "s.parquet", {}, "segments.vector", ["row 0 has 383 values",
                                                                                        "the document vectors 384"]),
        (seg_npz(**good_npz | {"vectors": v[:, :-1]}), "s.npz", {}, "segments.vectors", ["383", "384"]),
        (seg_npz(**good_npz | {"vectors": v[:-1]}), "s.npz", {}, "segments.vectors", [f"expected ({s}, 384)"]),
        (seg_parquet(sid[:3] + ["X99"] + sid[4:], start, end, v), "s.parquet", {}, "segments.external_id",
         ["'X99'", "row 3"]),
        (seg_npz(**{"position": doc + np.where(np.arange(s) == 8, N, 0), "char_start": start, "char_end": end,
                    "vectors": v}), "s.npz", {}, "segments.position", [f"{doc[8] + N}", "row 8"]),
        (seg_parquet(sid, start, past, v), "s.parquet", {}, "segments.char_end",
         ["row 4", "past the end", f"({length[doc[4]]} characters)"]),
        (seg_parquet(sid, negative, end, v), "s.parquet", {}, "segments.char_start", ["row 6", "below 0"]),
        (seg_parquet(sid, start, empty, v), "s.parquet", {}, "segments.char_end", ["row 2", "not after char_start"]),
        (seg_parquet(sid, start, end, with_nan), "s.parquet", {}, "segments.vector", ["row 5", "NaN", "column 9"]),
        (seg_npz(**good_npz | {"vectors": big}), "s.npz", {"normalize": "false"}, "segments.vector",
         ["row 7", "float16"]),
        (seg_parquet(*dup, v), "s.parquet", {}, "segments", ["rows 0 and 1 are the same segment"]),
        (seg_parquet(sid, start, end, v)[:-60], "s.parquet", {}, "segments", ["Parquet", "corrupt"]),
        (seg_npz(compressed=True, **good_npz)[:-200], "s.npz", {}, "segments", [".npz", "corrupt"]),
        (seg_npz(**{k: a for k, a in good_npz.items() if k != "char_end"}), "s.npz", {}, "segments.char_end",
         ["no 'char_end' array"]),
        (seg_npz(**good_npz | {"char_start": start.astype(np.float64)}), "s.npz", {}, "segments.char_start",
         ["integers"]),
        (npy(v), "s.npy", {}, "segments", ["single .npy"]),
        (b"id,start\n", "s.csv", {}, "segments", ["neither a Parquet file nor an .npz"]),
    ]
    for body, filename, fields, field, fragments in cases:
        resp = await post(client, auth, good_docs, body, filename, **({"dataset_id": ds} | fields))
        assert resp.status_code == 422, (field, resp.text)
        out = resp.json()
        assert out["field"] == field and all(f in out["detail"] for f in fragments), (fragments, out)
    # the document vectors' own checks still come first: a bad .npy is refused whatever the segments
    bad_docs = await post(client, auth, npy(unit_vectors()[:30]), seg_npz(**good_npz), "s.npz", dataset_id=ds)
    assert bad_docs.status_code == 422 and bad_docs.json()["field"] == "vector"
    # nothing stored: no run, no artifact, no temporary left behind
    assert (await client.get("/api/v1/embedding-runs", headers=auth)).json()["total"] == 0
    assert app.state.store.list("embedding-runs") == []
    assert list(app.state.settings.uploads_dir.iterdir()) == []


def read_npz(store, uri: str) -> dict[str, np.ndarray]:  # noqa: ANN001
    with np.load(io.BytesIO(store.read_bytes(uri))) as z:
        return {k: z[k] for k in z.files}


def stored_segments(store, run: dict) -> dict[str, np.ndarray]:  # noqa: ANN001
    parts = [read_npz(store, s["uri"]) for s in run["result"]["segments"]]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_imported_segments_train_an_sae_as_embedded_ones_do(app, client, auth) -> None:  # noqa: ANN001
    """An embedding run with `segments: true` and without its words (an import carries segment vectors only); its
    document and segment vectors exported (segments as Parquet keyed by external_id, rows shuffled) and imported:
    the same segment arrays, the same SAE trained on segments with max-over-segments codes, the same segment codes."""
    ds = await upload_notes(client, auth, n=24)
    spec = {"dataset_id": ds, "segments": True, "word_states": False}
    emb = await client.post("/api/v1/embedding-runs", json=spec, headers=auth)
    emb = await wait_done(client, auth, f"/api/v1/embedding-runs/{emb.json()['id']}", timeout=300)
    assert emb["status"] == "succeeded", emb
    result = emb["result"]  # each distinct clause embedded once: the notes share stock phrases
    assert result["n_segments_computed"] == result["n_segments"] > result["n_segments_embedded"] > 0
    page = await client.get(f"/embedding-runs/{emb['id']}", headers=auth)
    share = 100 * result["n_segments_embedded"] / result["n_segments"]
    assert f"{share:.1f}% distinct, each embedded once" in page.text
    store = app.state.store
    vectors = np.concatenate([np.load(store.local_path(s["uri"])) for s in emb["result"]["shards"]])
    theirs = stored_segments(store, emb)
    ids, _ = await documents(client, auth, ds)
    order = np.random.default_rng(1).permutation(len(theirs["position"]))
    body = seg_parquet([ids[p] for p in theirs["position"][order]], theirs["char_start"][order],
                       theirs["char_end"][order], theirs["vectors"][order].astype(np.float32))
    resp = await post(client, auth, npy(vectors), body, "sentences.parquet", dataset_id=ds, normalize="false")
    assert resp.status_code == 201, resp.text
    imported = resp.json()
    assert imported["spec"]["segments"] is True and imported["spec"]["segments_id_column"] == "external_id"
    assert imported["result"]["n_segments"] == imported["result"]["n_segments_uploaded"] == len(order)
    assert imported["result"]["n_documents_without_segments"] == 0
    assert [s["uri"].rsplit("/", 2)[1:] for s in imported["result"]["segments"]] == \
        [s["uri"].rsplit("/", 2)[1:] for s in emb["result"]["segments"]]  # segments/shard-00000.npz
    ours = stored_segments(store, imported)
    assert set(ours) == set(theirs)
    for name in theirs:
        assert ours[name].dtype == theirs[name].dtype, name
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    # asking for the embedded run's work again finds it, not the imported run (and no 500)
    again = await client.post("/api/v1/embedding-runs", json=spec, headers=auth)
    assert again.status_code == 200 and again.json()["id"] == emb["id"], again.text

    runs = {}
    for run_id in (emb["id"], imported["id"]):
        resp = await client.post("/api/v1/sae-runs", json={"embedding_run_id": run_id, "config": ON_SEGMENTS},
                                 headers=auth)
        assert resp.status_code == 202, resp.text
        runs[run_id] = await wait_done(client, auth, f"/api/v1/sae-runs/{resp.json()[0]['id']}", timeout=300)
        assert runs[run_id]["status"] == "succeeded", runs[run_id]
    a, b = runs[imported["id"]], runs[emb["id"]]
    assert a["metrics"] == pytest.approx(b["metrics"], rel=1e-6)
    dense = [(await client.get(f"/api/v1/sae-runs/{r['id']}/features?sort=density&limit=3", headers=auth)).json()
             for r in (a, b)]
    assert [(f["index"], f["density"]) for f in dense[0]["items"]] == \
        [(f["index"], f["density"]) for f in dense[1]["items"]]
    assert dense[0]["items"][0]["density"] > 0
    f0, f1 = (f["index"] for f in dense[0]["items"][:2])
    expression = {"mode": "expression", "expression": f"SEGMENT(F{f0} AND NOT F{f1})", "limit": 50}
    hits = [await client.post(f"/api/v1/sae-runs/{r['id']}/search", json=expression, headers=auth) for r in (a, b)]
    assert [h.status_code for h in hits] == [200, 200], hits[0].text
    assert hits[0].json()["total"] > 0
    assert [(i["position"], i["segment"]) for i in hits[0].json()["items"]] == \
        [(i["position"], i["segment"]) for i in hits[1].json()["items"]]


def test_cli_imports_segments(tmp_path, prisma_cli) -> None:  # noqa: ANN001
    """`prisma embeddings import DATASET FILE --segments S.npz`: stored, a document without segments gets
    its whole text and its own vector; a bad segments file exits 2 naming the field, nothing stored."""
    texts = [f"Visita {i} per tosse. Febbre alta da {i} giorni.\nSaturazione 97%" for i in range(N)]
    notes = tmp_path / "notes.csv"
    notes.write_text("id,text\n" + "".join(f'N{i},"{t}"\n' for i, t in enumerate(texts)))
    assert prisma_cli("datasets", "import", str(notes), "--id-column", "id").exit_code == 0
    doc, start, end = segment_spans(texts)
    keep = doc != 7  # document N7 has no segment in the file
    x, v = unit_vectors(), unit_vectors(len(doc), seed=2)
    docs, segs, bad = tmp_path / "v.npy", tmp_path / "s.npz", tmp_path / "bad.npz"
    docs.write_bytes(npy(x))
    segs.write_bytes(seg_npz(external_id=np.array([f"N{i}" for i in doc[keep]]), char_start=start[keep],
                             char_end=end[keep], vectors=v[keep]))
    bad.write_bytes(seg_npz(position=doc, char_start=start, char_end=end + 1000, vectors=v))
    refused = prisma_cli("embeddings", "import", "1", str(docs), "--segments", str(bad))
    assert refused.exit_code == 2 and "segments.char_end" in refused.output and "past the end" in refused.output
    assert not (tmp_path / "data/artifacts/embedding-runs").exists() or \
        not any((tmp_path / "data/artifacts/embedding-runs").rglob("*.np*"))
    done = prisma_cli("embeddings", "import", "1", str(docs), "--segments", str(segs))
    assert done.exit_code == 0, done.output
    assert "embedding run 1" in done.output and f"{keep.sum()} imported" in done.output
    assert "1 documents without any" in done.output
    (shard,) = (tmp_path / "data/artifacts/embedding-runs/1/segments").glob("shard-*.npz")
    with np.load(shard) as z:
        stored = {k: z[k] for k in z.files}
    assert stored["vectors"].dtype == np.float16 and stored["vectors"].shape == (keep.sum() + 1, D)
    assert stored["position"].tolist() == sorted([*doc[keep].tolist(), 7])  # N7 filled in its place
    (row,) = np.flatnonzero(stored["position"] == 7)
    assert (stored["char_start"][row], stored["char_end"][row]) == (0, len(texts[7]))
    np.testing.assert_allclose(stored["vectors"][row], x[7], atol=1e-3)
    mine = np.flatnonzero(stored["position"] == 3)
    np.testing.assert_allclose(stored["vectors"][mine], v[doc == 3], atol=1e-3)
