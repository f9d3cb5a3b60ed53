"""Inputs and answers with an upper bound: run settings past a generous cap are a 422 naming the field,
a document listing cuts long texts (and says so), an SAE zip that expands like a zip bomb is refused."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from gateway.api.v1.datasets import LISTING_TEXT_CHARS
from gateway.db import session_scope
from gateway.domain.runs.sae_import import MAX_COMPRESSION_RATIO
from tests.factories import add_succeeded_embedding_run

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]


async def test_run_settings_have_upper_bounds(client, auth) -> None:  # noqa: ANN001
    cases = [
        ("/api/v1/sae-runs", {"embedding_run_id": 1, "config": {"epochs": 10**9}}, "body.config.epochs"),
        ("/api/v1/sae-runs", {"embedding_run_id": 1, "config": {"max_steps": 10**12}}, "body.config.max_steps"),
        ("/api/v1/sae-runs", {"embedding_run_id": 1, "sweep": [{"k": 8}, {"batch_size": 10**8}]},
         "body.sweep.1.batch_size"),
        ("/api/v1/sae-runs", {"embedding_run_id": 1, "config": {"seed": 2**70}}, "body.config.seed"),
        ("/api/v1/sae-runs", {"embedding_run_id": 1, "stats": {"block_latents": 10**9}}, "body.stats.block_latents"),
        ("/api/v1/embedding-runs", {"dataset_id": 1, "shard_size": 10**9}, "body.shard_size"),
        ("/api/v1/embedding-runs", {"dataset_id": 1, "max_length": 10**7}, "body.max_length"),
        ("/api/v1/embedding-runs", {"dataset_id": 1, "model": "m" * 301}, "body.model"),
    ]
    for path, body, field in cases:
        resp = await client.post(path, json=body, headers=auth)
        assert resp.status_code == 422, (field, resp.text)
        message = resp.json()["message"]
        assert resp.json()["field"] == field and ("less than or equal" in message or "at most" in message), message


async def test_document_listing_cuts_long_texts(client, auth) -> None:  # noqa: ANN001
    long_text = "paziente " * (LISTING_TEXT_CHARS // 4)  # twice the listing's cap
    body = json.dumps({"id": "long", "text": long_text}) + "\n" + json.dumps({"id": "short", "text": "breve"}) + "\n"
    ds = await client.post("/api/v1/datasets", files={"file": ("d.jsonl", body.encode())}, headers=auth)
    assert ds.status_code == 201, ds.text
    page = (await client.get(f"/api/v1/datasets/{ds.json()['id']}/documents", headers=auth)).json()
    assert page["text_chars"] == LISTING_TEXT_CHARS
    long_doc, short = page["items"]
    assert long_doc["truncated"] is True and long_doc["text"] == long_text[:LISTING_TEXT_CHARS]
    assert long_doc["n_chars"] == len(long_text)
    assert short["truncated"] is False and short["text"] == "breve"
    whole = (await client.get(f"/api/v1/datasets/{ds.json()['id']}/documents/{long_doc['id']}", headers=auth)).json()
    assert whole["text"] == long_text and whole["truncated"] is False


async def test_sae_zip_bomb_is_refused(app, client, auth) -> None:  # noqa: ANN001
    ds = await client.post("/api/v1/datasets", files={"file": ("d.csv", b"text\nuna nota\n")}, headers=auth)
    with session_scope(app.state.factory) as session:
        emb_id = add_succeeded_embedding_run(session, dataset_id=ds.json()["id"], dim=4, n_documents=1).id
    cfg = {"activation": "topk", "num_latents": 8, "k": 2, "d_in": 4}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("cfg.json", json.dumps(cfg))
        zf.writestr("sae.safetensors", bytes(20 << 20))  # 20 MB of zeros: about 20 kB zipped
    resp = await client.post("/api/v1/sae-runs/import", headers=auth, files={"file": ("bomb.zip", buf.getvalue())},
                             data={"embedding_run_id": str(emb_id)})
    assert resp.status_code == 422, resp.text
    assert resp.json()["field"] == "file" and f"limit of {MAX_COMPRESSION_RATIO}×" in resp.json()["detail"]
    assert "compression ratio" in resp.json()["detail"]
    assert (await client.get("/api/v1/sae-runs", headers=auth)).json()["total"] == 0
    assert not app.state.store.list("sae-runs")
