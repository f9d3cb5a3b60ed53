"""In headless Chromium over `prisma demo`: a clinical researcher creates "every confirmed
bronchiolitis, not the suspected ones" from the New-concept form: a probe on the demo's SAE run (it
has segment codes), the two labels ticked, read only on the clauses that say `bronchiolit`. A
one-letter segment word is refused beside its field and nothing is stored; corrected, the form
lands on the new concept's page with its held-out F1 and the words-alone baselines, TF-IDF on the
same clauses among them."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import shot
from tests.browser.test_dashboard_embedding import login
from tests.live import HTTP

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NAME = "Confirmed bronchiolitis, not suspected (from the form)"


def concept_names(url: str, key: str) -> list[str]:
    items = HTTP.get(f"{url}/api/v1/concepts", headers={"Authorization": f"Bearer {key}"}, timeout=60).json()["items"]
    return [c["name"] for c in items]


def test_create_a_scoped_probe_from_the_form(page, demo) -> None:  # noqa: ANN001
    url, key = demo.url, demo.key
    before = concept_names(url, key)
    login(page, url, key)
    page.goto(f"{url}/concepts")
    page.get_by_role("link", name="New concept").click()
    page.wait_for_url(f"{url}/concepts/new")
    run = page.locator("#sae_run_id option:checked").inner_text()
    assert run.startswith(f"SAE run {demo.concepts[0]['sae_run_id']} ·") and run.endswith("segment codes")
    assert not page.locator("#expression").is_visible()  # a probe by default: the expression box is hidden

    page.fill("#name", NAME)
    page.fill("#description", "Every confirmed bronchiolitis, not the suspected ones")
    page.get_by_label("positive: bronchiolitis:confirmed").check()
    page.get_by_label("negative: bronchiolitis:suspected").check()
    hint = page.locator("#segment_words-help").inner_text()
    assert "the word finds the mention, the features read its status" in hint
    page.fill("#segment_words", "bronchiolit, s")
    page.click("#concept-form button[type=submit]")
    error = page.locator("#segment_words-error")
    error.wait_for()
    assert "segment_words, item 2" in error.inner_text() and "at least 2 characters" in error.inner_text()
    assert page.locator("#segment_words").get_attribute("aria-invalid") == "true"
    assert page.locator("#name").input_value() == NAME  # what was typed is kept ...
    assert page.get_by_label("positive: bronchiolitis:confirmed").is_checked()
    assert concept_names(url, key) == before  # ... and nothing was stored
    page.console_errors.clear()  # the refused request's 422, shown in the page as intended

    page.fill("#words_regex", "sospett|esclus")  # the user's own rule: a hedge word rules it out
    page.select_option("#words_regex_match", "negative")
    page.fill("#segment_words", "bronchiolit")
    page.locator("#segment_words").scroll_into_view_if_needed()
    shot(page, "concept-form")
    page.click("#concept-form button[type=submit]")
    page.wait_for_url(re.compile(r"/concepts/\d+$"), timeout=300_000)  # the probe trains within the request
    assert page.locator("h1").inner_text().startswith(NAME)
    assert re.fullmatch(r"[01]\.\d{3}", page.locator("#metrics tr:has(th:text-is('F1')) td").inner_text())
    assert " ".join(page.locator("#segment-scope").inner_text().split()).startswith(
        "Reads the segments that contain bronchiolit")
    baselines = page.locator("#baselines tbody tr")
    assert baselines.count() == 6  # this concept, the keyword regex, the user's regex, TF-IDF, dense vectors,
    # TF-IDF on the clauses
    own = " ".join(page.locator("#baseline-words-regex th").text_content().split())
    assert own == "Your regex sospett|esclus (a match predicts negative)", own
    assert re.fullmatch(r"[01]\.\d{3}", page.locator("#baseline-words-regex td.num:not(.vs)").nth(2).inner_text())
    assert "bronchioli" in page.locator("#baselines code").first.text_content()  # th is upper-cased by CSS
    figures = page.locator("#baseline-segments td.num:not(.vs)").all_inner_texts()
    assert len(figures) == 3 and all(re.fullmatch(r"[01]\.\d{3}", t) for t in figures), figures
    shot(page, "concept-from-form")
    assert concept_names(url, key).count(NAME) == 1
    assert page.console_errors == []
