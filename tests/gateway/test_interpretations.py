"""Naming features through the gateway: the interpreter (keywords back-end) names every feature of
an SAE run, each name scored on held-out documents; the best is shown, unreliable ones flagged."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from contracts.interpret import ScoringConfig
from tests.conftest import REPO_ROOT
from tests.live import HTTP, PRISMA, free_port, stop

from tests.gateway.polling import wait_done
from tests.gateway.shared_runs import SMALL, embedding_run  # noqa: F401 - fixture

pytestmark = [pytest.mark.anyio, pytest.mark.slow]



@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_name_the_features_of_an_sae_run(client, auth, embedding_run) -> None:  # noqa: ANN001, F811
    (run,) = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": embedding_run["id"], "config": SMALL},
                                headers=auth)).json()
    await wait_done(client, auth, f"/api/v1/sae-runs/{run['id']}", timeout=240)
    out_of_range = await client.post(f"/api/v1/sae-runs/{run['id']}/interpretations",
                                     json={"features": [5, 100000]}, headers=auth)
    assert out_of_range.status_code == 422 and out_of_range.json()["field"] == "features"
    assert "100000" in out_of_range.json()["detail"]

    densest = (await client.get(f"/api/v1/sae-runs/{run['id']}/features?sort=density&limit=20", headers=auth)).json()
    wanted = [f["index"] for f in densest["items"]]
    resp = await client.post(f"/api/v1/sae-runs/{run['id']}/interpretations",
                             json={"backends": [{"backend": "keywords"}], "features": wanted}, headers=auth)
    assert resp.status_code == 202, resp.text
    job = await wait_done(client, auth, f"/api/v1/jobs/{resp.json()['id']}")
    assert job["status"] == "succeeded", job
    assert job["result"]["n_named"] >= 10

    page = (await client.get(f"/api/v1/sae-runs/{run['id']}/features?sort=density&limit=20", headers=auth)).json()
    named = [f for f in page["items"] if f["label"]]
    assert len(named) == job["result"]["n_named"]
    cfg = ScoringConfig()
    for f in named:  # reliable: at or above the score threshold, on enough held-out documents, calibrated
        assert f["score"] is not None and 0 <= f["score"] <= 1
        shown = (await client.get(f"/api/v1/sae-runs/{run['id']}/features/{f['index']}/interpretations",
                                  headers=auth)).json()[0]
        held = len(shown["evidence"]["holdout_activating"])
        assert f["reliable"] == (f["score"] >= cfg.embedding_threshold and held >= cfg.min_holdout_activating
                                 and f["threshold"] is not None)  # and it holds above some activation
    by_score = (await client.get(f"/api/v1/sae-runs/{run['id']}/features?sort=score&limit=500", headers=auth)).json()
    keys = [(f["reliable"] is not True, -f["score"]) for f in by_score["items"] if f["score"] is not None]
    assert keys == sorted(keys) and len(keys) == len(named)  # reliable names first, each kind best first
    scored = [f["score"] is not None for f in by_score["items"]]
    assert scored == sorted(scored, reverse=True)  # the features without a scored name last,
    unscored = [f["density"] for f in by_score["items"] if f["score"] is None]
    assert len(unscored) >= 2 and unscored == sorted(unscored, reverse=True)  # the densest of them first
    first = named[0]
    interps = (await client.get(f"/api/v1/sae-runs/{run['id']}/features/{first['index']}/interpretations",
                                headers=auth)).json()
    assert interps and interps[0]["label"] == first["label"] and interps[0]["backend"] == "keywords"
    assert interps[0]["score_embedding"] == first["score"]
    ev = interps[0]["evidence"]
    assert ev["activating"] and not set(ev["activating"]) & set(ev["holdout_activating"])  # never shown what it is scored on
    assert interps[0]["keywords"] and interps[0]["keywords"] == ev["keywords"]  # the evidence under the name
    assert interps[0]["copies_input"] is False
    detail = (await client.get(f"/api/v1/sae-runs/{run['id']}/features/{first['index']}", headers=auth)).json()
    assert detail["label"] == first["label"]

    # Search by label text, and filter by reliability.
    base = f"/api/v1/sae-runs/{run['id']}/features?limit=500"
    word = first["label"].split(",")[0].strip()
    hits = (await client.get(f"{base}&q={word.upper()}", headers=auth)).json()
    assert hits["total"] >= 1 and first["index"] in [f["index"] for f in hits["items"]]
    for hit in hits["items"]:  # label or description of the shown (best) name contains the text
        shown = (await client.get(f"/api/v1/sae-runs/{run['id']}/features/{hit['index']}/interpretations",
                                  headers=auth)).json()[0]
        assert word.lower() in f"{shown['label']} {shown['description'] or ''}".lower()
    assert (await client.get(f"{base}&q=%25", headers=auth)).json()["total"] == 0  # '%' is literal, not a wildcard
    reliable = (await client.get(f"{base}&reliability=reliable", headers=auth)).json()["items"]
    unreliable = (await client.get(f"{base}&reliability=unreliable", headers=auth)).json()["items"]
    unnamed = (await client.get(f"{base}&reliability=unnamed", headers=auth)).json()
    assert all(f["reliable"] is True for f in reliable) and all(f["reliable"] is False for f in unreliable)
    assert all(f["label"] is None for f in unnamed["items"])
    assert len(reliable) + len(unreliable) == job["result"]["n_named"]
    assert len(reliable) + len(unreliable) + unnamed["total"] == SMALL["expansion_factor"] * 384


def start_service(name: str, env: dict[str, str], log: Path) -> tuple[str, subprocess.Popen]:
    """`prisma service <name>` on a free loopback port, once /health answers (60 s)."""
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen([PRISMA, "service", name, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "HF_HUB_OFFLINE": "1", **env}, cwd=REPO_ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            if HTTP.get(f"{url}/health", timeout=1).status_code == 200:
                return url, proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise TimeoutError(f"prisma service {name} did not answer /health")


async def reinterpret_and_check(client, auth, run_id: int, index: int) -> dict:  # noqa: ANN001
    """POST a re-interpretation; the new name is scored, stored, and best-of-n is re-picked."""
    path = f"/api/v1/sae-runs/{run_id}/features/{index}/interpretations"
    before = (await client.get(path, headers=auth)).json()
    resp = await client.post(path, json={"backend": "keywords"}, headers=auth)
    assert resp.status_code == 201, resp.text
    out = resp.json()
    (new,) = out["created"]
    assert new["backend"] == "keywords" and new["score_embedding"] is not None and new["score"] == new["score_embedding"]
    assert new["evidence"]["score_evidence"] is not None and new["evidence"]["control_embedding"] is not None
    assert not set(new["evidence"]["activating"]) & set(new["evidence"]["holdout_activating"])
    after = (await client.get(path, headers=auth)).json()
    assert len(after) == len(before) + 1 and new["id"] in [i["id"] for i in after]
    top = max(i["score"] for i in after)
    assert out["best"]["score"] == top and after[0]["id"] == out["best"]["id"]  # best of all its names
    detail = (await client.get(f"/api/v1/sae-runs/{run_id}/features/{index}", headers=auth)).json()
    assert detail["label"] == out["best"]["label"] and detail["score"] == top
    return out


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_reinterpret_one_feature_in_process_and_over_real_http(client, auth, embedding_run, settings,  # noqa: ANN001, F811
                                                                   tmp_path) -> None:
    (run,) = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": embedding_run["id"], "config": SMALL},
                                headers=auth)).json()
    await wait_done(client, auth, f"/api/v1/sae-runs/{run['id']}", timeout=240)
    densest = (await client.get(f"/api/v1/sae-runs/{run['id']}/features?sort=density&limit=3", headers=auth)).json()
    index = densest["items"][0]["index"]
    base = f"/api/v1/sae-runs/{run['id']}/features"
    others = [f["index"] for f in densest["items"][1:]]  # named first: their labels are the random-label controls
    job = await client.post(f"/api/v1/sae-runs/{run['id']}/interpretations", json={"features": others}, headers=auth)
    assert (await wait_done(client, auth, f"/api/v1/jobs/{job.json()['id']}"))["status"] == "succeeded"

    # Bad input: an index out of range (404 naming it), a detection scorer without a model, an unknown back-end.
    n = SMALL["expansion_factor"] * 384
    missing = await client.post(f"{base}/{n}/interpretations", json={"backend": "keywords"}, headers=auth)
    assert missing.status_code == 404 and str(n) in missing.json()["detail"]
    no_llm = await client.post(f"{base}/{index}/interpretations", json={"backend": "keywords", "detection": True},
                               headers=auth)
    assert no_llm.status_code == 422 and "detection" in no_llm.text
    assert (await client.post(f"{base}/{index}/interpretations", json={"backend": "gpt"}, headers=auth)).status_code == 422
    assert (await client.post(f"{base}/{index}/interpretations", json={"backend": "keywords"})).status_code == 401

    # Embedded mode: the interpreter (and the embedder it embeds labels with) through the ASGI transport.
    first = await reinterpret_and_check(client, auth, run["id"], index)
    assert first["best"]["id"] == first["created"][0]["id"]  # its only name

    # Distributed mode: the same route, the interpreter and embedder as separate processes over HTTP.
    artifacts = settings.artifact_root
    embedder_url, embedder = start_service("embedder", {}, tmp_path / "embedder.log")
    interp_url, interp = start_service("interpreter", {"PRISMA_INTERPRETER_ARTIFACT_ROOT": artifacts,
                                                      "PRISMA_INTERPRETER_EMBEDDER_URL": embedder_url},
                                       tmp_path / "interpreter.log")
    from gateway.app import create_app

    remote = create_app(settings.model_copy(update={"interpreter_url": interp_url, "embedder_url": embedder_url}),
                        configure_logs=False)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=remote), base_url="http://gw") as gw:
            second = await reinterpret_and_check(gw, auth, run["id"], index)
        # the same evidence and the same embedding model: the same name and score either way
        assert second["created"][0]["label"] == first["created"][0]["label"]
        assert second["created"][0]["score"] == pytest.approx(first["created"][0]["score"], abs=1e-4)
        interp.terminate()
        interp.wait(timeout=15)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=remote), base_url="http://gw") as gw:
            down = await gw.post(f"{base}/{index}/interpretations", json={"backend": "keywords"}, headers=auth)
        assert down.status_code == 503 and "interpreter" in down.text
    finally:
        remote.state.runner.shutdown()
        for proc in (interp, embedder):
            stop(proc)
