"""POST /api/v1/concepts/{id}/classify: a stored note sent as text gets the score the concept's apply job gave it
(an expression with SEGMENT(…), a probe, a probe scoped to the clauses naming its topic), on a real embedding run
with segments and a real SAE; bad input is a 4xx naming the field; a viewer may classify, and the call is
audited by count, never by text."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from sqlalchemy import select

from gateway.db import session_scope
from gateway.demo.corpus import generate_notes
from gateway.domain.auth.models import AuditEvent
from gateway.domain.concepts.apply import _scorer
from gateway.domain.concepts.scope import probe_codes, segment_scope
from gateway.domain.concepts.service import get_or_404, reads_context, run_data
from gateway.domain.runs.models import EmbeddingRun, SaeRun
from gateway.search.space import load_search_space
from tests.gateway.polling import wait_done
from tests.gateway.shared_runs import SMALL

pytestmark = pytest.mark.anyio
N_NOTES = 24
TOLERANCE = 1e-4
CHEST = ["asthma:confirmed", "asthma:excluded", "asthma:suspected", "bronchiolitis:confirmed", "bronchiolitis:excluded",
         "bronchiolitis:history", "bronchiolitis:suspected", "pneumonia:confirmed", "pneumonia:suspected"]
"""12 of the 24 notes mention one (a probe needs 10 of each class)."""
WORDS = ["bronchiolit", "polmonit", "asma"]


@pytest.fixture
def backend() -> str:
    """SQLite only: the run is embedded for real (the part that costs), and nothing here depends on the database."""
    return "sqlite"


async def segmented_run(client, auth, word_states: bool = False) -> tuple[int, list[str]]:  # noqa: ANN001
    """An SAE run (small, on two cores) over a real embedding run with segments of N_NOTES demo notes (with its words:
    each clause read by them): its id and the notes' texts by position."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text", "labels"])
    notes = list(generate_notes(n=N_NOTES, seed=3))
    for note in notes:
        w.writerow([note.id, note.text, "|".join(note.labels)])
    ds = await client.post("/api/v1/datasets", files={"file": ("n.csv", buf.getvalue().encode())}, headers=auth)
    # fp32: a note sent as text then gets its stored vector bit for bit whatever it is batched with; in bf16 on an
    # AMX CPU within about 1e-3 (oneDNN's kernel follows the row count), wider than TOLERANCE
    run = await client.post("/api/v1/embedding-runs", headers=auth,
                            json={"dataset_id": ds.json()["id"], "segments": True, "precision": "fp32",
                                  "word_states": word_states})
    emb = await wait_done(client, auth, f"/api/v1/embedding-runs/{run.json()['id']}", timeout=240)
    assert emb["status"] == "succeeded", emb
    # fp32 steps too: the same small SAE on every machine ('auto' trains in bf16 on a CPU with native bf16, another
    # SAE, on whose codes this 100-note probe may rest on its intercept alone)
    resp = await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"],
                                                       "config": {**SMALL, "precision": "fp32"}}, headers=auth)
    done = await wait_done(client, auth, f"/api/v1/sae-runs/{resp.json()[0]['id']}", timeout=240)
    assert done["status"] == "succeeded" and done["config"]["sae"]["document_codes"] == "max_over_segments", done
    return done["id"], [n.text for n in notes]


