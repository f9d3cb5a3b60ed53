"""The explorer as a clinical researcher meets it, on the demo pipeline (`prisma demo`, a smaller
corpus, started once per session: the `demo` fixture): log in, open a feature from the list, see
its histogram and documents, open its family, run an expression search from it, fill the
New-concept form, open a concept and export its CSV — every page without console errors. The
README's screenshots are taken here: into docs/screenshots/ by `make screenshots`, into a temporary
folder otherwise (the suite leaves the work tree as it found it)."""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from functools import cache
from pathlib import Path
from urllib.parse import quote

import pytest

from gateway.domain.concepts.demo import LABELLING_NAME
from tests.browser.test_dashboard_embedding import login
from tests.live import HTTP

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@cache
def readme_shots() -> Path:
    """PRISMA_README_SCREENSHOTS (`make screenshots`: docs/screenshots), else a temporary folder."""
    named = os.environ.get("PRISMA_README_SCREENSHOTS")
    return Path(named) if named else Path(tempfile.mkdtemp(prefix="prisma-readme-screenshots-"))


def readme_shot(page, name: str) -> None:  # noqa: ANN001
    """The visible window (what a reader of the README sees first), as <readme_shots()>/<name>.png."""
    readme_shots().mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(readme_shots() / f"{name}.png"))


def test_demo_tour(page, demo) -> None:  # noqa: ANN001
    tour(page, demo.url, demo.key, demo.concepts)


