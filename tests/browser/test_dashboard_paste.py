"""In headless Chromium over `prisma demo`: paste a note on the SAE run's page and read its clauses marked with the
run's named features; try the same note on the demo's probe and read its decision, the probability beside the
threshold and the features that pushed it there."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import shot
from tests.browser.test_dashboard_embedding import login
from tests.browser.test_demo_tour import readme_shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NOTE = ("Bambino di 8 mesi, tosse da tre giorni. Bronchiolite confermata, saturazione 93%. "
        "Non febbre. <b>Sospetta</b> otite, da rivalutare.")


def test_paste_a_note_on_the_run_and_try_it_on_the_probe(page, demo) -> None:  # noqa: ANN001
    url, key = demo.url, demo.key
    probe = next(c for c in demo.concepts if c["name"] == "Confirmed bronchiolitis (probe)")
    login(page, url, key)

    page.goto(f"{url}/sae-runs/{probe['sae_run_id']}")
    page.fill("#paste-text", NOTE)
    page.get_by_role("button", name="Read it").click()
    page.wait_for_selector("#paste-result mark.drive")
    marks = page.locator("#paste-result mark.drive").all_inner_texts()
    assert marks and all(m.strip() in NOTE for m in marks)  # the clauses, as the note's own text
    assert page.locator("#paste-result b").count() == 0 and "<b>Sospetta</b>" in page.locator("#paste-result").inner_text()
    assert page.locator("#paste-features tbody tr").count() >= 1
    assert page.locator("#paste-result .drive-name").count() >= 1  # names beside the marked clauses
    page.locator("#paste-h").scroll_into_view_if_needed()
    shot(page, "paste-run")

    page.goto(f"{url}/concepts/{probe['id']}")
    page.fill("#paste-text", NOTE)
    page.get_by_role("button", name="Decide").click()
    page.wait_for_selector("#paste-result .paste-decision")
    decision = page.locator("#paste-result .paste-decision").inner_text()
    assert re.match(r"(Yes|No) · probability [01]\.\d{3} against its threshold 0\.5", decision), decision
    pushes = [float(t) for t in page.locator("#paste-features tbody tr td:last-child").all_inner_texts()]
    assert pushes and all((p > 0) == decision.startswith("Yes") for p in pushes)
    page.locator("#try-h").scroll_into_view_if_needed()
    readme_shot(page, "paste-a-note")
