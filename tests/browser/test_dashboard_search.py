"""In headless Chromium: the search page of a trained, named SAE run. A wrong expression is marked
at its column with the caret put there; name completion offers labels; a valid expression lists
documents with the matching features highlighted; the URL is shareable; text and label modes."""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.browser.conftest import shot
from tests.browser.test_dashboard_embedding import login
from tests.live import HTTP

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def typable_word(label: str | None) -> str | None:
    """A word of the label a user types to complete it: it starts with a letter (a typed number is an operand,
    "2 giorni" completes from "giorni"), three letters at least, not AND/OR/NOT."""
    return next((w for w in re.findall(r"\w+", label or "")
                 if w[0].isalpha() and len(w) >= 3 and w.upper() not in ("AND", "OR", "NOT")), None)


def suggest_after_typing(page, text: str):  # noqa: ANN001, ANN201
    """Type `text` into the box; the completion's answer for the box's value then (HTMX asks 250 ms
    after the last key), once it is swapped in."""
    answers: list = []
    listener = lambda r: "/search/suggest?" in r.url and answers.append(r)  # noqa: E731
    page.on("response", listener)
    try:
        page.type("#q", text, delay=30)
        value = page.input_value("#q")
        deadline = time.monotonic() + 60
        while not any(parse_qs(urlsplit(a.url).query).get("q", [""])[0] == value for a in answers):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no completion was asked for {value!r}: {[a.url for a in answers]}")
            page.wait_for_timeout(50)
    finally:
        page.remove_listener("response", listener)
    settled(page)
    return next(a for a in answers if parse_qs(urlsplit(a.url).query).get("q", [""])[0] == value)


def settled(page) -> None:  # noqa: ANN001
    """Wait until no HTMX request is in flight, swapping or settling (page.evaluate: a wait_for_function
    string is eval, which the CSP refuses)."""
    deadline = time.monotonic() + 30
    while page.evaluate("!!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"):
        if time.monotonic() > deadline:
            raise TimeoutError("an HTMX answer was not swapped in")
        page.wait_for_timeout(20)


