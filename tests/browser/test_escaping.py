"""HTML injection: document texts, a feature label, a family label and a concept name that carry
markup are shown as text on every page that shows them — nothing they contain runs or renders."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from gateway.demo.corpus import generate_notes
from tests.browser.conftest import settled, shot
from tests.browser.test_dashboard_embedding import login
from tests.live import create_key, import_random_vectors, live_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
N_NOTES = 120

DOC_MARKUP = '<script>window.__xss = "doc-script"</script><img src="x" class="xss" onerror="window.__xss = \'doc-img\'">'
LABEL_MARKUP = '<img src="x" class="xss" onerror="window.__xss = \'label\'">wheeze<script>window.__xss = "label-script"</script>'
FAMILY_MARKUP = '<b class="xss">family</b><svg onload="window.__xss = \'family\'"></svg>'
CONCEPT_MARKUP = '<i class="xss">concept</i><img src="x" onerror="window.__xss = \'concept\'">'


def wait(client: httpx.Client, path: str, timeout: float = 240) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(path).json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            assert body["status"] == "succeeded", body
            return body
        time.sleep(0.5)
    raise TimeoutError(path)


def corpus_csv() -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text", "labels"])
    for i, note in enumerate(generate_notes(n=N_NOTES, seed=11)):
        w.writerow([note.id, (DOC_MARKUP + " " if i % 2 == 0 else "") + note.text, "|".join(note.labels)])
    return buf.getvalue().encode()


def pipeline(url: str, key: str, data: Path) -> dict[str, int]:
    """Dataset → embedding run (imported vectors) → small SAE; then markup written as a feature's and a family's label
    (as a language model could answer) and as a concept's name."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        ds = c.post("/api/v1/datasets", files={"file": ("notes.csv", corpus_csv())}).json()
        emb = import_random_vectors(c, url, {}, ds["id"], N_NOTES)  # what is tested is the pages, not embedding
        config = {"expansion_factor": 2, "k": 8, "max_steps": 80, "batch_size": 64}
        (sae,) = c.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": config}).json()
        wait(c, f"/api/v1/sae-runs/{sae['id']}")
        feature = c.get(f"/api/v1/sae-runs/{sae['id']}/features?sort=density&limit=1").json()["items"][0]["index"]
        engine = create_engine(f"sqlite:///{data / 'prisma.db'}")
        with engine.begin() as conn:
            fid = conn.execute(text("SELECT id FROM features WHERE sae_run_id = :s AND \"index\" = :i"),
                               {"s": sae["id"], "i": feature}).scalar_one()
            conn.execute(text("INSERT INTO interpretations (feature_id, backend, label, description, score, "
                              "score_embedding, reliable, evidence, created_at) VALUES (:f, 'ollama', :l, :l, 0.9, "
                              "0.9, 1, '{}', CURRENT_TIMESTAMP)"), {"f": fid, "l": LABEL_MARKUP})
            conn.execute(text("UPDATE features SET best_interpretation_id = (SELECT max(id) FROM interpretations "
                              "WHERE feature_id = :f) WHERE id = :f"), {"f": fid})
            conn.execute(text("UPDATE families SET label = :l WHERE sae_run_id = :s"), {"l": FAMILY_MARKUP, "s": sae["id"]})
        engine.dispose()
        concept = c.post("/api/v1/concepts", json={"sae_run_id": sae["id"], "name": CONCEPT_MARKUP,
                                                   "kind": "expression", "expression": f"F{feature}"})
        assert concept.status_code == 201, concept.text
        first = c.get(f"/api/v1/datasets/{ds['id']}/documents?limit=1").json()["items"][0]  # with DOC_MARKUP
    return {"dataset": ds["id"], "embedding": emb["id"], "sae": sae["id"], "feature": feature,
            "concept": concept.json()["id"], "document": first["id"]}


def test_markup_is_shown_as_text_on_every_page(page, tmp_path: Path) -> None:  # noqa: ANN001
    data = tmp_path / "data"
    with live_server(data) as (url, _):
        key = create_key(data, "browser")
        ids = pipeline(url, key, data)
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        login(page, url, key)
        sae, feat = ids["sae"], ids["feature"]
        pages = {  # path → the markup it must show as text
            f"/datasets/{ids['dataset']}": DOC_MARKUP,
            f"/embedding-runs/{ids['embedding']}": None,
            f"/sae-runs/{sae}": None,
            f"/sae-runs/{sae}/features": LABEL_MARKUP,
            f"/sae-runs/{sae}/features/{feat}": LABEL_MARKUP,
            f"/sae-runs/{sae}/families": FAMILY_MARKUP,
            f"/sae-runs/{sae}/search?q=F{feat}": DOC_MARKUP,
            f"/sae-runs/{sae}/search?mode=label&q=wheeze": LABEL_MARKUP,
            f"/sae-runs/{sae}/documents/{ids['document']}": DOC_MARKUP,
            f"/sae-runs/{sae}/documents/{ids['document']}?feature={feat}": LABEL_MARKUP,  # the marked feature's name
            "/concepts": CONCEPT_MARKUP,
            f"/concepts/{ids['concept']}": CONCEPT_MARKUP,
        }
        for path, shown in pages.items():
            resp = page.goto(url + path)
            assert resp is not None and resp.status == 200, path
            settled(page)  # HTMX fragments (the feature's documents) too
            assert page.evaluate("window.__xss") is None, path
            assert page.locator(".xss").count() == 0, path  # no element made from the markup
            assert page.locator('img[src="x"]').count() == 0, path
            if shown is not None:
                assert shown in page.locator("main").inner_text(), path
            name = re.sub(r"\W+", "-", path.strip("/"))[:60]
            if path.endswith(f"/features/{feat}"):
                assert DOC_MARKUP in page.locator("#feature-examples").inner_text()
                shot(page, f"escaping-{name}")
        assert dialogs == []
        assert page.console_errors == []
