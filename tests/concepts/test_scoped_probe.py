"""A probe scoped to the segments that name the topic (`segment_words`): each note has a
bronchiolitis clause and a clause about another condition, in either order, and the hedge can sit
in either. Over the whole note (max over both clauses) confirmed and suspected notes have the same
features, and the same words: each note says `confermata` once and `sospetta` once, which status
belongs to bronchiolitis is an interaction of the clause order and the status before `inoltre`
that a linear model on TF-IDF cannot read. Over the clause that names bronchiolitis the hedge
feature, and the status word, tell them apart."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import train_test_split

from gateway.db import session_scope
from gateway.domain.auth.service import Principal
from gateway.domain.concepts.demo import (EXPRESSION_NAME, LABELLING_NAME, PROBE_NAME, SCOPE_WORDS, SCOPED_NAME,
                                          create_demo_concepts)
from gateway.domain.runs.models import SaeRun
from gateway.search.space import clear_cache
from tests.concepts.conftest import tuned_tfidf_predictions, write_run
from tests.concepts.test_baselines import assert_figures, scores
from tests.factories import write_segment_codes
from tests.gateway.polling import wait_done

pytestmark = pytest.mark.anyio
N_DOCS, N_FEATURES = 200, 8  # F0 bronchiolitis mention, F1 hedge, F2 other condition, F3.. noise
EXAMPLES = {"labels": {"positive": ["bronchiolitis:confirmed"], "negative": ["bronchiolitis:suspected"]}}


def note(i: int) -> tuple[str, str, list[tuple[int, int]], int]:
    """(text, label, clause spans, which clause names bronchiolitis): even notes confirm
    bronchiolitis and hedge the otitis, odd ones the other way round; notes 0, 1 (mod 4) name
    bronchiolitis first, 2, 3 second."""
    confirmed, topic = i % 2 == 0, 0 if i % 4 < 2 else 1
    status = {"bronchiolite": "confermata" if confirmed else "sospetta",
              "otite": "sospetta" if confirmed else "confermata"}
    order = ["bronchiolite", "otite"] if topic == 0 else ["otite", "bronchiolite"]
    first = f"Nota {i}: {order[0]} secondo il medico {status[order[0]]};"
    second = f" inoltre {order[1]} secondo il medico {status[order[1]]}."
    label = "bronchiolitis:confirmed" if confirmed else "bronchiolitis:suspected"
    return first + second, label, [(0, len(first)), (len(first) + 1, len(first) + len(second))], topic


def segment_codes(rng: np.random.Generator, notes: list[tuple[str, str, list[tuple[int, int]], int]]) -> np.ndarray:
    seg = np.zeros((2 * N_DOCS, N_FEATURES), dtype=np.float32)
    seg[:, 3:] = np.where(rng.random((2 * N_DOCS, N_FEATURES - 3)) < 0.3, rng.uniform(0.1, 1, (2 * N_DOCS, N_FEATURES - 3)), 0)
    for i, (_, _, _, topic) in enumerate(notes):
        seg[2 * i + topic, 0] = rng.uniform(0.5, 1.5)  # the bronchiolitis clause
        seg[2 * i + 1 - topic, 2] = rng.uniform(0.5, 1.5)  # the otitis clause
        hedged = 1 - topic if i % 2 == 0 else topic  # the otitis clause (confirmed), the bronchiolitis one (suspected)
        seg[2 * i + hedged, 1] = rng.uniform(0.5, 1.5)
    return seg


@pytest.fixture
async def scoped_run(app, client, auth):  # noqa: ANN001, ANN201
    clear_cache()
    notes = [note(i) for i in range(N_DOCS)]
    rows = "\n".join(f'N{i:04d},"{text}",{label}' for i, (text, label, _, _) in enumerate(notes))
    resp = await client.post("/api/v1/datasets", headers=auth,
                             files={"file": ("notes.csv", f"id,text,labels\n{rows}\n".encode())})
    assert resp.status_code == 201, resp.text
    seg = segment_codes(np.random.default_rng(0), notes)
    docs = np.maximum(seg[0::2], seg[1::2])  # the run's document codes: the max over the two clauses
    run_id = write_run(app, resp.json()["id"], sp.csr_matrix(docs))
    spans = np.array([s for _, _, spans, _ in notes for s in spans])
    with session_scope(app.state.factory) as session:
        write_segment_codes(app.state.store, session.get(SaeRun, run_id), seg, np.repeat(np.arange(N_DOCS), 2), spans)
    clear_cache()
    return run_id


async def test_the_scoped_probe_reads_the_status_of_the_topic_s_own_clause(client, auth, scoped_run) -> None:  # noqa: ANN001
    body = {"sae_run_id": scoped_run, "kind": "probe", "examples": EXAMPLES}
    whole = await client.post("/api/v1/concepts", headers=auth, json={**body, "name": "whole note"})
    scoped = await client.post("/api/v1/concepts", headers=auth,
                               json={**body, "name": "its clause", "segment_words": ["Bronchiolit"]})
    assert whole.status_code == scoped.status_code == 201, (whole.text, scoped.text)
    w, s = whole.json(), scoped.json()
    assert s["probe"]["segment_words"] == ["Bronchiolit"] and w["probe"]["segment_words"] is None
    # over the whole note both classes carry F0, F1 and F2: no better than a coin
    assert w["metrics"]["f1"] < 0.8
    assert s["metrics"]["f1"] == 1.0
    assert s["probe"]["weights"][0]["index"] == 1 and s["probe"]["weights"][0]["weight"] < 0  # the hedge, against
    again = (await client.post(f"/api/v1/concepts/{s['id']}/evaluate", headers=auth, json={})).json()
    assert again["f1"] == 1.0  # re-scored on the same scope

    resp = await client.post(f"/api/v1/concepts/{s['id']}/apply", headers=auth)
    assert resp.status_code == 202, resp.text
    job = await wait_done(client, auth, f"/api/v1/jobs/{resp.json()['id']}", timeout=60)
    assert job["status"] == "succeeded", job
    export = await client.get(f"/api/v1/concepts/{s['id']}/export.csv", headers=auth)
    matched = sorted(int(line.split(",")[1][1:]) for line in export.text.splitlines()[1:])
    assert matched == list(range(0, N_DOCS, 2))  # every confirmed note, no suspected one


def tfidf_on(texts: list[str]) -> dict[str, float]:
    """Precision, recall and F1 of TF-IDF + LR fitted on these texts (by position) on the concept's
    split: every note labelled, 25 % held out, seed 0."""
    y = np.array([i % 2 == 0 for i in range(N_DOCS)], dtype=np.int64)
    train, test = (np.sort(part) for part in train_test_split(np.arange(N_DOCS), test_size=0.25, random_state=0,
                                                              stratify=y))
    predicted, _ = tuned_tfidf_predictions([texts[p] for p in train], y[train], [texts[p] for p in test])
    return scores(y[test], predicted)


async def test_the_scoped_probe_is_compared_with_tfidf_on_its_clauses(client, auth, scoped_run) -> None:  # noqa: ANN001
    body = {"sae_run_id": scoped_run, "kind": "probe", "examples": EXAMPLES}
    whole = (await client.post("/api/v1/concepts", headers=auth, json={**body, "name": "whole note"})).json()
    scoped = (await client.post("/api/v1/concepts", headers=auth,
                                json={**body, "name": "its clause", "segment_words": ["Bronchiolit"]})).json()
    notes = [note(i) for i in range(N_DOCS)]
    b = scoped["baselines"]
    assert whole["baselines"]["tfidf_lr_segments"] is None  # no scope, no third baseline
    # the same TF-IDF on the clause that names bronchiolitis, and on nothing else
    segments = b["tfidf_lr_segments"]
    assert segments["segment_words"] == ["Bronchiolit"] and segments["n_train"] == scoped["metrics"]["n_train"]
    assert_figures(segments, tfidf_on([text[slice(*spans[topic])] for text, _, spans, topic in notes]))
    assert segments["f1"] == 1.0 and b["tfidf_lr"]["f1"] < 0.8  # the clause's status word reads; the note's do not
    assert_figures(b["tfidf_lr"], tfidf_on([text for text, _, _, _ in notes]))
    again = (await client.post(f"/api/v1/concepts/{scoped['id']}/evaluate", headers=auth, json={})).json()
    assert again["baselines"] == b  # re-evaluation on its own split recomputes the same three

    page = (await client.get(f"/concepts/{scoped['id']}", headers=auth)).text
    table = re.search(r'<table [^>]*id="baselines".*?</table>', page, re.S).group(0)
    row = re.search(r'<tr id="baseline-segments">.*?</tr>', table, re.S).group(0)
    assert "TF-IDF + LR on the same segments" in row and "<code>Bronchiolit</code>" in row
    assert f'<td class="num">{segments["f1"]:.3f}</td>' in row
    assert f'<td class="num">{b["tfidf_lr"]["f1"]:.3f}</td>' in table
    assert 'id="baseline-segments"' not in (await client.get(f"/concepts/{whole['id']}", headers=auth)).text


async def test_a_scoped_probe_matches_each_labelled_note_s_segments_once(client, auth, scoped_run,  # noqa: ANN001
                                                                       monkeypatch) -> None:  # noqa: ANN001
    """Creation and re-evaluation each find the matching clauses once, for the probe's codes and
    the TF-IDF-on-segments baseline together (they used to match them twice); the figures are those
    of matching them separately (the test above)."""
    from gateway.domain.concepts import scope

    matched: list[int] = []
    original = scope.matching_segments

    def counting(texts, owner, spans, words):  # noqa: ANN001, ANN202
        matched.append(len(texts))
        return original(texts, owner, spans, words)

    monkeypatch.setattr(scope, "matching_segments", counting)
    body = {"sae_run_id": scoped_run, "kind": "probe", "examples": EXAMPLES, "name": "its clause",
            "segment_words": ["Bronchiolit"]}
    created = (await client.post("/api/v1/concepts", headers=auth, json=body)).json()
    assert sum(matched) == N_DOCS, matched  # every note is labelled: each note's text matched once
    assert created["metrics"]["f1"] == 1.0 and created["baselines"]["tfidf_lr_segments"]["f1"] == 1.0
    matched.clear()
    again = (await client.post(f"/api/v1/concepts/{created['id']}/evaluate", headers=auth, json={})).json()
    assert sum(matched) == N_DOCS, matched
    assert again["baselines"] == created["baselines"] and again["f1"] == 1.0


async def test_the_demo_s_scoped_probe_carries_its_words_baseline(app, client, auth, scoped_run) -> None:  # noqa: ANN001
    ids = await create_demo_concepts(app.state, scoped_run, Principal(None, "demo"))
    concepts = [(await client.get(f"/api/v1/concepts/{i}", headers=auth)).json() for i in ids]
    by_name = {c["name"]: c for c in concepts}
    assert set(by_name) == {PROBE_NAME, EXPRESSION_NAME, SCOPED_NAME, LABELLING_NAME}  # segment codes: all four
    segments = by_name[SCOPED_NAME]["baselines"]["tfidf_lr_segments"]
    assert segments["segment_words"] == SCOPE_WORDS and segments["f1"] == 1.0  # the clause says its status
    assert all(by_name[n]["baselines"]["tfidf_lr_segments"] is None for n in (PROBE_NAME, EXPRESSION_NAME))
    assert by_name[LABELLING_NAME]["labelling"]["segment_words"] == SCOPE_WORDS  # labelled on the same clauses
    # written from the label search, within one clause: the topic's clause without its hedge
    expression = by_name[EXPRESSION_NAME]
    assert expression["expression"] == 'SEGMENT((label:"bronchiolite") AND NOT (label:"sospetto"))'
    assert expression["metrics"]["f1"] == 1.0


async def test_segment_words_are_refused_where_they_cannot_apply(client, auth, labelled_run, scoped_run) -> None:  # noqa: ANN001
    no_segments = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": labelled_run.run_id, "name": "p", "kind": "probe", "segment_words": ["bronchiolit"],
        "examples": {"labels": {"positive": ["bronchiolitis:confirmed"], "negative": ["bronchiolitis:suspected"]}}})
    assert no_segments.status_code == 422 and "segment_words" in no_segments.text and "segment codes" in no_segments.text
    expression = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": scoped_run, "name": "e", "kind": "expression", "expression": "F0", "segment_words": ["x1"]})
    assert expression.status_code == 422 and "segment_words" in expression.text
    for words in ([], ["a" * 61], [f"w{i}" for i in range(21)], ["x"]):
        bad = await client.post("/api/v1/concepts", headers=auth, json={
            "sae_run_id": scoped_run, "name": "b", "kind": "probe", "examples": EXAMPLES, "segment_words": words})
        assert bad.status_code == 422 and "segment_words" in bad.text, words


async def test_a_concept_labelled_note_by_note_reads_its_words_clauses(client, auth, scoped_run) -> None:  # noqa: ANN001
    """Made with segment words and no examples: the probe trained on its labels reads the clause that names the
    topic (the hedge there decides), and the queue reads the same clauses for its uncertain notes."""
    made = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": scoped_run, "name": "labelled by clause", "kind": "probe", "segment_words": ["Bronchiolit"],
        "seed": {"expression": "F0 > 0"}})
    assert made.status_code == 201, made.text
    concept = made.json()
    assert concept["labelling"]["segment_words"] == ["Bronchiolit"] and concept["probe"] is None
    docs = (await client.get("/api/v1/datasets", headers=auth)).json()["items"][0]
    listed = (await client.get(f"/api/v1/datasets/{docs['id']}/documents?limit=500", headers=auth)).json()["items"]
    for doc in listed[:40]:  # even notes confirm bronchiolitis, odd ones suspect it
        label = "positive" if doc["position"] % 2 == 0 else "negative"
        put = await client.put(f"/api/v1/concepts/{concept['id']}/labels/{doc['id']}", headers=auth,
                               json={"label": label})
        assert put.status_code == 200, put.text
    trained = (await client.post(f"/api/v1/concepts/{concept['id']}/retrain", headers=auth)).json()
    assert trained["segment_words"] == ["Bronchiolit"] and trained["estimate"]["f1"] == 1.0
    shown = (await client.get(f"/api/v1/concepts/{concept['id']}", headers=auth)).json()
    assert shown["probe"]["segment_words"] == ["Bronchiolit"]
    hedge = [w for w in shown["probe"]["weights"] if w["index"] == 1]
    assert hedge and hedge[0]["weight"] < 0  # the hedge in the topic's own clause speaks against
    batch = (await client.post(f"/api/v1/concepts/{concept['id']}/queue", headers=auth, json={"n": 10})).json()
    assert batch["phase"] == "probe" and all(i["position"] >= 40 for i in batch["items"])
    resp = await client.post(f"/api/v1/concepts/{concept['id']}/apply", headers=auth)
    job = await wait_done(client, auth, f"/api/v1/jobs/{resp.json()['id']}", timeout=60)
    assert job["status"] == "succeeded", job
    export = await client.get(f"/api/v1/concepts/{concept['id']}/export.csv", headers=auth)
    matched = sorted(int(line.split(",")[1][1:]) for line in export.text.splitlines()[1:])
    wrong = set(matched) ^ set(range(0, N_DOCS, 2))
    assert len(wrong) <= 2, wrong  # from 40 labels: the confirmed notes, at most a borderline one or two apart
