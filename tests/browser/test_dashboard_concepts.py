"""In headless Chromium over `prisma demo` (a small corpus): the demo ships its four concepts; open
the probe, read its held-out metrics, confusion matrix, PR curve and named weights, apply it with
live progress, download its CSV; open the saved expression and read its metrics, and the probe
scoped to clauses with TF-IDF on the same clauses beside it; delete a concept from its page."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from tests.browser.conftest import shot
from tests.browser.test_dashboard_embedding import login
from tests.live import HTTP

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_demo_concepts_metrics_and_csv(page, demo) -> None:  # noqa: ANN001
    url, key = demo.url, demo.key
    concepts = {c["name"]: c for c in demo.concepts}
    assert set(concepts) == {"Confirmed bronchiolitis (probe)", "Confirmed bronchiolitis (expression)",
                             "Confirmed bronchiolitis (probe on its clauses)", "Confirmed bronchiolitis (labelling)"}
    login(page, url, key)
    page.get_by_role("link", name="Concepts", exact=True).click()
    page.wait_for_url(f"{url}/concepts")
    page.get_by_role("link", name="Confirmed bronchiolitis (probe)").click()
    page.wait_for_url(re.compile(r"/concepts/\d+$"))
    assert page.locator("h1").inner_text().startswith("Confirmed bronchiolitis (probe)")
    metrics = page.locator("#metrics")
    for measure in ("Precision", "Recall", "F1"):
        assert re.fullmatch(r"[01]\.\d{3}", metrics.locator(f"tr:has(th:text-is('{measure}')) td").inner_text())
    cells = [int(t) for t in page.locator("#confusion td.num").all_inner_texts()]
    assert len(cells) == 4 and sum(cells) > 10
    assert page.locator("#pr-curve svg path.line").count() == 1
    assert page.locator("#weights tbody tr").count() >= 1
    assert page.locator(".tag", has_text="bronchiolitis:confirmed").count() == 1  # what it was trained on
    dense = page.locator("#baselines #baseline-dense")  # the run's own vectors, unnamed: the ceiling, same split
    assert " ".join(dense.locator("th").text_content().split()).startswith("Dense vectors + logistic regression")
    figures = dense.locator("td.num:not(.vs)").all_inner_texts()
    assert len(figures) == 3 and all(re.fullmatch(r"[01]\.\d{3}", t) for t in figures), figures
    shot(page, "concept")

    page.click("#apply")
    page.wait_for_selector("#export", timeout=120_000)  # the partial polled the job until it finished
    n_matches = int(page.locator("#concept-apply strong").inner_text().replace(",", ""))
    with page.expect_download() as download:
        page.click("#export")
    body = Path(download.value.path()).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(body)))
    assert list(rows[0]) == ["document_id", "external_id", "score", "matching_features", "labels", "metadata"]
    assert len(rows) == n_matches > 0
    assert all(r["external_id"].startswith("PED-") for r in rows)
    confirmed = sum("bronchiolitis:confirmed" in r["labels"] for r in rows)
    assert confirmed / len(rows) > 3 * 176 / 2000  # far above the corpus's share of confirmed notes

    page.goto(f"{url}/concepts")
    page.get_by_role("link", name="Confirmed bronchiolitis (expression)").click()
    page.wait_for_url(re.compile(r"/concepts/\d+$"))
    assert "AND NOT" in page.locator("pre.expr-source").inner_text()
    assert page.locator("#metrics td.num").count() == 3 and page.locator("#confusion td.num").count() == 4
    shot(page, "concept-expression")

    page.goto(f"{url}/concepts")  # the probe read on the clauses that name bronchiolitis says so
    page.get_by_role("link", name="Confirmed bronchiolitis (probe on its clauses)").click()
    page.wait_for_url(re.compile(r"/concepts/\d+$"))
    assert " ".join(page.locator("#segment-scope").inner_text().split()).startswith(
        "Reads the segments that contain bronchiolit")
    assert re.fullmatch(r"[01]\.\d{3}", page.locator("#metrics tr:has(th:text-is('F1')) td").inner_text())
    segments = page.locator("#baselines #baseline-segments")  # words on the same clauses, beside it
    heading = " ".join(segments.locator("th").text_content().split())  # the DOM's text (CSS shows it upper-case)
    assert heading.startswith("TF-IDF + LR on the same segments (the text of each note's segments that contain "
                              "bronchiolit"), heading
    figures = segments.locator("td.num:not(.vs)").all_inner_texts()  # precision, recall, F1
    assert len(figures) == 3 and all(re.fullmatch(r"[01]\.\d{3}", t) for t in figures), figures
    # the probe's F1 minus each method's, with its interval and what it means
    concept_f1 = float(page.locator("#metrics tr:has(th:text-is('F1')) td").inner_text())
    for row in page.locator("#baselines tbody tr:has(td.vs)").all():
        f1 = float(row.locator("td.num:not(.vs)").nth(2).inner_text())
        vs = " ".join(row.locator("td.vs").inner_text().split())
        got = re.fullmatch(r"([+-]\d\.\d{3}) \(([+-]\d\.\d{3}) to ([+-]\d\.\d{3})\) "
                           r"(within the noise|features better|words better|dense vectors better)", vs)
        assert got, vs
        difference, low, high = (float(got.group(i)) for i in (1, 2, 3))
        assert abs(difference - (concept_f1 - f1)) <= 0.0015 and low <= difference <= high
        other = "dense vectors" if row.get_attribute("id") == "baseline-dense" else "words"
        assert got.group(4) == ("within the noise" if low <= 0 <= high else
                                "features better" if difference > 0 else f"{other} better")
    # the label's regex, the demo's own rule with hedge cues, TF-IDF, dense vectors, TF-IDF on the clauses
    assert page.locator("#baselines tbody tr:has(td.vs)").count() == 5
    own = " ".join(page.locator("#baseline-words-regex th").text_content().split())
    assert own.startswith("Your regex (?<!(?:sospett|") and own.endswith("(a match predicts positive)"), own
    shot(page, "concept-scoped")
    assert page.console_errors == []


def test_delete_a_concept_from_its_page(page, demo) -> None:  # noqa: ANN001
    """An editor deletes a concept from its page, after a confirmation that names it; the run's concept list
    and the API no longer have it, and the demo's own concepts stay."""
    url, key = demo.url, demo.key
    auth, run = {"Authorization": f"Bearer {key}"}, demo.concepts[0]["sae_run_id"]
    created = HTTP.post(f"{url}/api/v1/concepts", headers=auth, timeout=120, json={
        "sae_run_id": run, "name": "A trial <b>to delete</b>", "kind": "expression", "expression": "F1 > 0"})
    assert created.status_code == 201, created.text
    concept_id = created.json()["id"]
    login(page, url, key)
    page.goto(f"{url}/concepts/{concept_id}")
    asked: list[str] = []

    def accept(dialog) -> None:  # noqa: ANN001
        asked.append(dialog.message)
        dialog.accept()

    shot(page, "concept-delete")
    page.once("dialog", accept)
    page.click("#delete-concept")
    page.wait_for_url(f"{url}/concepts?sae_run_id={run}")
    assert asked and "A trial <b>to delete</b>" in asked[0]  # the name as text, in the confirmation
    listed = page.locator("main").inner_text()
    assert "A trial" not in listed and "Confirmed bronchiolitis (probe)" in listed
    assert HTTP.get(f"{url}/api/v1/concepts/{concept_id}", headers=auth, timeout=60).status_code == 404
