"""A probe scoped to the segments that name the topic (`segment_words`): each note has a
bronchiolitis clause and a clause about another condition, and the hedge can sit in either. Over
the whole note (max over both clauses) confirmed and suspected notes have the same features; over
the clause that names bronchiolitis, the hedge feature tells them apart."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.db import session_scope
from gateway.domain.runs.models import SaeRun
from gateway.search.space import clear_cache
from tests.concepts.conftest import write_run
from tests.factories import write_segment_codes
from tests.gateway.polling import wait_done

pytestmark = pytest.mark.anyio
N_DOCS, N_FEATURES = 200, 8  # F0 bronchiolitis mention, F1 hedge, F2 other condition, F3.. noise
EXAMPLES = {"labels": {"positive": ["bronchiolitis:confirmed"], "negative": ["bronchiolitis:suspected"]}}


def note(i: int) -> tuple[str, str, list[tuple[int, int]]]:
    """(text, label, clause spans): even notes confirm bronchiolitis and hedge the otitis, odd ones
    the other way round."""
    confirmed = i % 2 == 0
    first = f"Nota {i}: bronchiolite confermata," if confirmed else f"Nota {i}: sospetta bronchiolite,"
    second = " sospetta otite." if confirmed else " otite confermata."
    label = "bronchiolitis:confirmed" if confirmed else "bronchiolitis:suspected"
    return first + second, label, [(0, len(first)), (len(first) + 1, len(first) + len(second))]


def segment_codes(rng: np.random.Generator) -> np.ndarray:
    seg = np.zeros((2 * N_DOCS, N_FEATURES), dtype=np.float32)
    seg[:, 3:] = np.where(rng.random((2 * N_DOCS, N_FEATURES - 3)) < 0.3, rng.uniform(0.1, 1, (2 * N_DOCS, N_FEATURES - 3)), 0)
    for i in range(N_DOCS):
        seg[2 * i, 0] = rng.uniform(0.5, 1.5)  # the bronchiolitis clause
        seg[2 * i + 1, 2] = rng.uniform(0.5, 1.5)  # the otitis clause
        seg[2 * i + (1 if i % 2 == 0 else 0), 1] = rng.uniform(0.5, 1.5)  # the hedge: otitis (even), bronchiolitis (odd)
    return seg


@pytest.fixture
async def scoped_run(app, client, auth):  # noqa: ANN001, ANN201
    clear_cache()
    notes = [note(i) for i in range(N_DOCS)]
    rows = "\n".join(f'N{i:04d},"{text}",{label}' for i, (text, label, _) in enumerate(notes))
    resp = await client.post("/api/v1/datasets", headers=auth,
                             files={"file": ("notes.csv", f"id,text,labels\n{rows}\n".encode())})
    assert resp.status_code == 201, resp.text
    seg = segment_codes(np.random.default_rng(0))
    docs = np.maximum(seg[0::2], seg[1::2])  # the run's document codes: the max over the two clauses
    run_id = write_run(app, resp.json()["id"], sp.csr_matrix(docs))
    spans = np.array([s for _, _, spans in notes for s in spans])
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
