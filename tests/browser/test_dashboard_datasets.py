"""In real headless Chromium: log in with a key, upload the demo corpus, see its documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.demo.corpus import write_csv
from tests.browser.conftest import shot
from tests.live import create_key, live_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_login_upload_demo_corpus_and_browse(page, tmp_path: Path) -> None:  # noqa: ANN001
    data = tmp_path / "data"
    corpus = write_csv(tmp_path / "demo.csv", n=300, seed=1)
    with live_server(data) as (url, _):
        key = create_key(data, "browser")
        page.goto(f"{url}/datasets")
        assert page.locator("h1").inner_text() == "Log in"  # not logged in: the login page
        page.fill("#key", "prisma_wrong_key")
        page.click("button[type=submit]")
        assert "not valid" in page.locator(".error").inner_text()
        page.fill("#key", key)
        page.click("button[type=submit]")
        page.wait_for_url(f"{url}/datasets")
        # Before login the browser reports the login page's deliberate 401s, and nothing else.
        assert all("status of 401" in e for e in page.console_errors), page.console_errors
        page.console_errors.clear()
        shot(page, "datasets-empty")

        # A bad file first: the error names the line, and the form stays usable.
        bad = tmp_path / "bad.csv"
        bad.write_text("id,text\n1,ok\n2,  \n")
        page.set_input_files("#file", str(bad))
        page.click("#upload-form button[type=submit]")
        page.wait_for_selector("#upload-error")
        assert "line 3" in page.locator("#upload-error").inner_text()
        assert all("status of 422" in e for e in page.console_errors), page.console_errors
        page.console_errors.clear()
        shot(page, "upload-error")

        page.set_input_files("#file", str(corpus))
        page.fill("#name", "Demo notes")
        page.click("summary:has-text(\"Column mapping\")")
        page.fill("#label_columns", "labels")
        page.click("#upload-form button[type=submit]")
        page.wait_for_url(f"{url}/datasets/*")
        assert page.locator("h1").inner_text() == "Demo notes"
        dataset_url = page.url
        assert "300" in page.locator(".facts").inner_text()
        rows = page.locator("#documents tbody tr")
        assert rows.count() == 25
        assert "PED-" in rows.first.inner_text()
        assert page.locator(".bars li").count() > 5  # label distribution
        shot(page, "dataset")

        page.click("text=Next →")
        page.wait_for_url("**offset=25")
        assert page.locator("#documents tbody tr").first.locator("td").first.inner_text() == "25"
        page.click("nav[aria-label=Main] >> text=Jobs")
        page.wait_for_url(f"{url}/jobs")
        assert page.locator("h1").inner_text() == "Jobs"
        assert page.console_errors == []

        # Delete it from its page, after a confirmation that says what goes with it.
        page.goto(dataset_url)
        asked: list[str] = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        page.click("#delete-dataset")
        page.wait_for_url(f"{url}/datasets")
        assert asked and "Demo notes" in asked[0] and "300 documents" in asked[0]
        assert "Demo notes" not in page.locator("main").inner_text()
        assert page.goto(dataset_url).status == 404
        assert all("status of 404" in e for e in page.console_errors), page.console_errors
