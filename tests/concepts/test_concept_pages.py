"""The concept pages: list, one concept with its metrics, confusion matrix, PR curve and named
weights, the apply box polled while its job runs; names are escaped."""

from __future__ import annotations

import re

import pytest

from tests.concepts.test_concepts_api import CONFIRMED_VS_SUSPECTED, create
from tests.gateway.polling import wait_done

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_concept_page_shows_metrics_weights_and_export(client, auth, labelled_run) -> None:  # noqa: ANN001
    probe = (await create(client, auth, labelled_run, name="<b>probe</b>", kind="probe",
                          examples=CONFIRMED_VS_SUSPECTED)).json()
    expr = (await create(client, auth, labelled_run, name="rule", kind="expression", expression="F0 > 0 AND NOT F1 > 0",
                         examples=CONFIRMED_VS_SUSPECTED)).json()
    listing = await client.get("/concepts", headers=auth)
    assert listing.status_code == 200
    assert "&lt;b&gt;probe&lt;/b&gt;" in listing.text and "<b>probe</b>" not in listing.text
    assert f'href="/concepts/{expr["id"]}"' in listing.text
    # beside each concept's F1, the strongest words-alone baseline of its split and the paired verdict
    baselines = {k: v for k, v in probe["baselines"].items() if v}
    method = max(baselines, key=lambda k: baselines[k]["f1"])
    d = baselines[method]["f1_difference"]
    verdict = ("within the noise" if not d["distinguishable"] else
               "features better" if d["difference"] > 0 else "words better")
    row = re.search(rf'<tr><td><a href="/concepts/{probe["id"]}">.*?</tr>', listing.text, re.S).group(0)
    assert f'{baselines[method]["f1"]:.3f} <span class="muted small">' in row
    assert f'concept {d["difference"]:+.3f}</span>' in row and verdict in row
    summary = next(c for c in (await client.get("/api/v1/concepts", headers=auth)).json()["items"] if c["id"] == probe["id"])
    assert summary["words"]["method"] == method and summary["words"]["f1"] == baselines[method]["f1"]

    page = (await client.get(f"/concepts/{probe['id']}", headers=auth)).text
    m = probe["metrics"]
    assert f'{m["f1"]:.3f}' in page and f'{m["precision"]:.3f}' in page
    confusion = re.search(r'<table [^>]*id="confusion".*?</table>', page, re.S).group(0)
    assert [int(v) for v in re.findall(r'<td class="num">(\d+)</td>', confusion)] == [
        m["confusion"][k] for k in ("tp", "fn", "fp", "tn")]
    assert '<figure class="chart-box" id="pr-curve"><svg' in page and "average precision" in page
    assert "sospetto" in page and 'href="/sae-runs/' in page
    assert 'id="apply"' in page and 'id="export"' not in page  # not applied yet

    assert (await client.post(f"/concepts/{probe['id']}/apply", headers=auth)).status_code == 403  # no CSRF token
    job = (await client.post(f"/api/v1/concepts/{probe['id']}/apply", headers=auth)).json()
    await wait_done(client, auth, f"/api/v1/jobs/{job['id']}", timeout=60)
    box = (await client.get(f"/concepts/{probe['id']}/apply", headers=auth)).text
    assert 'hx-trigger' not in box and f'href="/api/v1/concepts/{probe["id"]}/export.csv"' in box
    assert 'id="apply"' not in box  # done: applying again would be the same job

    rule = (await client.get(f"/concepts/{expr['id']}", headers=auth)).text
    assert "F0 &gt; 0 AND NOT F1 &gt; 0" in rule and "bronchiolite" in rule and 'id="pr-curve"' not in rule
    assert (await client.get("/concepts/999", headers=auth)).status_code == 404
