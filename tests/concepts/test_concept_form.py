"""The dashboard's New-concept form: a probe created from it (labels ticked, segment words typed) is
the concept POST /api/v1/concepts stores for the same fields; a refused input answers the form
again, 4xx, with the message beside the field it names, and stores nothing."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator

import httpx
import numpy as np
import pytest
import scipy.sparse as sp

from tests.concepts import test_scoped_probe as scoped
from tests.concepts.conftest import write_run
from tests.concepts.test_concepts_api import CONFIRMED_VS_SUSPECTED

pytestmark = pytest.mark.anyio
# The form's own logic on SQLite; the domain it calls is tested on both databases.
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
CONFIRMED, SUSPECTED = "bronchiolitis:confirmed", "bronchiolitis:suspected"
scoped_run = scoped.scoped_run  # the fixture: 200 notes, each a bronchiolitis clause and another, with segment codes


@pytest.fixture
async def dash(app, auth) -> AsyncIterator[httpx.AsyncClient]:  # noqa: ANN001
    """The dashboard as a browser holds it: https (the session cookie is Secure), its cookie kept."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://prisma.test",
                                 headers=auth) as c:
        yield c


async def form_page(dash: httpx.AsyncClient, run_id: int) -> tuple[str, str]:
    """(the page, its CSRF token)."""
    page = await dash.get(f"/concepts/new?sae_run_id={run_id}")
    assert page.status_code == 200, page.text
    return page.text, re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


def comparable(concept: dict) -> dict:
    """What a concept holds beyond its identity (id, name, when it was made)."""
    out = {k: v for k, v in concept.items() if k not in ("id", "name", "created_at")}
    out["metrics"] = {k: v for k, v in concept["metrics"].items() if k != "evaluated_at"}
    if out.get("labelling"):  # what it was trained on, without when
        out["labelling"] = {**out["labelling"], "trained_on": {k: v for k, v in out["labelling"]["trained_on"].items()
                                                               if k != "at"}}
    return out


async def test_the_form_stores_what_the_api_stores(dash, scoped_run) -> None:  # noqa: ANN001
    page, token = await form_page(dash, scoped_run)
    assert re.search(rf'<option value="{scoped_run}" selected>SAE run {scoped_run} · notes · 200 documents', page)
    for label in (CONFIRMED, SUSPECTED):  # the dataset's labels, each with its number of notes
        assert re.search(rf'<span class="tag">{label}</span></td><td class="num">100</td>', page)
        assert f'name="positive" value="{label}"' in page and f'name="negative" value="{label}"' in page
    segment_input = re.search(r'<input id="segment_words"[^>]*>', page, re.S).group(0)
    assert "disabled" not in segment_input  # the run has segment codes
    assert "the word finds the mention, the features read its status" in page

    form = {"csrf_token": token, "sae_run_id": str(scoped_run), "name": "from the form", "kind": "probe",
            "description": "confirmed, not suspected", "positive": CONFIRMED, "negative": SUSPECTED,
            "segment_words": "Bronchiolit", "test_fraction": "0.25", "expression": "ignored: a probe has none"}
    resp = await dash.post("/concepts", data=form, headers={"HX-Request": "true"})
    assert resp.status_code == 200, resp.text
    concept_id = int(re.fullmatch(r"/concepts/(\d+)", resp.headers["HX-Redirect"]).group(1))

    api = await dash.post("/api/v1/concepts", json={
        "sae_run_id": scoped_run, "name": "from the API", "kind": "probe", "description": "confirmed, not suspected",
        "examples": {**scoped.EXAMPLES, "test_fraction": 0.25}, "segment_words": ["Bronchiolit"]})
    assert api.status_code == 201, api.text
    made = (await dash.get(f"/api/v1/concepts/{concept_id}")).json()
    assert made["name"] == "from the form" and made["probe"]["segment_words"] == ["Bronchiolit"]
    assert comparable(made) == comparable(api.json())
    assert made["metrics"]["f1"] == 1.0 and made["baselines"]["tfidf_lr_segments"]["segment_words"] == ["Bronchiolit"]

    shown = (await dash.get(f"/concepts/{concept_id}")).text
    assert f'<tr><th scope="row">F1</th><td class="num">{made["metrics"]["f1"]:.3f}</td></tr>' in shown
    assert 'id="baseline-segments"' in shown and "<code>Bronchiolit</code>" in shown


