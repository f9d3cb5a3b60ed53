"""In headless Chromium: the feature page's Re-interpret button names the feature now (HTMX, no
reload): the new name appears with its held-out score, and the label at the top of the page
becomes the feature's best name."""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import shot
from tests.browser.test_dashboard_embedding import login
from tests.browser.test_dashboard_sae import demo_embedding_run
from tests.live import HTTP

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SMALL = {"expansion_factor": 2, "k": 8, "max_steps": 60, "batch_size": 64}


def trained_sae(url: str, key: str, embedding_run_id: int) -> dict:
    h = {"Authorization": f"Bearer {key}"}
    (run,) = HTTP.post(f"{url}/api/v1/sae-runs", headers=h, json={"embedding_run_id": embedding_run_id,
                                                                    "config": SMALL}).json()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        run = HTTP.get(f"{url}/api/v1/sae-runs/{run['id']}", headers=h).json()
        if run["status"] in ("succeeded", "failed"):
            assert run["status"] == "succeeded", run
            return run
        time.sleep(0.5)
    raise TimeoutError(run)


def test_reinterpret_button_shows_the_new_name_without_reload(page, demo) -> None:  # noqa: ANN001
    """On a small new SAE of the shared demo's embedding run: its features are not named yet."""
    url, key = demo.url, demo.key
    run = trained_sae(url, key, demo_embedding_run(demo))
    h = {"Authorization": f"Bearer {key}"}
    index = HTTP.get(f"{url}/api/v1/sae-runs/{run['id']}/features?sort=density&limit=1", headers=h).json()["items"][0]["index"]
    login(page, url, key)
    page.goto(f"{url}/sae-runs/{run['id']}/features/{index}")
    assert page.locator("#feature-label .badge-none").inner_text() == "not named yet"
    page.evaluate("window.__same_page = true")  # lost if the page reloads
    page.select_option("#reinterpret-backend", "keywords")
    page.get_by_role("button", name="Re-interpret").click()
    page.wait_for_selector("#reinterpret-result .new-label", timeout=120_000)
    label = page.locator("#reinterpret-result .new-label").first.inner_text()
    assert label and "held-out score" in page.locator("#reinterpret-result").inner_text()
    assert page.evaluate("window.__same_page") is True
    shown = page.locator("#feature-label")  # swapped out of band: the best name, with its reliability
    assert label in shown.inner_text() and shown.locator(".label-ok, .label-unreliable").count() == 1
    stored = HTTP.get(f"{url}/api/v1/sae-runs/{run['id']}/features/{index}/interpretations", headers=h).json()
    assert [i["label"] for i in stored] == [label]
    shot(page, "feature-reinterpreted")

    page.get_by_role("button", name="Re-interpret").click()  # again: a second name, best-of-n shown
    deadline = time.monotonic() + 60
    while len(stored) < 2 and time.monotonic() < deadline:
        stored = HTTP.get(f"{url}/api/v1/sae-runs/{run['id']}/features/{index}/interpretations", headers=h).json()
        time.sleep(0.2)
    assert len(stored) == 2
    page.reload()
    assert page.locator("#int-h").is_visible() and page.locator("#int-h ~ table tbody tr").count() == 2
    best = max(stored, key=lambda i: i["score"])  # what the score rests on, as stored
    ev = best["evidence"]
    assert page.locator("#scored-on").inner_text() == (
        f"{len(ev['holdout_activating'])} activating + {len(ev['holdout_non_activating'])} other held-out documents")
    assert page.console_errors == []

    # A wrong CSRF token is refused (no name added).
    status = page.evaluate("""async (path) => (await fetch(path, {method: 'POST',
        headers: {'Content-Type': 'application/x-www-form-urlencoded'},
        body: 'backend=keywords&csrf_token=wrong'})).status""",
                           f"/sae-runs/{run['id']}/features/{index}/reinterpret")
    assert status == 403
