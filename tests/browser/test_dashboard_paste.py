"""In headless Chromium over `prisma demo`: paste a note on the SAE run's page and read its clauses marked with the
run's named features, a clause hovered showing its own; try the same note on the demo's probe and read its
decision, the probability beside the threshold and the features that pushed it there, on the clauses they fired on."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import shot
from tests.browser.test_dashboard_embedding import login
from tests.browser.test_demo_tour import readme_shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NOTE = ("Trasferito dal PS per tosse e respiro affannoso. Da 3 giorni rinorrea sierosa, poi respiro sibilante. "
        "Non febbre.\nEO: Rientramenti sottocostali. Sibili espiratori diffusi. MV ridotto alle basi.\n"
        "Accertamenti: Tampone nasofaringeo: RSV positivo.\nDx: bronchiolite acuta confermata. "
        "<b>Sospetta</b> otite, da rivalutare.\nTp: lavaggi nasali con soluzione fisiologica.")


def top_of(page, selector: str) -> None:  # noqa: ANN001
    page.locator(selector).evaluate("el => el.scrollIntoView({block: 'start'})")


def test_paste_a_note_on_the_run_and_try_it_on_the_probe(page, demo) -> None:  # noqa: ANN001
    url, key = demo.url, demo.key
    probe = next(c for c in demo.concepts if c["name"] == "Confirmed bronchiolitis (probe)")
    login(page, url, key)

    page.goto(f"{url}/sae-runs/{probe['sae_run_id']}")
    page.fill("#paste-text", NOTE)
    page.get_by_role("button", name="Read it").click()
    page.wait_for_selector("#paste-result mark.paste-clause")
    marks = page.locator("#paste-result mark.paste-clause")
    assert marks.count() >= 2 and all(m.strip() in NOTE for m in marks.all_inner_texts())  # the note's own text
    assert page.locator("#paste-result b").count() == 0 and "<b>Sospetta</b>" in page.locator("#paste-result").inner_text()
    assert page.locator("#paste-features tbody tr").count() >= 1
    assert page.locator("#paste-result .drive-name").count() >= 1  # names beside the marked clauses
    assert page.locator(".clause-panel:visible").count() == 1  # the first clause's features, until another is hovered
    last = marks.nth(marks.count() - 1)
    last.hover()
    panel = page.locator(".clause-panel:visible")
    assert panel.count() == 1 and panel.get_attribute("id") == f"paste-clause-{last.get_attribute('data-clause')}"
    assert panel.locator("tbody tr").count() >= 1 and "is-active" in (last.get_attribute("class") or "")
    top_of(page, "#paste-h")
    shot(page, "paste-run")

    page.goto(f"{url}/concepts/{probe['id']}")
    page.fill("#paste-text", NOTE)
    page.get_by_role("button", name="Decide").click()
    page.wait_for_selector("#paste-result .paste-decision")
    decision = page.locator("#paste-result .paste-decision").inner_text()
    assert re.match(r"(Yes|No) · probability [01]\.\d{3} against its threshold 0\.5", decision), decision
    pushes = [float(t) for t in page.locator("#paste-features tbody tr td:last-child").all_inner_texts()]
    assert pushes and all((p > 0) == decision.startswith("Yes") for p in pushes)
    assert page.locator("#paste-result mark.paste-clause").count() >= 1  # where the evidence fired
    assert not page.console_errors, page.console_errors
    top_of(page, "#try-h")
    readme_shot(page, "paste-a-note")
