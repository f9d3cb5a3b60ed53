"""SAE runs through the gateway: train on an embedding run, features with statistics and
neighbours, families, a sweep in one request, and bad configs refused with the field named."""

from __future__ import annotations

import importlib
import re

import pytest

from gateway.demo.corpus import generate_notes
from services.cpu import cpu_has_native_bf16
from tests.gateway.polling import wait_done
from tests.gateway.shared_runs import N_NOTES, NOTES_SEED, SMALL, embedding_run  # noqa: F401 - fixture

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_sae_run_features_and_families(client, auth, embedding_run, monkeypatch) -> None:  # noqa: ANN001, F811
    resp = await client.post("/api/v1/sae-runs", json={"embedding_run_id": embedding_run["id"], "config": SMALL},
                             headers=auth)
    assert resp.status_code == 202, resp.text
    (run,) = resp.json()
    assert run["n_latents"] == 768 and run["k"] == 8
    done = await wait_done(client, auth, f"/api/v1/sae-runs/{run['id']}", timeout=240)
    assert done["status"] == "succeeded", done
    m = done["metrics"]
    assert 0 < m["fvu"] < 1 and abs(m["explained_variance"] - (1 - m["fvu"])) < 1e-6
    assert len(done["loss_curve"]) == 60 and done["loss_curve"][-1]["step"] == 60
    assert done["precision"] == ("bf16" if cpu_has_native_bf16() else "fp32")  # what 'auto' picks on this CPU
    # how much text it learned from: the 100 notes, too little for an SAE on real clinical text, and said so
    learned = done["training_text"]
    characters = sum(len(n.text) for n in generate_notes(n=N_NOTES, seed=NOTES_SEED))
    assert learned["documents"] == N_NOTES and learned["characters"] == characters and learned["enough"] is False
    assert f"{characters:,} characters" in learned["advice"] and f"{learned['enough_characters']:,}" in learned["advice"]
    listed = (await client.get(f"/api/v1/sae-runs?embedding_run_id={embedding_run['id']}", headers=auth)).json()
    assert listed["items"] and listed["items"][0]["training_text"] is None  # a list does not count characters
    run_page = (await client.get(f"/sae-runs/{run['id']}", headers=auth)).text
    assert 'id="too-little-text"' in run_page and f"{N_NOTES} documents, {characters:,} characters" in run_page
    assert f'<dd id="training-precision">{done["precision"]}</dd>' in run_page
    training_text_module = importlib.import_module("gateway.domain.runs.training_text")
    monkeypatch.setattr(training_text_module, "ENOUGH_CHARACTERS", characters)
    assert (await client.get(f"/api/v1/sae-runs/{run['id']}", headers=auth)).json()["training_text"]["enough"]
    assert 'id="too-little-text"' not in (await client.get(f"/sae-runs/{run['id']}", headers=auth)).text

    page = (await client.get(f"/api/v1/sae-runs/{run['id']}/features?sort=density&limit=10", headers=auth)).json()
    assert page["total"] == 768
    densities = [f["density"] for f in page["items"]]
    assert densities == sorted(densities, reverse=True) and densities[0] > 0
    top = page["items"][0]["index"]
    feat = (await client.get(f"/api/v1/sae-runs/{run['id']}/features/{top}", headers=auth)).json()
    assert sum(feat["histogram"]) == round(feat["density"] * N_NOTES)
    assert feat["cooccurring"] and all(n["index"] != top for n in feat["cooccurring"])
    assert feat["decoder_similar"] and -1 <= feat["decoder_similar"][0]["value"] <= 1

    out_of_range = await client.get(f"/api/v1/sae-runs/{run['id']}/features/768", headers=auth)
    assert out_of_range.status_code == 404 and "768" in out_of_range.json()["detail"]
    assert "0..767" in out_of_range.json()["detail"]

    # families come a page at a time (largest first within an iteration): the pages hold each family once
    base = f"/api/v1/sae-runs/{run['id']}/families"
    first = (await client.get(f"{base}?limit=7", headers=auth)).json()
    assert first["limit"] == 7 and len(first["items"]) == 7 and first["total"] > 7
    families = []
    while len(families) < first["total"]:
        page = (await client.get(f"{base}?limit=200&offset={len(families)}", headers=auth)).json()
        assert page["total"] == first["total"] and page["items"]
        families += page["items"]
    assert families[:7] == first["items"] and len({f["id"] for f in families}) == first["total"]
    order = [(f["iteration"], -f["size"]) for f in families]
    assert order == sorted(order)
    later = (await client.get(f"{base}?iteration=1&limit=200", headers=auth)).json()
    assert later["items"] == [f for f in families if f["iteration"] == 1][:200]
    assert later["total"] == sum(f["iteration"] == 1 for f in families)
    too_many = await client.get(f"{base}?limit=201", headers=auth)
    assert too_many.status_code == 422 and "limit" in too_many.text
    one = (await client.get(f"{base}/{families[3]['id']}", headers=auth)).json()
    assert one == families[3] and "label" in one
    missing = await client.get(f"{base}/999999", headers=auth)
    assert missing.status_code == 404 and "no family 999999" in missing.json()["detail"]
    for fam in families:
        assert fam["members"][0] == {"index": fam["root_index"], "parent_index": None, "depth": 0}
        assert fam["size"] == len(fam["members"])
        indices = {m["index"] for m in fam["members"]}
        assert all(m["parent_index"] in indices for m in fam["members"][1:])

    # the page opens the three largest families by themselves, unless one is too large to read at a glance
    largest = max((f for f in families if f["iteration"] == 0), key=lambda f: f["size"])
    assert largest["size"] > 2
    opened = re.compile(r'<li class="tree" id="family-(\d+)">\s*<details (open)?>')
    page_html = (await client.get(f"/sae-runs/{run['id']}/families", headers=auth)).text
    assert dict(opened.findall(page_html))[str(largest["id"])] == "open"
    assert "unnamed: its parent has no name" in page_html  # nothing is named yet: said, not left blank
    sae_pages = importlib.import_module("gateway.dashboard.sae_pages")  # the package's `sae_pages` is its router
    monkeypatch.setattr(sae_pages, "FAMILY_OPEN_MAX", largest["size"] - 1)
    page_html = (await client.get(f"/sae-runs/{run['id']}/families", headers=auth)).text
    assert dict(opened.findall(page_html))[str(largest["id"])] == ""
    page_html = (await client.get(f"/sae-runs/{run['id']}/families?family={largest['id']}", headers=auth)).text
    assert dict(opened.findall(page_html))[str(largest["id"])] == "open"  # asked for by a feature's link

    # A feature page lists FEATURE_PAGE_CHILDREN of its children in a family, then how many more and the family's link.
    root = largest["root_index"]
    children = [m["index"] for m in largest["members"] if m["parent_index"] == root]
    assert len(children) >= 2
    child_link = re.compile(r'<span class="muted small">child</span> <a href="/sae-runs/\d+/features/(\d+)"')

    def shown(html: str) -> list[int]:
        mini = html.split(f'family={largest["id"]}#family-{largest["id"]}">Family of F{root}', 1)[1].split("mini-family", 1)[0]
        return [int(i) for i in child_link.findall(mini)]

    page_html = (await client.get(f"/sae-runs/{run['id']}/features/{root}", headers=auth)).text
    assert shown(page_html) == children[:sae_pages.FEATURE_PAGE_CHILDREN]
    monkeypatch.setattr(sae_pages, "FEATURE_PAGE_CHILDREN", len(children) - 1)
    page_html = (await client.get(f"/sae-runs/{run['id']}/features/{root}", headers=auth)).text
    assert shown(page_html) == children[:-1]
    assert "and 1 more child:" in page_html


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # the features test covers PostgreSQL
async def test_sweep_is_one_request_and_bad_configs_name_the_field(client, auth, embedding_run) -> None:  # noqa: ANN001, F811
    emb = embedding_run["id"]
    too_many = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb, "config": {"expansion_factor": 1, "k": 385}},
                                 headers=auth)
    assert too_many.status_code == 422 and too_many.json()["field"] == "config.k"
    assert "385" in too_many.json()["detail"] and "384" in too_many.json()["detail"]
    k_zero = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb, "config": {"k": 0}}, headers=auth)
    assert k_zero.status_code == 422 and k_zero.json()["field"] == "body.config.k"
    expansion = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb, "config": {"expansion_factor": 0}},
                                  headers=auth)
    assert expansion.status_code == 422 and "expansion_factor" in expansion.json()["field"]
    no_segments = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb, "config": {"train_on": "segments"}},
                                    headers=auth)
    assert no_segments.status_code == 422 and no_segments.json()["field"] == "config.train_on"
    assert "segments" in no_segments.json()["detail"]
    missing = await client.post("/api/v1/sae-runs", json={"embedding_run_id": 999}, headers=auth)
    assert missing.status_code == 422 and missing.json()["field"] == "embedding_run_id"
    assert (await client.get("/api/v1/sae-runs", headers=auth)).json()["total"] == 0  # nothing started

    sweep = [{**SMALL, "k": 4, "max_steps": 20}, {**SMALL, "k": 16, "max_steps": 20}]
    resp = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb, "sweep": sweep}, headers=auth)
    assert resp.status_code == 202, resp.text
    runs = resp.json()
    assert [r["k"] for r in runs] == [4, 16] and runs[0]["sweep_id"] == runs[1]["sweep_id"] is not None
    done = [await wait_done(client, auth, f"/api/v1/sae-runs/{r['id']}", timeout=240) for r in runs]
    assert [d["status"] for d in done] == ["succeeded", "succeeded"]
    listed = (await client.get(f"/api/v1/sae-runs?sweep_id={runs[0]['sweep_id']}", headers=auth)).json()
    assert listed["total"] == 2
    # More active latents reconstruct better: the sweep's comparison a user would look at.
    assert done[1]["metrics"]["fvu"] < done[0]["metrics"]["fvu"]
    # The run page's sweep table, as it polls itself: both runs with their FVU, and no more polling once both ended.
    table = await client.get(f"/sae-runs/{runs[1]['id']}/sweep", headers=auth)
    assert table.status_code == 200 and table.text.count("status-succeeded") == 2
    assert f"{done[0]['metrics']['fvu']:.3f}" in table.text and "hx-get" not in table.text
    alone = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb, "config": {**SMALL, "max_steps": 1}},
                               headers=auth)).json()[0]
    assert (await client.get(f"/sae-runs/{alone['id']}/sweep", headers=auth)).status_code == 404
    assert (await wait_done(client, auth, f"/api/v1/sae-runs/{alone['id']}", timeout=240))["status"] == "succeeded"
    # the list is a page, newest first, its total every run's
    newest = (await client.get("/api/v1/sae-runs?limit=2", headers=auth)).json()
    assert [r["id"] for r in newest["items"]] == [alone["id"], runs[1]["id"]] and newest["total"] == 3
    rest = (await client.get("/api/v1/sae-runs?limit=2&offset=2", headers=auth)).json()
    assert [r["id"] for r in rest["items"]] == [runs[0]["id"]] and rest["total"] == 3
    assert (await client.get("/api/v1/sae-runs?limit=501", headers=auth)).status_code == 422


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_segments_from_embedding_run_to_pooled_codes(client, auth) -> None:  # noqa: ANN001
    """An embedding run with `segments`, an SAE trained on them whose document codes are the max
    over each note's segments: the artifacts are catalogued and the features are the documents'."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text", "labels"])
    for note in generate_notes(n=24, seed=3):
        w.writerow([note.id, note.text, "|".join(note.labels)])
    ds = await client.post("/api/v1/datasets", files={"file": ("n.csv", buf.getvalue().encode())}, headers=auth)
    run = await client.post("/api/v1/embedding-runs", headers=auth,
                            json={"dataset_id": ds.json()["id"], "segments": True, "word_states": True})
    emb = await wait_done(client, auth, f"/api/v1/embedding-runs/{run.json()['id']}", timeout=240)
    assert emb["status"] == "succeeded", emb
    # Nothing said about segments: the SAE follows the run ('auto'), trained on its segments and documents,
    # a document's codes the max over its segments; the stored config says so.
    resp = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": SMALL}, headers=auth)
    assert resp.status_code == 202, resp.text
    assert resp.json()[0]["config"]["sae"]["train_on"] == "segments_and_documents"
    assert resp.json()[0]["config"]["sae"]["document_codes"] == "max_over_segments"
    done = await wait_done(client, auth, f"/api/v1/sae-runs/{resp.json()[0]['id']}", timeout=240)
    assert done["status"] == "succeeded", done
    page = (await client.get(f"/api/v1/sae-runs/{done['id']}/features?sort=density&limit=1", headers=auth)).json()
    assert 0 < page["items"][0]["density"] <= 1  # a share of the 24 documents, not of the segments
    # The run kept its words (word_states): the SAE read each clause by its words, and says so.
    assert emb["spec"]["word_states"] is True and done["segment_words"] > emb["result"]["n_segments"]
    shown = (await client.get(f"/sae-runs/{done['id']}", headers=auth)).text
    assert f"{done['segment_words']:,} words, each read in its note" in shown

    # Text search on a run with segments ranks each note by its own vector and its nearest clause, and
    # shows that clause: a clause found in one note only finds that note first, with that very clause.
    from services.embedder.segments import split_segments

    texts = [n.text for n in generate_notes(n=24, seed=3)]
    clauses = [(len(texts[i][a:b]), i, a, b) for i in range(len(texts)) for a, b in split_segments(texts[i])
               if sum(t.count(texts[i][a:b]) for t in texts) == 1]
    _, target, start, end = max(clauses)
    found = await client.post(f"/api/v1/sae-runs/{done['id']}/search", headers=auth,
                              json={"mode": "text", "text": texts[target][start:end], "limit": 3})
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["ranked_by"] == "documents and segments" and body["total"] == 24
    first = body["items"][0]
    assert first["position"] == target and first["segment"]["start"] == start and first["segment"]["end"] == end
    assert 0.5 < first["score"] <= 1.0  # the mean of the note's cosine and the clause's own (1.0)

    # Named on the notes' sentences: the evidence a name was made and scored on is of segments (rows
    # beyond the 24 notes), and every densest feature gets a name.
    wanted = [f["index"] for f in (await client.get(f"/api/v1/sae-runs/{done['id']}/features?sort=density&limit=6",
                                                    headers=auth)).json()["items"]]
    job = await client.post(f"/api/v1/sae-runs/{done['id']}/interpretations",
                            json={"backends": [{"backend": "keywords"}], "features": wanted}, headers=auth)
    assert job.status_code == 202, job.text
    named = await wait_done(client, auth, f"/api/v1/jobs/{job.json()['id']}", timeout=240)
    assert named["status"] == "succeeded" and named["result"]["n_named"] >= 1, named
    rows: list[int] = []
    for index in wanted:
        shown = (await client.get(f"/api/v1/sae-runs/{done['id']}/features/{index}/interpretations",
                                  headers=auth)).json()
        if shown:
            ev = shown[0]["evidence"]
            rows += ev["activating"] + ev["random_negatives"] + ev["holdout_activating"] + ev["holdout_non_activating"]
    assert max(rows) >= 24, rows  # 24 notes, about 18 sentences each

    # An SAE on the same run's document vectors alone (no segment codes), asked for, is named on documents.
    alone = {**SMALL, "train_on": "documents", "document_codes": "document_vector"}
    (plain,) = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": alone},
                                  headers=auth)).json()
    plain = await wait_done(client, auth, f"/api/v1/sae-runs/{plain['id']}", timeout=240)
    assert plain["status"] == "succeeded" and plain["segment_words"] == 0, plain
    job = await client.post(f"/api/v1/sae-runs/{plain['id']}/interpretations",
                            json={"backends": [{"backend": "keywords"}], "features": wanted[:2]}, headers=auth)
    named = await wait_done(client, auth, f"/api/v1/jobs/{job.json()['id']}", timeout=240)
    assert named["status"] == "succeeded", named


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_word_segments_from_embedding_run_to_named_features(client, auth) -> None:  # noqa: ANN001
    """`segment_unit: word`: every word of a note read in its note is a segment; the SAE trains on them and reads a
    note as the max over its words; the note's page lists its words with their features; text search ranks notes
    by their own vectors (a word's state is not comparable with a query's); features are named on words."""
    import csv
    import io

    notes = list(generate_notes(n=12, seed=5))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text"])
    w.writerows([n.id, n.text] for n in notes)
    ds = (await client.post("/api/v1/datasets", files={"file": ("n.csv", buf.getvalue().encode())},
                            headers=auth)).json()
    body = {"dataset_id": ds["id"], "segments": True, "segment_unit": "word"}
    refused = await client.post("/api/v1/embedding-runs", json={**body, "document_vectors": "segments"}, headers=auth)
    assert refused.status_code == 422 and refused.json()["field"] == "body.document_vectors", refused.text
    assert "segment_unit 'word'" in refused.json()["message"]
    run = await client.post("/api/v1/embedding-runs", json=body, headers=auth)
    emb = await wait_done(client, auth, f"/api/v1/embedding-runs/{run.json()['id']}", timeout=240)
    assert emb["status"] == "succeeded", emb
    words = sum(len(n.text.split()) for n in notes)
    assert emb["result"]["segment_unit"] == "word" and emb["result"]["n_segments"] == words

    resp = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": SMALL}, headers=auth)
    assert resp.json()[0]["config"]["sae"]["document_codes"] == "max_over_segments", resp.text
    done = await wait_done(client, auth, f"/api/v1/sae-runs/{resp.json()[0]['id']}", timeout=240)
    assert done["status"] == "succeeded", done
    doc_id = (await client.get(f"/api/v1/datasets/{ds['id']}/documents?limit=1", headers=auth)).json()["items"][0]["id"]
    page = (await client.get(f"/api/v1/sae-runs/{done['id']}/documents/{doc_id}?segment_limit=1000",
                             headers=auth)).json()
    assert [page["text"][s["start"]:s["end"]] for s in page["segments"]] == page["text"].split()
    strongest = {f["index"]: f["activation"] for f in page["features"]}
    for s in page["segments"]:
        for f in s["features"]:  # a note's activation is the max over its words'
            assert f["index"] not in strongest or f["activation"] <= strongest[f["index"]] + 1e-4

    found = await client.post(f"/api/v1/sae-runs/{done['id']}/search", headers=auth,
                              json={"mode": "text", "text": notes[3].text, "limit": 3})
    assert found.status_code == 200, found.text
    assert found.json()["ranked_by"] == "documents" and found.json()["items"][0]["position"] == 3

    wanted = [f["index"] for f in (await client.get(f"/api/v1/sae-runs/{done['id']}/features?sort=density&limit=3",
                                                    headers=auth)).json()["items"]]
    job = await client.post(f"/api/v1/sae-runs/{done['id']}/interpretations",
                            json={"backends": [{"backend": "keywords"}], "features": wanted}, headers=auth)
    named = await wait_done(client, auth, f"/api/v1/jobs/{job.json()['id']}", timeout=240)
    assert named["status"] == "succeeded" and named["result"]["n_named"] >= 1, named
