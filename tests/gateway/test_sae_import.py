"""Importing an SAE trained elsewhere: EleutherAI sparsify's folder (cfg.json + sae.safetensors)
as a zip, analysed on an embedding run without training; bad uploads refused, nothing started."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from tests.gateway.polling import wait_done
from tests.gateway.shared_runs import embedding_run  # noqa: F401 - fixture

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
D, N, K = 384, 768, 8


def sparsify_folder_zip(d: int = D, n: int = N, k: int = K, *, drop: str | None = None, folder: str = "layers.0") -> bytes:
    """What sparsify's SparseCoder.save_to_disk writes, zipped: cfg.json + sae.safetensors."""
    g = torch.Generator().manual_seed(0)
    w_dec = torch.randn(n, d, generator=g)
    w_dec /= w_dec.norm(dim=1, keepdim=True)
    tensors = {"encoder.weight": w_dec.clone(), "encoder.bias": torch.zeros(n), "W_dec": w_dec, "b_dec": torch.zeros(d)}
    cfg = {"activation": "topk", "expansion_factor": n // d, "normalize_decoder": True, "num_latents": n, "k": k,
           "multi_topk": False, "skip_connection": False, "transcode": False, "d_in": d}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        if drop != "cfg.json":
            zf.writestr(f"{folder}/cfg.json", json.dumps(cfg))
        if drop != "sae.safetensors":
            zf.writestr(f"{folder}/sae.safetensors", st_save(tensors))
    return buf.getvalue()


async def post_import(client, auth, body: bytes, embedding_run_id: object):  # noqa: ANN001, ANN201
    return await client.post("/api/v1/sae-runs/import", headers=auth, files={"file": ("sae.zip", body)},
                             data={"embedding_run_id": str(embedding_run_id)})


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_import_a_sparsify_sae(app, client, auth, embedding_run) -> None:  # noqa: ANN001, F811
    resp = await post_import(client, auth, sparsify_folder_zip(), embedding_run["id"])
    assert resp.status_code == 202, resp.text
    run = resp.json()
    assert run["imported"] is True and (run["n_latents"], run["k"]) == (N, K)
    done = await wait_done(client, auth, f"/api/v1/sae-runs/{run['id']}", timeout=240)
    assert done["status"] == "succeeded", done
    assert done["metrics"]["l0"] <= K and 0 <= done["metrics"]["dead_fraction"] <= 1
    page = (await client.get(f"/api/v1/sae-runs/{run['id']}/features?limit=5", headers=auth)).json()
    assert page["total"] == N and page["items"][0]["density"] > 0
    # The imported weights are the ones analysed: the stored decoder equals the uploaded one.
    stored = st_load(app.state.store.read_bytes(f"sae-runs/{run['id']}/sae.safetensors"))
    with zipfile.ZipFile(io.BytesIO(sparsify_folder_zip())) as zf:
        uploaded = st_load(zf.read("layers.0/sae.safetensors"))
    np.testing.assert_allclose(stored["W_dec"].numpy(), uploaded["W_dec"].numpy())


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_bad_imports_name_the_problem(client, auth, embedding_run) -> None:  # noqa: ANN001, F811
    emb = embedding_run["id"]
    cases = [
        (sparsify_folder_zip(d=256), "cfg.json.d_in", "384"),
        (sparsify_folder_zip(k=N + 1), "cfg.json.k", "exceeds"),
        (sparsify_folder_zip(drop="sae.safetensors"), "file", "sae.safetensors"),
        (b"not a zip", "file", "zip"),
    ]
    for body, field, fragment in cases:
        resp = await post_import(client, auth, body, emb)
        assert resp.status_code == 422, resp.text
        assert resp.json()["field"] == field and fragment in resp.json()["detail"]
    missing = await post_import(client, auth, sparsify_folder_zip(), 999)
    assert missing.status_code == 422 and missing.json()["field"] == "embedding_run_id"
    assert (await client.get("/api/v1/sae-runs", headers=auth)).json()["total"] == 0