def apply_scores(app, concept_id: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """(mask, score) of every stored note, by the functions apply_concept calls (apply.py)."""
    state = app.state
    with session_scope(state.factory) as session:
        concept = get_or_404(session, concept_id)
        data = run_data(session, state.store, concept.sae_run_id)
        scorer, probe = _scorer(concept, data.space), concept.probe
    words = probe.get("segment_words") if probe else None
    codes = probe_codes(state.factory, data.dataset.id, data.space, segment_scope(data.space, words),
                        np.arange(data.space.n_docs), context=bool(probe) and reads_context(probe))
    return scorer.block(codes, 0)


async def applied_matches(client, auth, app, concept_id: int) -> dict[int, float]:  # noqa: ANN001
    """The apply job's stored matches: position -> score."""
    resp = await client.post(f"/api/v1/concepts/{concept_id}/apply", headers=auth)
    job = await wait_done(client, auth, f"/api/v1/jobs/{resp.json()['id']}", timeout=120)
    assert job["status"] == "succeeded", job
    with session_scope(app.state.factory) as session:
        uri = get_or_404(session, concept_id).applied["uri"]
    found = np.load(io.BytesIO(app.state.store.read_bytes(uri)))
    return dict(zip(found["positions"].tolist(), found["scores"].tolist()))


async def check_equal_to_apply(client, auth, app, concept_id: int, texts: list[str]) -> dict:  # noqa: ANN001
    resp = await client.post(f"/api/v1/concepts/{concept_id}/classify", headers=auth, json={"texts": texts})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    got = np.array([item["score"] for item in body["items"]])
    decided = np.array([item["decision"] for item in body["items"]])
    mask, score = apply_scores(app, concept_id)
    assert np.abs(got - score).max() <= TOLERANCE
    assert decided.tolist() == np.asarray(mask).tolist()
    matches = await applied_matches(client, auth, app, concept_id)
    assert matches  # compared on real matches
    assert sorted(matches) == np.flatnonzero(decided).tolist()
    assert all(abs(got[p] - s) <= TOLERANCE for p, s in matches.items())
    return body


async def check_encode_on_segments(client, auth, app, run_id: int, texts: list[str]) -> None:  # noqa: ANN001
    """POST /sae-runs/{id}/encode on the run with segments: each note's codes and each clause's are the stored ones."""
    resp = await client.post(f"/api/v1/sae-runs/{run_id}/encode", headers=auth, json={"texts": texts, "top": 256})
    assert resp.status_code == 200, resp.text
    with session_scope(app.state.factory) as session:
        space = load_search_space(session, app.state.store, session.get(SaeRun, run_id))
        codes, segments = space.codes.tocsr(), space.segment_codes()
    rows = segments.codes.tocsr()
    for i, item in enumerate(resp.json()["items"]):
        stored = dict(zip(codes[i].indices.tolist(), codes[i].data.tolist()))  # the max over its clauses: many
        assert item["n_active"] == len(stored) and len(item["features"]) == min(256, len(stored))
        assert all(abs(stored[f["index"]] - f["activation"]) <= TOLERANCE for f in item["features"])
        assert item["features"][-1]["activation"] >= sorted(stored.values())[-len(item["features"])] - TOLERANCE
        mine = np.flatnonzero(segments.doc == i)
        assert [(s["start"], s["end"]) for s in item["segments"]] == [tuple(segments.spans[r]) for r in mine]
        for s, r in zip(item["segments"], mine):
            got = {f["index"]: f["activation"] for f in s["features"]}
            assert sorted(got) == sorted(rows[r].indices.tolist())
            assert all(abs(got[int(f)] - a) <= TOLERANCE for f, a in zip(rows[r].indices, rows[r].data))


@pytest.mark.parametrize("word_states", [False, True])
async def test_a_stored_note_sent_as_text_gets_the_score_apply_gave_it(app, client, auth, word_states) -> None:  # noqa: ANN001
    run_id, texts = await segmented_run(client, auth, word_states)
    examples = {"labels": {"positive": CHEST}}
    made = {}
    for name, extra in (("expression", {"kind": "expression", "expression": "F0 > 0 OR SEGMENT(F1 AND NOT F2)"}),
                        ("probe", {"kind": "probe", "examples": examples}),
                        ("scoped", {"kind": "probe", "examples": examples, "segment_words": WORDS})):
        resp = await client.post("/api/v1/concepts", headers=auth, json={"sae_run_id": run_id, "name": name, **extra})
        assert resp.status_code == 201, resp.text
        made[name] = resp.json()["id"]

    expression = await check_equal_to_apply(client, auth, app, made["expression"], texts)
    assert expression["kind"] == "expression" and len(expression["concept_version"]) == 16
    with session_scope(app.state.factory) as session:
        emb = session.get(EmbeddingRun, session.get(SaeRun, run_id).embedding_run_id)
        assert expression["model"]["name"] == emb.model and expression["model"]["provenance"] == emb.result["model_provenance"]
    for item, text in zip(expression["items"], texts):
        assert item["threshold"] is None and all(e["index"] in (0, 1, 2) for e in item["evidence"])
        if item["segment"] is not None:  # the clause SEGMENT(…) matched on
            assert text[item["segment"]["start"]:item["segment"]["end"]].strip()

    probe = await check_equal_to_apply(client, auth, app, made["probe"], texts)
    assert probe["items"][0]["threshold"] == 0.5
    carried = [(item["decision"], e) for item in probe["items"] for e in item["evidence"]]
    assert {d for d, _ in carried} == {True, False}  # the evidence of a yes speaks for it, of a no against
    assert all((e["contribution"] > 0) == d and e["read_on"] == "note" and e["segment"] for d, e in carried)

    scoped = await check_equal_to_apply(client, auth, app, made["scoped"], texts)
    for item, text in zip(scoped["items"], texts):
        assert all(any(w in text[s["start"]:s["end"]].casefold() for w in WORDS) for s in item["scope"])
        for e in item["evidence"]:
            if e["read_on"] == "scope":  # fired on a clause that names the topic
                assert e["segment"] in item["scope"]

    await check_encode_on_segments(client, auth, app, run_id, texts)

    # audited as reads: who, which concept, how many texts; never a text
    with session_scope(app.state.factory) as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "concept.classify")).all()
        assert [e.details["count"] for e in events] == [N_NOTES] * 3
        assert {e.details["concept_id"] for e in events} == set(made.values()) and events[0].actor.startswith("tester")
        assert not any(text[:40] in str(e.details) for e in events for text in texts)

    # a run whose model is not the embedder's here: refused, naming the model
    with session_scope(app.state.factory) as session:
        emb = session.get(EmbeddingRun, session.get(SaeRun, run_id).embedding_run_id)
        emb.result = {**emb.result, "model_provenance": {**emb.result["model_provenance"], "package_version": "0.0"}}
    resp = await client.post(f"/api/v1/concepts/{made['probe']}/classify", headers=auth, json={"texts": texts[:1]})
    assert resp.status_code == 409 and resp.json()["field"] == "model", resp.text


