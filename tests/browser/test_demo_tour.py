"""The explorer as a clinical researcher meets it, on the demo pipeline (`prisma demo`, a smaller
corpus): log in, open a feature from the list, see its histogram and documents, open its family,
run an expression search from it, open a concept and export its CSV — every page without console
errors. The README's screenshots (docs/screenshots/) are taken here."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.browser.test_dashboard_embedding import login
from tests.live import PRISMA, REPO_ROOT, free_port, prisma_env

pytestmark = [pytest.mark.browser, pytest.mark.slow]
README_SHOTS = REPO_ROOT / "docs" / "screenshots"


def readme_shot(page, name: str) -> None:  # noqa: ANN001
    """The visible window (what a reader of the README sees first), as docs/screenshots/<name>.png."""
    README_SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(README_SHOTS / f"{name}.png"))


def start_demo(data: Path, log: Path) -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([PRISMA, "demo", "--n", "400", "--port", str(port)], env=prisma_env(data),
                                stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        key = re.search(r"Key\s+(\S+)", text)
        if key:
            url = f"http://127.0.0.1:{port}"
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    return proc, url, key.group(1)
            except httpx.HTTPError:
                pass
        if proc.poll() is not None:
            raise RuntimeError(f"prisma demo exited: {text[-3000:]}")
        time.sleep(0.5)
    proc.kill()
    raise TimeoutError(log.read_text(errors="replace")[-3000:])


def wait_for_concepts(url: str, key: str, timeout: float = 600) -> list[dict]:
    """The demo's chain: embed → SAE → names → two concepts."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as c:
        while time.monotonic() < deadline:
            items = c.get("/api/v1/concepts").json()["items"]
            if len(items) >= 2:
                return items
            failed = [j for j in c.get("/api/v1/jobs").json()["items"] if j["status"] == "failed"]
            assert not failed, failed
            time.sleep(2)
    raise TimeoutError("the demo did not create its concepts")


def test_demo_tour(page, tmp_path: Path) -> None:  # noqa: ANN001
    proc, url, key = start_demo(tmp_path / "data", tmp_path / "demo.log")
    try:
        concepts = wait_for_concepts(url, key)
        tour(page, url, key, concepts)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def tour(page, url: str, key: str, concepts: list[dict]) -> None:  # noqa: ANN001
    login(page, url, key)
    readme_shot(page, "datasets")
    sae = concepts[0]["sae_run_id"]

    page.goto(f"{url}/sae-runs/{sae}")
    assert page.locator("svg.chart path.line").count() == 2 and page.locator("svg.heatmap").count() >= 2
    readme_shot(page, "sae-run")

    # The feature list, best-named first; open the first named feature.
    page.goto(f"{url}/sae-runs/{sae}/features?sort=score")
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

    # A concept: its metrics, then its matches as CSV.
    probe = next(c for c in concepts if c["kind"] == "probe")
    page.goto(f"{url}/concepts")
    page.get_by_role("link", name=probe["name"]).click()
    page.wait_for_url(re.compile(rf"/concepts/{probe['id']}$"))
    assert page.locator("text=Precision").count() >= 1 and page.locator("#weights tbody tr").count() >= 1
    readme_shot(page, "concept")
    if page.locator("#export").count() == 0:
        page.locator("#apply").click()
        page.wait_for_selector("#export", timeout=120_000)
    with page.expect_download() as download:
        page.locator("#export").click()
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert rows[0][:2] == ["document_id", "external_id"] and len(rows) > 1
    assert page.console_errors == []