def test_search_page(page, demo) -> None:  # noqa: ANN001
    """On the shared demo's SAE run, whose features the demo named."""
    url, key = demo.url, demo.key
    run_id = demo.concepts[0]["sae_run_id"]
    h = {"Authorization": f"Bearer {key}"}
    named = HTTP.get(f"{url}/api/v1/sae-runs/{run_id}/features?sort=density&reliability=reliable&limit=50",
                      headers=h).json()["items"] or HTTP.get(
        f"{url}/api/v1/sae-runs/{run_id}/features?sort=density&limit=50", headers=h).json()["items"]
    feat = next(f for f in named if typable_word(f["label"]))
    login(page, url, key)
    page.goto(f"{url}/sae-runs/{run_id}")
    page.get_by_role("link", name="Search").click()
    page.wait_for_url(f"{url}/sae-runs/{run_id}/search")

    # the examples under the box are written from this run's names (the demo has clauses: within one segment);
    # following the first lists documents, not an unknown name
    example = page.locator("#q-help a").first
    assert example.inner_text().startswith('SEGMENT(label:"'), example.inner_text()
    example.click()
    page.wait_for_selector("#document-results")
    assert re.search(r"[\d,]+ documents? match", page.locator(".summary").inner_text())
    page.goto(f"{url}/sae-runs/{run_id}/search")

    # a wrong expression: the message, the column marked, the caret on it
    wrong = f"F{feat['index']} AND (F1 OR"
    page.fill("#q", wrong)
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector("#search-results mark.err-at")
    settled(page)  # the error's arrival puts the caret on it
    assert "ends too early" in page.locator(".search-error").inner_text()
    assert f"column {len(wrong) + 1}" in page.locator(".search-error").inner_text()
    caret = page.evaluate("document.getElementById('q').selectionStart")
    assert caret == int(page.locator("mark.err-at").get_attribute("data-offset"))
    shot(page, "search-error")
    page.console_errors.clear()  # the browser logs the expected 422 of that request

    # completion: a word of a label becomes label:"…" options in the datalist
    word = typable_word(feat["label"])
    page.fill("#q", "")
    typed = suggest_after_typing(page, word[:4])
    assert typed.status == 200 and "<option" in typed.text(), (word, typed.status, typed.text()[:300])
    page.wait_for_selector("#feature-names option", state="attached")  # (a string predicate is eval: the CSP refuses it)
    values = page.eval_on_selector_all("#feature-names option", "os => os.map(o => o.value)")
    assert all(v.startswith('label:"') for v in values) and any(word[:4].lower() in v.lower() for v in values)

    # with an error shown mid-expression, options arriving while the user types at the end leave the
    # caret there: the next keystroke lands at the end, not on the marked character
    page.keyboard.press("Escape")
    middle = f"F{feat['index']} AND AND F1"
    page.fill("#q", middle)
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector("#search-results mark.err-at")
    settled(page)  # the error's arrival puts the caret on it
    page.console_errors.clear()
    page.focus("#q")
    page.keyboard.press("End")
    assert suggest_after_typing(page, f" OR {word[:4]}").status == 200
    page.wait_for_selector("#feature-names option", state="attached")
    page.type("#q", "x")
    assert page.input_value("#q") == f"{middle} OR {word[:4]}x", page.input_value("#q")

    # a valid expression: documents, the feature highlighted with its label, a shareable URL
    # Close the datalist's popup first: with it open, Chromium may insert the filled text at
    # the caret instead of replacing the value (seen once: "bronF77").
    page.keyboard.press("Escape")
    page.fill("#q", "")
    page.fill("#q", f"F{feat['index']}")
    assert page.input_value("#q") == f"F{feat['index']}"
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector("#document-results")
    assert re.search(r"[\d,]+ documents? match", page.locator(".summary").inner_text())
    chip = page.locator("#document-results .chip").first
    assert chip.inner_text().startswith(f"F{feat['index']}") and feat["label"] in chip.inner_text()
    assert "q=F" in page.url and "mode=expression" in page.url
    shot(page, "search-expression")
    page.goto(f"{url}/sae-runs/{run_id}/search?q={quote('F' + str(feat['index']) + ' > 0')}")
    assert page.locator("#document-results tbody tr").count() >= 1

    # a hit opens its document clause by clause, the feature marked on the clauses where it fires (a note's
    # features are the max over its clauses': at least one does)
    external_id = page.locator("#document-results tbody tr").first.locator("td").first.locator(".muted").inner_text()
    page.locator("#document-results tbody tr").first.locator("td").first.get_by_role("link").click()
    page.wait_for_url(re.compile(rf"/sae-runs/{run_id}/documents/\d+\?feature={feat['index']}$"))
    page.wait_for_selector("#segments")
    assert page.locator("h1").inner_text() == external_id
    assert f"F{feat['index']}" in page.locator("#marked").inner_text()
    marked_rows = page.locator("#segments tr.seg-marked")
    assert marked_rows.count() >= 1 and marked_rows.first.locator(".seg-text").inner_text().strip()
    assert page.locator("#segments tbody tr").count() >= marked_rows.count()
    assert page.locator("#segments tbody tr").first.locator(".chip").count() >= 1
    shot(page, "document")
    # another feature's mark link moves the mark to where that one fires
    other = page.locator("#doc-features .chip").nth(1)
    other_index = other.locator("a").first.inner_text()
    other.locator("a.mark-link").click()
    page.wait_for_url(re.compile(rf"\?feature={other_index[1:]}&offset=0$"))
    assert other_index in page.locator("#marked").inner_text() and page.locator("#segments tr.seg-marked").count() >= 1
    page.goto(f"{url}/sae-runs/{run_id}/search")

    # text mode: nearest documents and the query's own named features
    page.check("input[name=mode][value=text]")
    page.fill("#q", "bambino con febbre e tosse da tre giorni")
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector("text=The text's own features")
    assert page.locator("#document-results tbody tr").count() == 20
    # the demo's run has clauses: each note is ranked with its nearest clause, which is marked in its excerpt
    assert "its nearest segment (marked)" in page.locator(".summary").inner_text()
    marks = page.locator("#document-results tbody tr mark").all_inner_texts()
    assert len(marks) == 20 and all(m.strip() for m in marks), marks
    shot(page, "search-text")

    # label mode: one word finds the features named with it; the name's words find that feature
    page.check("input[name=mode][value=label]")
    page.fill("#q", word)
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector("#label-results")
    rows = page.locator("#label-results tbody tr").all_inner_texts()  # label and description
    assert rows and all(word.lower() in row.lower() for row in rows)
    page.fill("#q", " ".join(re.findall(r"\w+", feat["label"])))
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector(f"#label-results a[href$='/features/{feat['index']}']")
    shot(page, "search-label")
    assert page.console_errors == []