@pytest.fixture
async def concepts(client, auth, labelled_run) -> dict[str, int]:  # noqa: ANN001
    """On the known codes' run (tests/concepts/conftest.py): an expression, and a probe to be labelled (no probe yet)."""
    made = {}
    for name, extra in (("expression", {"kind": "expression", "expression": "F0 > 0"}),
                        ("untrained", {"kind": "probe", "seed": {"expression": "F0 > 0"}})):
        resp = await client.post("/api/v1/concepts", headers=auth,
                                 json={"sae_run_id": labelled_run.run_id, "name": name, **extra})
        assert resp.status_code == 201, resp.text
        made[name] = resp.json()["id"]
    return made


@pytest.mark.parametrize(("texts", "status", "field"), [
    ([], 422, "body.texts"),
    (["a note"] * 257, 422, "body.texts"),
    (["one", "two", "three", " \n\t "], 422, "texts.3"),
    (["one", ""], 422, "texts.1"),
    (["one", "nul \x00 inside"], 422, "texts.1"),
    (["one", "two", "x" * 2001], 413, "texts.2"),
])
async def test_bad_texts_are_named(app, client, auth, concepts, texts, status, field) -> None:  # noqa: ANN001
    app.state.settings.max_document_bytes = 2000  # as an upload bounds a document
    resp = await client.post(f"/api/v1/concepts/{concepts['expression']}/classify", headers=auth, json={"texts": texts})
    assert resp.status_code == status, resp.text
    assert resp.json()["field"] == field, resp.text


async def test_a_probe_not_trained_yet_is_a_409(client, auth, concepts) -> None:  # noqa: ANN001
    resp = await client.post(f"/api/v1/concepts/{concepts['untrained']}/classify", headers=auth, json={"texts": ["x"]})
    assert resp.status_code == 409 and resp.json()["field"] == "concept_id", resp.text
    assert "no trained probe" in resp.json()["detail"]


async def test_a_run_of_imported_vectors_cannot_classify(app, client, auth, concepts, labelled_run) -> None:  # noqa: ANN001
    with session_scope(app.state.factory) as session:
        session.get(EmbeddingRun, session.get(SaeRun, labelled_run.run_id).embedding_run_id).pooling = "imported"
    resp = await client.post(f"/api/v1/concepts/{concepts['expression']}/classify", headers=auth, json={"texts": ["x"]})
    assert resp.status_code == 409 and resp.json()["field"] == "sae_run_id", resp.text
    assert "imported" in resp.json()["detail"]


async def test_an_unknown_concept_is_a_404(client, auth) -> None:  # noqa: ANN001
    resp = await client.post("/api/v1/concepts/999999/classify", headers=auth, json={"texts": ["x"]})
    assert resp.status_code == 404
