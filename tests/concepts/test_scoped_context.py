"""A scoped probe that also reads the whole note (`context`): chosen when the cross-validated F1 on the
training split is higher with the note's features beside the scope's, as on NegEx, where a list carries a
negation into a clause of its own ("non febbre, tosse": the cue is in the other clause).

Each note has two clauses, the second naming `tosse` (the scope word). Four kinds, one per i % 4:
  0 affirmed: "febbre presente," / "tosse presente."     scope: mention          note: mention, fever
  1 negated:  "febbre presente ma lieve," / "non tosse." scope: mention, cue    note: + fever, "ma"
  2 negated:  "non febbre," / "tosse."  (a list)         scope: mention          note: mention, cue, fever
  3 affirmed: "non febbre," / "ma tosse." (a contrast)   scope: mention, "ma"    note: mention, cue, fever, "ma"
On the scope alone kinds 0 and 2 have the same features; on the whole note kinds 1 and 3 do: neither
separates them alone, together they do (the cue on the note, against; "ma" in the scope, for)."""

from __future__ import annotations

import csv
import io
import re

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
N_DOCS, N_FEATURES = 240, 8  # F0 the mention, F1 a negation cue, F2 fever, F3 "ma", F4.. noise
MENTION, CUE, FEVER, CONTRAST = 0, 1, 2, 3
EXAMPLES = {"labels": {"positive": ["tosse:confirmed"], "negative": ["tosse:negated"]}}
CLAUSES = {0: ("febbre presente,", "tosse presente."), 1: ("febbre presente ma lieve,", "non tosse."),
           2: ("non febbre,", "tosse."), 3: ("non febbre,", "ma tosse.")}


def note(i: int) -> tuple[str, str, list[tuple[int, int]]]:
    first, second = CLAUSES[i % 4]
    first = f"Nota {i}: {first}"
    label = "tosse:negated" if i % 4 in (1, 2) else "tosse:confirmed"
    return f"{first} {second}", label, [(0, len(first)), (len(first) + 1, len(first) + 1 + len(second))]


def segment_codes(rng: np.random.Generator) -> np.ndarray:
    seg = np.zeros((2 * N_DOCS, N_FEATURES), dtype=np.float32)
    noise = rng.random((2 * N_DOCS, N_FEATURES - 4)) < 0.3
    seg[:, 4:] = np.where(noise, rng.uniform(0.1, 1, noise.shape), 0)
    strong = lambda: rng.uniform(0.8, 1.2)  # noqa: E731
    for i in range(N_DOCS):
        kind, a, b = i % 4, 2 * i, 2 * i + 1
        seg[a, FEVER], seg[b, MENTION] = strong(), strong()
        if kind == 1:
            seg[b, CUE], seg[a, CONTRAST] = strong(), strong()
        if kind in (2, 3):
            seg[a, CUE] = strong()
        if kind == 3:
            seg[b, CONTRAST] = strong()
    return seg


@pytest.fixture
async def list_run(app, client, auth):  # noqa: ANN001, ANN201
    clear_cache()
    notes = [note(i) for i in range(N_DOCS)]
    rows = "\n".join(f'N{i:04d},"{text}",{label}' for i, (text, label, _) in enumerate(notes))
    resp = await client.post("/api/v1/datasets", headers=auth,
                             files={"file": ("notes.csv", f"id,text,labels\n{rows}\n".encode())})
    assert resp.status_code == 201, resp.text
    seg = segment_codes(np.random.default_rng(0))
    run_id = write_run(app, resp.json()["id"], sp.csr_matrix(np.maximum(seg[0::2], seg[1::2])))
    spans = np.array([s for _, _, spans in notes for s in spans])
    with session_scope(app.state.factory) as session:
        write_segment_codes(app.state.store, session.get(SaeRun, run_id), seg, np.repeat(np.arange(N_DOCS), 2), spans)
    clear_cache()
    return run_id, resp.json()["id"]