@sqlite_only
async def test_an_expression_with_labelled_examples(dash, labelled_run) -> None:  # noqa: ANN001
    _, token = await form_page(dash, labelled_run.run_id)
    form = {"csrf_token": token, "sae_run_id": str(labelled_run.run_id), "name": "rule", "kind": "expression",
            "expression": "F0 > 0 AND NOT F1 > 0", "positive": CONFIRMED, "negative": SUSPECTED,
            "segment_words": "ignored: an expression has none", "test_fraction": "0.25"}
    resp = await dash.post("/concepts", data=form, headers={"HX-Request": "true"})
    assert resp.status_code == 200, resp.text
    made = (await dash.get(resp.headers["HX-Redirect"].replace("/concepts/", "/api/v1/concepts/"))).json()
    assert made["kind"] == "expression" and made["expression"] == "F0 > 0 AND NOT F1 > 0"
    assert made["examples"]["labels"] == CONFIRMED_VS_SUSPECTED["labels"] and made["metrics"]["n_test"] == 50


BASE = {"name": "c", "kind": "probe", "positive": CONFIRMED, "negative": SUSPECTED, "test_fraction": "0.25"}
REFUSED = [  # (form fields over BASE, status, the form's field, words of the message)
    ({"segment_words": "bronchiolit, a"}, 422, "segment_words", "segment_words, item 2 (\"a\"): String should have at least 2"),
    ({"segment_words": ",".join(f"w{i}" for i in range(21))}, 422, "segment_words", "at most 20 items"),
    ({"segment_words": "bronchiolit"}, 422, "segment_words", "the SAE run has no segment codes"),
    ({"name": "taken"}, 409, "name", "already has a concept named 'taken'"),
    ({"name": ""}, 422, "name", "name: String should have at least 1 character"),
    ({"positive": [], "negative": []}, 422, "examples", "a probe is trained on labelled documents"),
    ({"positive": [], "negative": SUSPECTED}, 422, "positive", "examples.labels.positive: List should have at least 1"),
    ({"more_positive": "bronchiolitis:confirmd"}, 422, "positive",
     "examples.labels.positive.1: no document of dataset"),
    ({"test_fraction": "0.9"}, 422, "test_fraction",
     "examples.test_fraction: Input should be less than or equal to 0.5"),
    ({"sae_run_id": "999"}, 422, "sae_run_id", "SAE run 999 does not exist"),
    ({"kind": "expression", "expression": ""}, 422, "expression", "needs an expression"),
    ({"kind": "rule"}, 422, "kind", "kind: Input should be 'expression' or 'probe'"),
    ({"words_regex": "sospett(a|o"}, 422, "words_regex", "examples.words_regex: Value error, does not compile at "
                                                          "position 11: missing )"),
]


@sqlite_only
@pytest.mark.parametrize(("fields", "status", "field", "words"), REFUSED,
                         ids=[f"{r[2]}-{i}" for i, r in enumerate(REFUSED)])
async def test_a_refusal_names_the_field_and_stores_nothing(
        dash, labelled_run, fields, status, field, words) -> None:  # noqa: ANN001
    taken = await dash.post("/api/v1/concepts", json={"sae_run_id": labelled_run.run_id, "name": "taken",
                                                      "kind": "expression", "expression": "F0 > 0"})
    assert taken.status_code == 201, taken.text
    _, token = await form_page(dash, labelled_run.run_id)
    form = {"csrf_token": token, "sae_run_id": str(labelled_run.run_id), **BASE, **fields}
    resp = await dash.post("/concepts", data=form, headers={"HX-Request": "true"})
    assert resp.status_code == status, resp.text
    assert "HX-Redirect" not in resp.headers and resp.text.lstrip().startswith("<form id=\"concept-form\"")
    beside = re.search(rf'<p class="error field-error" id="{field}-error"><strong>[^<]+:</strong> (.*?)</p>', resp.text,
                       re.S)
    assert beside, resp.text
    assert words in html.unescape(beside.group(1))
    assert f'href="#{field}-error"' in resp.text  # the summary above the form points at it
    if form["name"]:  # what was typed is kept
        assert f'id="name" name="name" type="text" maxlength="200" required value="{form["name"]}"' in resp.text
    listed = (await dash.get(f"/api/v1/concepts?sae_run_id={labelled_run.run_id}")).json()
    assert [c["name"] for c in listed["items"]] == ["taken"]


