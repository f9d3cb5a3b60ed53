"""Notes joining a trained run: the extension job against a fresh embedding run of the same new notes alone.

1,000 demo notes are embedded as the demo embeds them (clauses, documents from their clauses), an SAE is trained on
them and a probe concept on their bronchiolitis labels; 200 more notes (another seed) are appended to the dataset
and the SAE run extended to them (POST /sae-runs/{id}/extend: embed, encode with the trained SAE, write the codes,
recompute the statistics). Its wall time is set beside a fresh embedding run of the 200 notes alone, uploaded as a
dataset of their own with the same spec (the least a retraining would cost); then the concept is applied again and
must include the new notes. Embedded mode, the model warm for both.

    nice -n 10 .venv/bin/python bench/append.py [--notes 1000] [--new 200]

Writes bench/results/append.json.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # run as a script from the repository root

from classify import POSITIVE, SAE_CONFIG, machine  # noqa: E402
SPEC = {"segments": True, "document_vectors": "segments"}  # the demo's


def csv_bytes(notes: list) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text", "labels"])
    w.writerows([n.id, n.text, "|".join(n.labels)] for n in notes)
    return buf.getvalue().encode()


async def wait(client: httpx.AsyncClient, path: str) -> dict:
    while True:
        body = (await client.get(path)).json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            assert body["status"] == "succeeded", body
            return body
        await asyncio.sleep(0.05)


async def embedding_run(client: httpx.AsyncClient, dataset_id: int) -> tuple[dict, float]:
    start = time.perf_counter()
    run = (await client.post("/api/v1/embedding-runs", json={"dataset_id": dataset_id, **SPEC})).json()
    return await wait(client, f"/api/v1/embedding-runs/{run['id']}"), time.perf_counter() - start


async def apply(client: httpx.AsyncClient, app, concept_id: int) -> np.ndarray:  # noqa: ANN001
    """The positions the concept's apply matched."""
    from gateway.db import session_scope
    from gateway.domain.concepts.models import Concept

    job = (await client.post(f"/api/v1/concepts/{concept_id}/apply")).json()
    await wait(client, f"/api/v1/jobs/{job['id']}")
    with session_scope(app.state.factory) as session:
        uri = session.get(Concept, concept_id).applied["uri"]
    with np.load(io.BytesIO(app.state.store.read_bytes(uri))) as matches:
        return matches["positions"]


async def measure(args: argparse.Namespace) -> dict:
    from gateway.app import create_app
    from gateway.config import GatewaySettings
    from gateway.db import session_scope
    from gateway.demo.corpus import generate_notes
    from gateway.domain.auth.service import create_key

    data = Path(tempfile.mkdtemp(prefix="prisma-bench-append-"))
    app = create_app(GatewaySettings(data_dir=data, redis_url=None, log_json=False, log_level="WARNING"),
                     configure_logs=False)
    with session_scope(app.state.factory) as session:
        _, key = create_key(session, name="bench")
    old = list(generate_notes(n=args.notes, seed=0))
    new = [replace(n, id=f"NEW-{i:06d}") for i, n in enumerate(generate_notes(n=args.new, seed=1))]
    out: dict = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench",
                                 headers={"Authorization": f"Bearer {key}"}, timeout=None) as client:
        ds = (await client.post("/api/v1/datasets", files={"file": ("old.csv", csv_bytes(old))})).json()["id"]
        emb, out["embedding_seconds"] = await embedding_run(client, ds)
        start = time.perf_counter()
        sae = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": SAE_CONFIG})).json()[0]
        await wait(client, f"/api/v1/sae-runs/{sae['id']}")
        out["sae_seconds"] = time.perf_counter() - start
        concept = await client.post("/api/v1/concepts", json={"sae_run_id": sae["id"], "name": "bronchiolitis",
                                                              "kind": "probe",
                                                              "examples": {"labels": {"positive": POSITIVE}}})
        assert concept.status_code == 201, concept.text
        concept_id = concept.json()["id"]
        out["matches_before"] = len(await apply(client, app, concept_id))

        alone = (await client.post("/api/v1/datasets", files={"file": ("new.csv", csv_bytes(new))})).json()["id"]
        _, out["fresh_seconds"] = await embedding_run(client, alone)

        start = time.perf_counter()
        resp = await client.post(f"/api/v1/datasets/{ds}/documents", files={"file": ("new.csv", csv_bytes(new))})
        assert resp.status_code == 201, resp.text
        out["append_seconds"] = time.perf_counter() - start
        start = time.perf_counter()
        ext = await client.post(f"/api/v1/sae-runs/{sae['id']}/extend")
        assert ext.status_code == 202, ext.text
        job = await wait(client, f"/api/v1/jobs/{ext.json()['job_id']}")
        out["extend_seconds"] = time.perf_counter() - start
        out["extend_job"] = job["result"]
        out["coverage"] = (await client.get(f"/api/v1/sae-runs/{sae['id']}")).json()["coverage"]
        positions = await apply(client, app, concept_id)
    app.state.runner.shutdown()
    matched_new = {int(p) - args.notes for p in positions if p >= args.notes}
    positive_new = {i for i, n in enumerate(new) if set(n.labels) & set(POSITIVE)}
    out["apply_after"] = {
        "n_matches": int(len(positions)), "new_notes_matched": len(matched_new),
        "new_notes_labelled_positive": len(positive_new),
        "new_true_positives": len(matched_new & positive_new)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--new", type=int, default=200)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/append.json")
    args = parser.parse_args()
    m = asyncio.run(measure(args))
    ratio = m["extend_seconds"] / m["fresh_seconds"]
    after = m["apply_after"]
    report = {
        "benchmark": "append", "machine": machine(),
        "setup": {"notes_trained": args.notes, "notes_appended": args.new, "seeds": {"trained": 0, "appended": 1},
                  "embedding": "segments (clauses), document_vectors: segments (the demo's)", "sae": SAE_CONFIG,
                  "concept": f"probe on labels {POSITIVE}", "embedding_seconds": round(m["embedding_seconds"], 1),
                  "sae_seconds": round(m["sae_seconds"], 1)},
        "append": {"append_request_seconds": round(m["append_seconds"], 2),
                   "extend_seconds": round(m["extend_seconds"], 2),
                   "fresh_embedding_seconds": round(m["fresh_seconds"], 2),
                   "ratio_to_fresh_embedding": round(ratio, 3), "extend_job": m["extend_job"],
                   "coverage_after": m["coverage"]},
        "apply": {"matches_before": m["matches_before"], **after},
        "goals": {"append.ratio_to_fresh_embedding <= 1.5": ratio <= 1.5,
                  "apply includes new notes": after["new_notes_matched"] > 0},
    }
    report["machine"]["load_average"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
