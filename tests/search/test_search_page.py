"""The search page over HTTP: GET URLs that run a search, the error marked at its column, HTMX
fragments, label mode, name completion, and escaping of labels and texts."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, quote

import numpy as np
import pytest

from gateway.db import session_scope
from gateway.domain.features import repo as feature_repo
from tests.search.conftest import LABELS, add_interpretation

pytestmark = pytest.mark.anyio


async def test_a_shared_url_runs_the_expression(client, auth, seeded) -> None:  # noqa: ANN001
    dense = seeded.codes.toarray()
    resp = await client.get(f"/sae-runs/{seeded.run_id}/search?q={quote('F0 AND NOT F1')}", headers=auth)
    assert resp.status_code == 200, resp.text
    html = resp.text
    total = int(((dense[:, 0] > 0) & ~(dense[:, 1] > 0)).sum())
    assert f"<strong>{total}</strong> documents match" in html
    links = re.findall(r'<tr><td class="num"><a href="/sae-runs/(\d+)/documents/(\d+)\?feature=(\d+)"', html)
    assert len(links) == min(total, 20) and {(int(r), int(f)) for r, _, f in links} == {(seeded.run_id, 0)}
    assert 'class="chip"' in html and "bronchiolitis" in html  # the matching feature, named
    assert 'value="F0 AND NOT F1"' in html  # the box keeps the query


async def test_an_error_is_marked_where_it_occurs(client, auth, seeded) -> None:  # noqa: ANN001
    resp = await client.get(f"/sae-runs/{seeded.run_id}/search?q={quote('F0 AND (F1 OR F2')}", headers=auth)
    assert resp.status_code == 422
    assert "line 1, column 17" in resp.text
    assert re.search(r'<code>F0 AND \(F1 OR F2<mark class="err-at" data-offset="16"[^>]*> </mark></code>', resp.text)
    assert "Expected:" in resp.text and "<code>&#39;)&#39;</code>" in resp.text
    unknown = await client.get(f"/sae-runs/{seeded.run_id}/search", params={"q": 'label:"bronch"'}, headers=auth)
    assert unknown.status_code == 422 and "Did you mean" in unknown.text and "F1 “suspected bronchiolitis”" in unknown.text
    words = await client.get(f"/sae-runs/{seeded.run_id}/search", params={"q": "bronchiolitis"}, headers=auth)
    assert words.status_code == 422 and "is words, not an expression" in words.text
    links = dict((html.unescape(t), html.unescape(h)) for h, t in
                 re.findall(r'<a href="\?([^"]+)">(?:<code>)?([^<]+)', words.text))
    assert parse_qs(links['label:"bronchiolitis"']) == {"mode": ["expression"], "q": ['label:"bronchiolitis"']}
    assert parse_qs(links["documents like “bronchiolitis”"]) == {"mode": ["text"], "q": ["bronchiolitis"]}
    assert "Did you mean" in words.text and "F0 “bronchiolitis”" in words.text
    wrong = await client.get(f"/sae-runs/{seeded.run_id}/search?q=F99", headers=auth)
    assert wrong.status_code == 422 and "F99 is out of range" in wrong.text


async def test_htmx_gets_only_the_results(client, auth, seeded) -> None:  # noqa: ANN001
    headers = {**auth, "HX-Request": "true", "HX-Target": "search-results"}
    resp = await client.get(f"/sae-runs/{seeded.run_id}/search?q=F2&offset=0", headers=headers)
    assert resp.status_code == 200 and "<html" not in resp.text and 'id="document-results"' in resp.text
    bad = await client.get(f"/sae-runs/{seeded.run_id}/search?q={quote('F2 >')}", headers=headers)
    assert bad.status_code == 422 and "<html" not in bad.text and "err-at" in bad.text


async def test_label_mode_and_escaping(client, auth, seeded, app) -> None:  # noqa: ANN001
    with session_scope(app.state.factory) as session:
        add_interpretation(session, run_id=seeded.run_id, index=7, label="<script>alert(1)</script> rash",
                           reliable=False)
    resp = await client.get(f"/sae-runs/{seeded.run_id}/search?mode=label&q=rash", headers=auth)
    assert resp.status_code == 200
    assert "<script>alert(1)" not in resp.text and "&lt;script&gt;alert(1)&lt;/script&gt; rash" in resp.text
    assert "unreliable" in resp.text and 'id="label-results"' in resp.text


async def test_label_results_say_how_many_notes_each_name_selects(client, auth, seeded, app) -> None:  # noqa: ANN001
    codes = seeded.codes.toarray()[:, 4]  # [docs]
    threshold = float(np.median(codes[codes > 0]))
    with session_scope(app.state.factory) as session:
        add_interpretation(session, run_id=seeded.run_id, index=4, label="wheezing above half", threshold=threshold)
    page = (await client.get(f"/sae-runs/{seeded.run_id}/search?mode=label&q=wheezing+above", headers=auth)).text
    row = re.search(r'<tr><td class="num"><a href="/sae-runs/\d+/features/4">.*?</tr>', page, re.S).group(0)
    selects = int((codes >= threshold).sum())  # what label:"…" means: at or above the name's threshold
    assert f'<td class="num">{selects} <span class="muted small">≥ {threshold:.3f}</span></td>' in row
    link = re.search(r'href="\?([^"]+)">documents</a>', row).group(1)
    expression = parse_qs(html.unescape(link))["q"][0]
    assert expression == f"F4 >= {threshold}" and "Rank" not in page
    hits = (await client.post(f"/api/v1/sae-runs/{seeded.run_id}/search",
                              json={"mode": "expression", "expression": expression}, headers=auth)).json()
    assert hits["total"] == selects  # the link finds exactly the notes the column counts


async def test_name_completion(client, auth, seeded) -> None:  # noqa: ANN001
    url = f"/sae-runs/{seeded.run_id}/search/suggest"
    words = (await client.get(url, params={"q": "F3 AND NOT otit"}, headers=auth)).text
    notes = int((seeded.codes.toarray()[:, 2] > 0).sum())  # no threshold: any activation
    assert ('<option value="F3 AND NOT label:&#34;acute otitis media&#34;">F2 · acute otitis media · selects '
            f'{notes} notes</option>') in words
    quoted = (await client.get(url, params={"q": 'label:"suspec'}, headers=auth)).text
    assert 'value="label:&#34;suspected bronchiolitis&#34;"' in quoted
    index = (await client.get(url, params={"q": "F1 OR F5"}, headers=auth)).text
    assert 'value="F1 OR F5">F5 · wheezing and cough' in index
    assert (await client.get(url, params={"q": "F1 AND"}, headers=auth)).text.strip() == ""


async def test_the_page_needs_a_login(client, seeded) -> None:  # noqa: ANN001
    assert (await client.get(f"/sae-runs/{seeded.run_id}/search?q=F1")).status_code == 401
    assert (await client.get(f"/sae-runs/{seeded.run_id}/search/suggest?q=F1")).status_code == 401


async def test_features_that_share_a_name_are_one_label(client, auth, seeded, app) -> None:  # noqa: ANN001
    """Two features named "fever" (as the demo named three "bronchiolite"), the seed's F3 unreliable: label:"fever"
    means the reliable one (one meaning per name among reliable features), and completion offers that label
    once, listing both."""
    with session_scope(app.state.factory) as session:
        add_interpretation(session, run_id=seeded.run_id, index=9, label="Fever")
    dense = seeded.codes.toarray()
    want = int((dense[:, 9] > 0).sum())
    resp = await client.post(f"/api/v1/sae-runs/{seeded.run_id}/search",
                             json={"mode": "expression", "expression": 'label:"FEVER" AND NOT F0'}, headers=auth)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["total"] == int(((dense[:, 9] > 0) & ~(dense[:, 0] > 0)).sum())
    assert [f["index"] for f in body["features"]] == [9, 0]
    page = await client.get(f"/sae-runs/{seeded.run_id}/search", params={"q": 'label:"fever"'}, headers=auth)
    assert page.status_code == 200 and f"<strong>{want}</strong> documents match" in page.text
    options = (await client.get(f"/sae-runs/{seeded.run_id}/search/suggest", params={"q": "F1 OR fev"},
                                headers=auth)).text
    assert options.count("<option") == 1, options
    assert re.search(r'<option value="F1 OR label:&#34;(fever|Fever)&#34;">(F3, F9|F9, F3) · (fever|Fever) '
                     r'\(F3 unreliable\) · selects \d+ notes\+</option>', options), options  # the seed's F3 is unreliable


async def test_completion_offers_the_names_that_hold_the_word_first(client, auth, seeded, app, monkeypatch) -> None:  # noqa: ANN001
    """A word found in many features' keyword evidence (each seeded description says "notes that mention …") and
    in one name: the name comes first, even where the evidence matches outnumber the options shown and score
    as high (they used to fill the list before it, the database cutting by score before the ranking)."""
    import importlib

    search_pages = importlib.import_module("gateway.dashboard.search_pages")  # the package exports its router
    with session_scope(app.state.factory) as session:
        add_interpretation(session, run_id=seeded.run_id, index=6, label="mentioned wheeze", description="wheeze")
    monkeypatch.setattr(search_pages, "SUGGESTIONS", 2)
    options = (await client.get(f"/sae-runs/{seeded.run_id}/search/suggest", params={"q": "F1 AND menti"},
                                headers=auth)).text
    values = re.findall(r'<option value="([^"]*)"', options)
    assert len(values) == 2, options
    assert values[0] == "F1 AND label:&#34;mentioned wheeze&#34;", values
    evidence = {f"F1 AND label:&#34;{label}&#34;" for index, label in LABELS.items() if index != 3}  # F3 unreliable
    assert values[1] in evidence, values  # then a name found through its evidence ("notes that mention …")


def shown_examples(page: str) -> list[str]:
    """The expressions of the example links under the search box."""
    return [parse_qs(html.unescape(q))["q"][0] for q in re.findall(r'<a href="\?(mode=expression&amp;q=[^"]+)"', page)]


async def test_the_examples_are_written_from_the_runs_own_features(client, auth, seeded, app) -> None:  # noqa: ANN001
    """Each example under the box runs on this run (no name or index the run lacks): a reliable name and one that
    refines it ("bronchiolitis", "suspected bronchiolitis"), the second excluded, then the same features by index;
    without such a pair the two best names; a run with too few names gets index examples only."""
    page = (await client.get(f"/sae-runs/{seeded.run_id}/search", headers=auth)).text
    examples = shown_examples(page)
    assert examples[0] == 'label:"bronchiolitis" AND NOT label:"suspected bronchiolitis"', examples
    assert examples[1].startswith("F0 > ") and examples[1].endswith(" AND NOT F1")
    assert examples[2].startswith("0.7*F0 + 0.3*F1 >= ")
    for expression in examples:
        found = await client.get(f"/sae-runs/{seeded.run_id}/search", params={"q": expression}, headers=auth)
        assert found.status_code == 200 and "documents match" in found.text, (expression, found.text[-500:])
    with session_scope(app.state.factory) as session:  # no name refines another: the two best (F0 first, then F2)
        feature_repo.get_feature(session, sae_run_id=seeded.run_id, index=1)[1].reliable = False
    page = (await client.get(f"/sae-runs/{seeded.run_id}/search", headers=auth)).text
    assert 'label:&#34;bronchiolitis&#34; AND NOT label:&#34;acute otitis media&#34;' in page
    with session_scope(app.state.factory) as session:  # a refining pair below the two best is chosen over them
        add_interpretation(session, run_id=seeded.run_id, index=7, label="acute otitis media, left ear")
    page = (await client.get(f"/sae-runs/{seeded.run_id}/search", headers=auth)).text
    assert 'label:&#34;acute otitis media&#34; AND NOT label:&#34;acute otitis media, left ear&#34;' in page
    with session_scope(app.state.factory) as session:  # no reliable name left: index examples only
        for feat, best in feature_repo.list_features(session, sae_run_id=seeded.run_id, sort="index", limit=100,
                                                     offset=0, reliability="reliable")[0]:
            best.reliable = False
    page = (await client.get(f"/sae-runs/{seeded.run_id}/search", headers=auth)).text
    examples = shown_examples(page)
    assert len(examples) == 2 and all(e.startswith("F") or e.startswith("0.7*F") for e in examples), examples