@sqlite_only
async def test_an_expression_that_does_not_parse_is_marked_where(dash, labelled_run) -> None:  # noqa: ANN001
    _, token = await form_page(dash, labelled_run.run_id)
    form = {"csrf_token": token, "sae_run_id": str(labelled_run.run_id), "name": "rule", "kind": "expression",
            "expression": "F0 > 0 AND AND F1"}
    resp = await dash.post("/concepts", data=form, headers={"HX-Request": "true"})
    assert resp.status_code == 422, resp.text
    box = re.search(r'<div class="error field-error search-error" id="expression-error">.*?</div>', resp.text, re.S)
    assert box and "(line 1, column 12)" in box.group(0), resp.text
    assert '<code>F0 &gt; 0 AND <mark class="err-at" data-offset="11"' in box.group(0)
    assert "Expected:" in box.group(0)
    assert '<input type="radio" id="kind-expression" name="kind" value="expression" checked>' in resp.text
    assert (await dash.get("/api/v1/concepts")).json()["total"] == 0


@sqlite_only
async def test_the_form_needs_the_csrf_token(dash, labelled_run) -> None:  # noqa: ANN001
    await form_page(dash, labelled_run.run_id)
    resp = await dash.post("/concepts", data={"sae_run_id": str(labelled_run.run_id), **BASE})
    assert resp.status_code == 403 and (await dash.get("/api/v1/concepts")).json()["total"] == 0


@sqlite_only
async def test_changing_the_run_answers_its_fields(dash, labelled_run) -> None:  # noqa: ANN001
    resp = await dash.get(f"/concepts/new?sae_run_id={labelled_run.run_id}",
                          headers={"HX-Request": "true", "HX-Target": "run-fields"})
    assert resp.status_code == 200 and resp.text.lstrip().startswith('<div id="run-fields">')
    segment_input = re.search(r'<input id="segment_words"[^>]*>', resp.text, re.S).group(0)
    assert "disabled" in segment_input and "this one has none" in resp.text  # no segment codes on this run
    assert resp.text.count('name="positive"') == 4  # the dataset's four labels


@sqlite_only
async def test_labels_names_and_typed_text_are_shown_as_text(app, dash) -> None:  # noqa: ANN001
    markup = '<img src=x onerror="alert(1)">'
    rows = "\n".join(f'N{i},visita {i},"{markup.replace(chr(34), chr(34) * 2)}"' for i in range(12))
    up = await dash.post("/api/v1/datasets", data={"name": f"<b>notes</b>{markup}"},
                         files={"file": ("n.csv", f"id,text,labels\n{rows}\n".encode())})
    assert up.status_code == 201, up.text
    run_id = write_run(app, up.json()["id"], sp.csr_matrix(np.ones((12, 4), dtype=np.float32)))
    page, token = await form_page(dash, run_id)
    assert markup not in page and "<b>notes</b>" not in page
    assert "&lt;b&gt;notes&lt;/b&gt;&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page  # the run's dataset
    assert 'value="&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"' in page  # the label's checkbox
    resp = await dash.post("/concepts", headers={"HX-Request": "true"},
                           data={"csrf_token": token, "sae_run_id": str(run_id), "name": markup, "kind": "expression",
                                 "expression": markup})
    assert resp.status_code == 422 and markup not in resp.text
    assert 'value="&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"' in resp.text  # the typed name, kept as text
