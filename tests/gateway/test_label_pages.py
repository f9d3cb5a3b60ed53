"""The labelling page over HTTP (no browser): a note's text and the concept's name escaped; the page holds the
queue's batch (the note shown, the next one rendered hidden, the rest listed); a labeller answers and undoes, the
counts coming back out of band; a viewer reads the page but is handed no note and may not answer (403); the
concept page of a probe with no label yet says so; "Label these" on the search page makes (or finds) the concept
seeded by the search and opens its labelling page, for an editor only."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import AsyncIterator
from typing import NamedTuple

import httpx
import pytest

from gateway.db import session_scope
from gateway.domain.auth import accounts
from gateway.domain.auth import repo as auth_repo
from gateway.domain.auth.service import create_key
from gateway.domain.datasets.models import Dataset
from gateway.search.space import clear_cache
from tests.concepts.conftest import known_codes, note_text, write_run

pytestmark = pytest.mark.anyio
NASTY = '<script>alert("x")</script> & <b>bold</b>'
NAME = "Confirmed <i>bronchiolitis</i>"


class Labelling(NamedTuple):
    concept_id: int
    dataset_id: int
    run_id: int


@pytest.fixture
async def labelling(app, client, auth) -> Labelling:  # noqa: ANN001
    """400 notes whose text ends with markup, a run whose F0 is named "bronchiolite", and a probe to label."""
    clear_cache()
    codes, labels = known_codes()
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "text", "labels"])
    writer.writerows([f"N{i:04d}", f"{note_text(i, lab)} {NASTY}", lab] for i, lab in enumerate(labels))
    resp = await client.post("/api/v1/datasets", headers=auth, files={"file": ("notes.csv", out.getvalue().encode())})
    assert resp.status_code == 201, resp.text
    dataset_id = resp.json()["id"]
    run_id = write_run(app, dataset_id, codes)
    resp = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": run_id, "name": NAME, "kind": "probe", "seed": {"expression": 'label:"bronchiolite"'}})
    assert resp.status_code == 201, resp.text
    return Labelling(resp.json()["id"], dataset_id, run_id)


def member_key(app, dataset_id: int, role: str) -> str:  # noqa: ANN001
    with session_scope(app.state.factory) as session:
        project_id = session.get(Dataset, dataset_id).project_id
        user = accounts.create_user(session, name=f"u-{role}", role=role)
        auth_repo.add_membership(session, user_id=user.id, project_id=project_id)
        return create_key(session, name=f"k-{role}", user=user)[1]


@pytest.fixture
async def as_role(app) -> AsyncIterator:  # noqa: ANN001
    """A client of its own for a key of `role` in the dataset's project: https, so the session cookie (its CSRF
    token) comes back."""
    opened: list[httpx.AsyncClient] = []

    async def open_as(role: str, dataset_id: int) -> tuple[httpx.AsyncClient, str]:
        key = member_key(app, dataset_id, role)
        browser = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://prisma.test",
                                    headers={"Authorization": f"Bearer {key}"})
        opened.append(browser)
        login = await browser.get("/login")
        return browser, re.search(r'name="csrf_token" value="([^"]+)"', login.text).group(1)

    yield open_as
    for browser in opened:
        await browser.aclose()


def articles(html: str) -> list[dict[str, str]]:
    return [dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag))
            for tag in re.findall(r'<article class="label-note"[^>]*>', html)]


async def test_the_page_escapes_the_note_and_holds_the_batch(client, auth, labelling) -> None:  # noqa: ANN001
    page = await client.get(f"/concepts/{labelling.concept_id}/label", headers=auth)
    assert page.status_code == 200, page.text
    html = page.text
    assert NASTY not in html and "<script>alert" not in html and "<i>bronchiolitis</i>" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in html
    assert "Confirmed &lt;i&gt;bronchiolitis&lt;/i&gt;" in html
    shown, upcoming = articles(html)  # the note shown and the next one, rendered hidden
    assert shown["document-id"] != upcoming["document-id"] and shown["lease-id"] and upcoming["lease-id"]
    assert re.search(r'<section id="note-next" hidden', html)
    assert len(re.findall(r'<li data-document-id="\d+"', html)) == 8  # the rest of the queue's batch of 10
    assert "bronchiolite" in html and 'class="drive-name"' in html  # the seed's feature, named where it fires


async def test_a_labeller_answers_and_undoes(labelling, as_role) -> None:  # noqa: ANN001
    labeller, token = await as_role("labeller", labelling.dataset_id)
    html = (await labeller.get(f"/concepts/{labelling.concept_id}/label")).text
    shown, upcoming = articles(html)
    rest = re.findall(r'<li data-document-id="(\d+)" data-lease-id="(\d+)"', html)
    answered = await labeller.post(f"/concepts/{labelling.concept_id}/label/answer", headers={"X-CSRF-Token": token},
                                   data={"document_id": shown["document-id"], "lease_id": shown["lease-id"],
                                         "label": "positive", "shown": upcoming["document-id"],
                                         "next_document_id": rest[0][0], "next_lease_id": rest[0][1]})
    assert answered.status_code == 200, answered.text
    (brought,) = articles(answered.text)  # the note after the one now shown, for the hidden slot
    assert brought["document-id"] == rest[0][0] and brought["lease-id"] == rest[0][1]
    assert 'id="label-status"' in answered.text and 'hx-swap-oob="true"' in answered.text
    assert re.search(r'id="count-positive">1<', answered.text)
    assert NASTY not in answered.text

    undone = await labeller.post(f"/concepts/{labelling.concept_id}/label/undo", headers={"X-CSRF-Token": token},
                                 data={"document_id": shown["document-id"], "lease_id": shown["lease-id"]})
    assert undone.status_code == 200, undone.text
    assert articles(undone.text)[0]["document-id"] == shown["document-id"]  # shown again
    assert re.search(r'id="count-positive">0<', undone.text)
    never = await labeller.post(f"/concepts/{labelling.concept_id}/label/undo", headers={"X-CSRF-Token": token},
                                data={"document_id": upcoming["document-id"]})
    assert never.status_code == 409 and never.headers["HX-Retarget"] == "#label-flash"  # nothing to undo there
    assert "has no change to undo" in never.text

    forged = await labeller.post(f"/concepts/{labelling.concept_id}/label/answer",
                                 data={"document_id": shown["document-id"], "label": "negative"})
    assert forged.status_code == 403  # no CSRF token


async def test_a_viewer_reads_the_page_but_cannot_answer(labelling, as_role) -> None:  # noqa: ANN001
    viewer, token = await as_role("viewer", labelling.dataset_id)
    page = await viewer.get(f"/concepts/{labelling.concept_id}/label")
    assert page.status_code == 200 and 'id="read-only"' in page.text and 'id="label-status"' in page.text
    assert articles(page.text) == [] and "<li data-document-id" not in page.text  # handed no note, no lease
    answered = await viewer.post(f"/concepts/{labelling.concept_id}/label/answer", headers={"X-CSRF-Token": token},
                                 data={"document_id": "1", "label": "positive"})
    assert answered.status_code == 403
    undone = await viewer.post(f"/concepts/{labelling.concept_id}/label/undo", headers={"X-CSRF-Token": token},
                               data={"document_id": "1"})
    assert undone.status_code == 403


async def test_the_concept_page_of_a_probe_without_labels(client, auth, labelling) -> None:  # noqa: ANN001
    page = await client.get(f"/concepts/{labelling.concept_id}", headers=auth)
    assert page.status_code == 200, page.text
    assert "No probe yet: label notes of both classes" in page.text
    assert f'href="/concepts/{labelling.concept_id}/label"' in page.text and 'id="metrics"' not in page.text


async def test_label_these_from_the_search_page(labelling, as_role) -> None:  # noqa: ANN001
    editor, token = await as_role("editor", labelling.dataset_id)
    search = await editor.get(f"/sae-runs/{labelling.run_id}/search", params={"q": 'label:"bronchiolite"'})
    assert 'id="label-these"' in search.text
    form = {"csrf_token": token, "mode": "expression", "q": 'label:"bronchiolite"', "name": "From <the> search"}
    made = await editor.post(f"/sae-runs/{labelling.run_id}/label", data=form)
    # the fixture's concept has this seed already: it is opened, not made twice
    assert made.status_code == 200 and made.headers["HX-Redirect"] == f"/concepts/{labelling.concept_id}/label"
    form["q"] = 'label:"bronchiolite" AND NOT label:"sospetto"'
    made = await editor.post(f"/sae-runs/{labelling.run_id}/label", data=form)
    new_page = made.headers["HX-Redirect"]
    assert re.fullmatch(r"/concepts/\d+/label", new_page) and new_page != f"/concepts/{labelling.concept_id}/label"
    page = await editor.get(new_page)
    assert page.status_code == 200 and "From &lt;the&gt; search" in page.text and len(articles(page.text)) == 2
    again = await editor.post(f"/sae-runs/{labelling.run_id}/label", data=form)
    assert again.headers["HX-Redirect"] == new_page  # the same search and name: the same concept
    form["q"] = "F1 >"
    taken = await editor.post(f"/sae-runs/{labelling.run_id}/label", data=form)
    assert taken.status_code == 409 and "already has a concept named" in taken.text  # the name, another seed
    form["name"] = "broken"
    wrong = await editor.post(f"/sae-runs/{labelling.run_id}/label", data=form)
    assert wrong.status_code == 422 and "seed" in wrong.text  # the expression's own error, said

    viewer, viewer_token = await as_role("viewer", labelling.dataset_id)
    assert 'id="label-these"' not in (await viewer.get(f"/sae-runs/{labelling.run_id}/search",
                                                      params={"q": 'label:"bronchiolite"'})).text
    refused = await viewer.post(f"/sae-runs/{labelling.run_id}/label", data={**form, "csrf_token": viewer_token})
    assert refused.status_code == 403
