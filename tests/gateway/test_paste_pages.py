"""Paste a note, on an SAE run's page (its features, clause by clause) and on a concept's page (its decision and the
features that carried it): a real segmented run of demo notes; what the fragment shows is what the API answers for
the same text, the pasted text is escaped, bad input says why, a viewer of the project may paste (a read, audited as
the API's call), and a member of another project gets the API's 404. Each marked clause has a panel of its own
features, the API's for that clause."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from markupsafe import escape
from sqlalchemy import select

from gateway.db import session_scope
from gateway.domain.auth import accounts
from gateway.domain.auth.models import AuditEvent
from gateway.domain.datasets.models import Dataset
from gateway.domain.runs.models import EmbeddingRun, SaeRun
from tests.concepts.test_classify import CHEST, segmented_run
from tests.factories import add_coded_sae_run
from tests.gateway.test_encode import upload
from tests.gateway.test_label_pages import as_role  # noqa: F401 - fixture

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
NASTY = '<script>alert("x")</script> Bronchiolite confermata, saturazione 93%. <b>Sospetta</b> otite.'


@pytest.fixture
def backend() -> str:
    """SQLite only: the run is embedded for real (the part that costs); the pages do not depend on the database."""
    return "sqlite"


def dataset_of(app, run_id: int) -> int:  # noqa: ANN001
    with session_scope(app.state.factory) as session:
        return session.get(EmbeddingRun, session.get(SaeRun, run_id).embedding_run_id).dataset_id


def marked(html: str) -> list[str]:
    return re.findall(r'<mark class="drive paste-clause"[^>]*>([^<]*)</mark>', html)


def table(html: str, id_: str) -> str:
    """The element with this id, up to its table's end (the note's features, or one clause's panel)."""
    return html[html.index(f'id="{id_}"'):].split("</table>", 1)[0]


def linked(html: str) -> list[str]:
    return re.findall(r'<a href="/sae-runs/\d+/features/(\d+)">F\d+</a>', html)


async def test_paste_a_note_on_the_run_and_on_a_concept(app, client, auth, as_role) -> None:  # noqa: ANN001, F811
    run_id, texts = await segmented_run(client, auth)
    viewer, token = await as_role("viewer", dataset_of(app, run_id))
    csrf = {"X-CSRF-Token": token}

    page = (await viewer.get(f"/sae-runs/{run_id}")).text
    assert 'hx-post="/sae-runs/%d/paste"' % run_id in page and 'id="paste-result"' in page
    read = await viewer.post(f"/sae-runs/{run_id}/paste", headers=csrf, data={"text": NASTY})
    assert read.status_code == 200, read.text
    assert "<script>alert" not in read.text and "<b>Sospetta" not in read.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in read.text
    api = (await client.post(f"/api/v1/sae-runs/{run_id}/encode", headers=auth,
                             json={"texts": [NASTY], "top": 10})).json()["items"][0]
    fired = [s for s in api["segments"] if s["features"]]
    assert marked(read.text) == [str(escape(NASTY[f["start"]:f["end"]])) for f in fired]  # the API's clauses, as text
    assert linked(table(read.text, "paste-features")) == [str(f["index"]) for f in api["features"]]
    for n, segment in enumerate(fired):  # each marked clause's panel: that clause's own features
        assert linked(table(read.text, f"paste-clause-{n}")) == [str(f["index"]) for f in segment["features"]]

    empty = await viewer.post(f"/sae-runs/{run_id}/paste", headers=csrf, data={"text": "   "})
    assert empty.status_code == 422 and "empty or only white space" in empty.text and "texts.0" not in empty.text
    forged = await viewer.post(f"/sae-runs/{run_id}/paste", data={"text": "tosse"})
    assert forged.status_code == 403  # no CSRF token

    concept = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": run_id, "name": "bronchiolitis", "kind": "probe",
        "examples": {"labels": {"positive": CHEST}}})
    assert concept.status_code == 201, concept.text
    concept_id = concept.json()["id"]
    assert 'hx-post="/concepts/%d/try"' % concept_id in (await viewer.get(f"/concepts/{concept_id}")).text
    decided = await viewer.post(f"/concepts/{concept_id}/try", headers=csrf, data={"text": texts[0]})
    assert decided.status_code == 200, decided.text
    item = (await client.post(f"/api/v1/concepts/{concept_id}/classify", headers=auth,
                              json={"texts": [texts[0]]})).json()["items"][0]
    assert ("<strong class=\"status-succeeded\">Yes</strong>" in decided.text) == item["decision"]
    assert f"probability {item['score']:.3f} against its threshold 0.5" in decided.text
    pushes = re.findall(r'<td class="num">([+-]\d+\.\d+)</td></tr>', table(decided.text, "paste-features"))
    assert pushes == [f"{e['contribution']:+.3f}" for e in item["evidence"]]
    with session_scope(app.state.factory) as session:
        actions = [e.action for e in session.scalars(select(AuditEvent).where(
            AuditEvent.action.in_(("sae_run.encode", "concept.classify")))).all()]
    assert actions.count("concept.classify") == 2 and len(actions) >= 3  # the pastes are audited as the API's calls

    with session_scope(app.state.factory) as session:  # a member of another project only
        other = Dataset(name="other", format="csv", project_id=accounts.create_project(session, name="elsewhere").id)
        session.add(other)
        session.flush()
        other_id = other.id
    outsider, outsider_token = await as_role("editor", other_id)  # an editor, but of another project
    hidden = await outsider.post(f"/concepts/{concept_id}/try", headers={"X-CSRF-Token": outsider_token},
                                 data={"text": texts[0]})
    assert hidden.status_code == 404



