"""In real headless Chromium: the API reference page (/api-docs) renders Swagger UI from the server's own
files, lists every operation of the schema, and "Try it out" answers with the caller's data."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.browser.conftest import shot
from tests.live import HTTP, create_key, live_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_api_reference_page_offline_and_tried_out(page, tmp_path: Path) -> None:  # noqa: ANN001
    data = tmp_path / "data"
    with live_server(data) as (url, _):
        key = create_key(data, "docs")
        auth = {"Authorization": f"Bearer {key}"}
        csv = ("id,text\n1,Bronchiolite confermata\n2,Sospetta otite\n").encode()
        made = HTTP.post(f"{url}/api/v1/datasets", headers=auth, files={"file": ("notes.csv", csv)},
                          data={"name": "notes for the docs"}, timeout=60)
        assert made.status_code == 201, made.text
        schema = HTTP.get(f"{url}/api/v1/openapi.json", headers=auth, timeout=30).json()
        operations = sum(1 for ops in schema["paths"].values() for m in ops if m in ("get", "post", "put", "patch",
                                                                                   "delete"))
        hosts: set[str] = set()
        page.on("request", lambda r: hosts.add(urlparse(r.url).netloc))

        page.goto(f"{url}/api-docs")
        assert page.locator("h1").inner_text() == "Log in"  # the page is behind the dashboard's login
        page.console_errors.clear()
        page.fill("#key", key)
        page.click("button[type=submit]")
        page.wait_for_url(f"{url}/api-docs")
        page.wait_for_selector(".opblock")
        assert page.locator(".opblock").count() == operations  # every operation of the schema, none missing
        assert page.locator("button.authorize").count() == 1  # the bearer scheme is declared
        assert hosts == {urlparse(url).netloc}  # Swagger UI's files and the schema from this server only: no CDN
        assert page.console_errors == []  # no script error, no content-security-policy refusal

        listing = page.locator(".opblock-get").filter(has=page.locator('[data-path="/api/v1/datasets"]')).first
        listing.locator(".opblock-summary").click()
        listing.locator("button.try-out__btn").click()
        listing.locator("button.execute").click()
        answered = listing.locator(".live-responses-table tr.response .response-col_status").first
        answered.wait_for()
        assert answered.inner_text().strip() == "200"
        assert "notes for the docs" in listing.locator(".live-responses-table").inner_text()
        assert page.console_errors == []
        shot(page, "api-docs")