async def test_a_scoped_probe_reads_the_whole_note_beside_its_clause_when_that_cross_validates_better(
        client, auth, list_run) -> None:  # noqa: ANN001
    run_id, _ = list_run
    body = {"sae_run_id": run_id, "kind": "probe", "examples": EXAMPLES}
    whole = (await client.post("/api/v1/concepts", headers=auth, json={**body, "name": "whole note"})).json()
    scoped = (await client.post("/api/v1/concepts", headers=auth,
                                json={**body, "name": "its clause", "segment_words": ["tosse"]})).json()
    assert whole["metrics"]["f1"] < 0.9  # the note alone cannot tell a list from a contrast
    p = scoped["probe"]
    assert p["context"] == "document" and scoped["metrics"]["f1"] == 1.0 and p["cv_f1"] == 1.0
    assert p["cv_labels"] == scoped["metrics"]["n_train"]  # few labels: the CV read every training label
    on_note = {w["index"]: w["weight"] for w in p["context_weights"]}
    in_scope = {w["index"]: w["weight"] for w in p["weights"]}
    assert on_note.get(CUE, 0) < 0 and in_scope.get(CONTRAST, 0) > 0  # the cue anywhere against; "ma" by it, for
    assert p["n_features"] == len(on_note) + len(in_scope)
    again = (await client.post(f"/api/v1/concepts/{scoped['id']}/evaluate", headers=auth, json={})).json()
    assert again["f1"] == 1.0  # re-scored on the same two reads
    other = await client.post(f"/api/v1/concepts/{scoped['id']}/evaluate", headers=auth,
                              json={"examples": {**EXAMPLES, "seed": 1}})  # another split: the notes it never saw
    assert other.status_code == 200, other.text
    assert other.json()["f1"] == 1.0 and other.json()["n_train"] == scoped["metrics"]["n_train"]

    page = (await client.get(f"/concepts/{scoped['id']}", headers=auth)).text
    assert "the whole note&#39;s own features" in page or "the whole note's own features" in page
    table = re.search(r'<table [^>]*id="weights".*?</table>', page, re.S).group(0)
    assert f'F{CUE}</a></td>\n        <td>the whole note</td>' in table
    assert f'F{CONTRAST}</a></td>\n        <td>its segments</td>' in table

    resp = await client.post(f"/api/v1/concepts/{scoped['id']}/apply", headers=auth)
    assert resp.status_code == 202, resp.text
    job = await wait_done(client, auth, f"/api/v1/jobs/{resp.json()['id']}", timeout=60)
    assert job["status"] == "succeeded", job
    export = await client.get(f"/api/v1/concepts/{scoped['id']}/export.csv", headers=auth)
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert sorted(int(r["external_id"][1:]) for r in rows) == [i for i in range(N_DOCS) if i % 4 in (0, 3)]
    features = [int(m.split()[0][1:]) for r in rows for m in r["matching_features"].split("; ") if m]
    assert features and all(0 <= f < N_FEATURES for f in features)  # a feature read on the note is still F0..F7


async def test_a_scoped_probe_keeps_its_clause_alone_when_the_note_adds_nothing(client, auth, list_run) -> None:  # noqa: ANN001
    """Only the mention-level kinds (0 and 1): the scope alone is perfect, the note's features cannot do better."""
    run_id, dataset_id = list_run
    positions = [i for i in range(N_DOCS) if i % 4 in (0, 1)]
    docs = (await client.get(f"/api/v1/datasets/{dataset_id}/documents?limit=500", headers=auth)).json()["items"]
    by_position = {d["position"]: d["id"] for d in docs}
    examples = {"documents": {"positive": [by_position[i] for i in positions if i % 4 == 0],
                              "negative": [by_position[i] for i in positions if i % 4 == 1]}}
    scoped = (await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": run_id, "kind": "probe", "examples": examples, "name": "mention", "segment_words": ["tosse"]}))
    assert scoped.status_code == 201, scoped.text
    p = scoped.json()["probe"]
    assert p["context"] is None and p["context_weights"] == [] and scoped.json()["metrics"]["f1"] == 1.0