@pytest.fixture
async def coded_run(app, client, auth) -> int:  # noqa: ANN001
    """A run with codes and no model here (no embedding): what the form refuses comes before any embedding."""
    ds = await upload(client, auth, ["una nota", "un'altra nota"])
    with session_scope(app.state.factory) as session:
        return add_coded_sae_run(session, app.state.store, dataset_id=ds,
                                 codes=sp.csr_matrix(np.eye(2, 4, dtype=np.float32))).id


async def test_bad_input_says_why_in_the_fragment(app, client, auth, as_role, coded_run) -> None:  # noqa: ANN001, F811
    app.state.settings.max_document_bytes = 2000
    viewer, token = await as_role("viewer", dataset_of(app, coded_run))
    paste = f"/sae-runs/{coded_run}/paste"

    async def said(url: str, text: str, status: int, words: str) -> None:
        resp = await viewer.post(url, headers={"X-CSRF-Token": token}, data={"text": text})
        assert resp.status_code == status and words in resp.text and 'role="alert"' in resp.text, resp.text
        assert "texts.0" not in resp.text and "Traceback" not in resp.text

    await said(paste, "", 422, "empty or only white space")
    await said(paste, " \n\t ", 422, "empty or only white space")
    await said(paste, "é" * 1001, 413, "2000")  # 2002 bytes of UTF-8 over the document bound
    assert (await viewer.post("/sae-runs/999999/paste", headers={"X-CSRF-Token": token},
                              data={"text": "tosse"})).status_code == 404  # as the run's page
    with session_scope(app.state.factory) as session:  # its vectors imported: no model here embeds a text
        session.get(EmbeddingRun, session.get(SaeRun, coded_run).embedding_run_id).pooling = "imported"
    await said(paste, "tosse", 409, "no model here embeds a text")

    concept = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": coded_run, "name": "to label", "kind": "probe", "seed": {"expression": "F1"}})
    assert concept.status_code == 201, concept.text
    concept_id = concept.json()["id"]
    page = (await viewer.get(f"/concepts/{concept_id}")).text
    assert 'id="try-no-probe"' in page and f'hx-post="/concepts/{concept_id}/try"' not in page
    await said(f"/concepts/{concept_id}/try", "tosse", 409, "no trained probe yet")