def tour(page, url: str, key: str, concepts: list[dict]) -> None:  # noqa: ANN001
    login(page, url, key)
    readme_shot(page, "datasets")
    sae = concepts[0]["sae_run_id"]

    page.goto(f"{url}/sae-runs/{sae}")
    assert page.locator("svg.chart path.line").count() == 2 and page.locator("svg.heatmap").count() >= 2
    readme_shot(page, "sae-run")

    # The feature list, best-named first; open the first named feature.
    page.goto(f"{url}/sae-runs/{sae}/features?sort=score")
    shown = page.locator("#features tbody tr td:nth-child(2)")
    kinds = [("ok" if shown.nth(i).locator(".label-ok").count() else "other") for i in range(shown.count())]
    assert kinds[0] == "ok" and kinds == sorted(kinds)  # reliable names first, never after an unreliable one
    readme_shot(page, "features")
    page.locator("#features tbody tr").filter(has=page.locator(".label-ok")).first.locator("a").first.click()
    page.wait_for_url(re.compile(r"/features/\d+$"))
    index = int(page.url.rsplit("/", 1)[1])
    assert page.locator("#hist-h").is_visible() and page.locator("svg.chart rect").count() >= 1
    page.wait_for_selector("#feature-examples ol.examples li .excerpt")
    assert page.locator("#feature-examples ol.examples:not(.near-misses) > li").count() >= 4
    readme_shot(page, "feature")

    # Its family, on the families page.
    family_link = page.locator(".mini-family a").first
    if family_link.count():
        family_link.click()
        page.wait_for_url(re.compile(r"/families\?family=\d+#family-\d+$"))
        anchor = page.url.rsplit("#", 1)[1]
        assert page.locator(f"#{anchor}").is_visible()
        assert page.locator(f"#{anchor} > details").get_attribute("open") is not None
        readme_shot(page, "families")
        page.go_back()

    # An expression search from the feature.
    page.get_by_role("link", name=f"Search documents with F{index}").click()
    page.wait_for_url(re.compile(rf"/search\?q=F{index}$"))
    page.wait_for_selector("#search-results")
    assert re.search(r"\d", page.locator("#search-results").inner_text())
    readme_shot(page, "search")

    # The New-concept form as a researcher fills it (only pictured here; the form's own test submits one).
    page.goto(f"{url}/concepts/new?sae_run_id={sae}")
    page.fill("#name", "Confirmed bronchiolitis, not suspected")
    page.get_by_label("positive: bronchiolitis:confirmed").check()
    page.get_by_label("negative: bronchiolitis:suspected").check()
    page.fill("#segment_words", "bronchiolit")
    kind_box = page.locator("fieldset.kinds").bounding_box()  # in the viewport: from the kind to the segment hint
    page.evaluate(f"window.scrollBy(0, {kind_box['y'] - 12})")
    readme_shot(page, "concept-form")

    # The probe concepts (the README's picture: the last, the probe on the clauses that name
    # bronchiolitis), then the saved expression's matches as CSV.
    evaluated = [c for c in concepts if c["name"] != LABELLING_NAME]  # the one to label has no labels yet
    for concept in sorted(evaluated, key=lambda c: (c["kind"] != "probe", c["name"].endswith("(probe on its clauses)"))):
        page.goto(f"{url}/concepts")
        page.get_by_role("link", name=concept["name"]).click()
        page.wait_for_url(re.compile(rf"/concepts/{concept['id']}$"))
        assert page.locator("text=Precision").count() >= 1
        if concept["kind"] == "probe":
            assert page.locator("#weights tbody tr").count() >= 1
            readme_shot(page, "concept")
    page.locator("#apply").click()  # the concepts test applies the probe, never the expression
    page.wait_for_selector("#export", timeout=120_000)  # live progress until the job is done
    with page.expect_download() as download:
        page.locator("#export").click()
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert rows[0][:2] == ["document_id", "external_id"] and len(rows) > 1

    # The saved expression is scoped to one segment (a clause): the API says which segment of each
    # note matched, and the search page marks that segment.
    h = {"Authorization": f"Bearer {key}"}
    (expr_id,) = [c["id"] for c in concepts if c["kind"] == "expression"]
    expr = HTTP.get(f"{url}/api/v1/concepts/{expr_id}", headers=h, timeout=60).json()
    assert expr["expression"].startswith("SEGMENT(")
    hits = HTTP.post(f"{url}/api/v1/sae-runs/{sae}/search", headers=h,
                      json={"mode": "expression", "expression": expr["expression"]}, timeout=60).json()["items"]
    assert hits and all(h["segment"] and h["segment"]["start"] < h["segment"]["end"] for h in hits)
    first, seg = hits[0], hits[0]["segment"]
    sentence = first["excerpt"][seg["start"] - first["excerpt_start"]:seg["end"] - first["excerpt_start"]]
    page.goto(f"{url}/sae-runs/{sae}/search?q={quote(expr['expression'])}")
    marked = page.locator("#document-results tbody tr").first.locator("mark")
    assert " ".join(marked.inner_text().split()) == " ".join(sentence.split()) != ""
    # every row shows its matched segment inside the text cell's clipped box, not below it
    def marks_shown() -> None:
        """Each mark inside its cell's clipped box (the page scrolls it there), or, one taller than the box, its start
        at the box's top."""
        boxes = page.locator("#document-results tbody tr .doc-text").evaluate_all(
            "cells => cells.map(c => [c.getBoundingClientRect().top, c.getBoundingClientRect().bottom,"
            " c.querySelector('mark') && c.querySelector('mark').getBoundingClientRect().top,"
            " c.querySelector('mark') && c.querySelector('mark').getBoundingClientRect().bottom])")
        assert boxes and all(mark_bottom is not None and top - 1 <= mark_top
                             and (mark_bottom <= bottom + 1 or mark_top <= top + 1)
                             for top, bottom, mark_top, mark_bottom in boxes), boxes

    marks_shown()
    readme_shot(page, "search-segment")
    size = page.viewport_size
    page.set_viewport_size({"width": 760, "height": size["height"]})  # a narrow window: long lines wrap more
    page.wait_for_timeout(200)  # the resize's handler has run
    marks_shown()
    page.set_viewport_size(size)

    # the first hit opens its note clause by clause, its first matching feature marked: the matched clause is
    # among the clauses shaded
    page.locator("#document-results tbody tr").first.locator("td").first.get_by_role("link").click()
    page.wait_for_selector("#segments")
    shaded = [" ".join(t.split()) for t in page.locator("#segments tr.seg-marked .seg-text").all_inner_texts()]
    assert " ".join(sentence.split()) in shaded, (sentence, shaded)
    readme_shot(page, "document")
    assert page.console_errors == []
