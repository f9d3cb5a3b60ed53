"""Concepts in production: POST /api/v1/concepts/{id}/classify on demo notes, in embedded mode with the model warm.

Latency of one note and of a batch of 32 notes (the gateway's whole path: the embedder's POST /passages with the
note's clauses, the SAE service's POST /codes, the probe, the evidence named, the audit event), beside
sentence-transformers' `encode` of the same 32 notes as the floor (the model alone, whole notes); and the
largest difference between classify's score and apply's on every stored note (the run's spec, segments pooled).
The same calls, taking turns, on a second run of the same notes padded as runs were before they recorded a
`pad_multiple` (1: a note's clauses in about 12 widths, so 12 forward passes, against about 5).

    nice -n 10 .venv/bin/python bench/classify.py [--notes 1000] [--one-calls 200] [--batch-calls 200]

Writes bench/results/classify.json.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import platform
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import numpy as np

from contracts.embed import PAD_MULTIPLE

ROOT = Path(__file__).resolve().parents[1]
SAE_CONFIG = {"expansion_factor": 4, "k": 16, "max_steps": 400, "batch_size": 256}
POSITIVE = ["bronchiolitis:confirmed", "bronchiolitis:suspected"]  # demo labels: condition:status


def percentile_ms(seconds: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(seconds) * 1000, q)), 1)


async def wait(client: httpx.AsyncClient, path: str) -> dict:
    while True:
        body = (await client.get(path)).json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            assert body["status"] == "succeeded", body
            return body
        await asyncio.sleep(1)


async def build(client: httpx.AsyncClient, notes: list, pad_multiple: int = PAD_MULTIPLE) -> tuple[int, int]:  # noqa: ANN001
    """(the SAE run, a probe concept trained on the demo's bronchiolitis labels), over the notes embedded as the
    demo embeds them (clauses, documents from their clauses), each sequence padded to a multiple of
    `pad_multiple` at least (a new run's default, or 1: runs made before it was recorded)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "text", "labels"])
    w.writerows([n.id, n.text, "|".join(n.labels)] for n in notes)
    ds = (await client.post("/api/v1/datasets", files={"file": ("notes.csv", buf.getvalue().encode())})).json()["id"]
    emb = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds, "segments": True,
                                                            "document_vectors": "segments",
                                                            "pad_multiple": pad_multiple})
    emb = await wait(client, f"/api/v1/embedding-runs/{emb.json()['id']}")
    sae = (await client.post("/api/v1/sae-runs", json={"embedding_run_id": emb["id"], "config": SAE_CONFIG})).json()[0]
    await wait(client, f"/api/v1/sae-runs/{sae['id']}")
    concept = await client.post("/api/v1/concepts", json={"sae_run_id": sae["id"], "name": "bronchiolitis",
                                                          "kind": "probe",
                                                          "examples": {"labels": {"positive": POSITIVE}}})
    assert concept.status_code == 201, concept.text
    return sae["id"], concept.json()["id"]


def apply_scores(app, concept_id: int) -> np.ndarray:  # noqa: ANN001
    """float32 [notes]: the score of every stored note by the functions apply_concept calls."""
    from gateway.db import session_scope
    from gateway.domain.concepts.apply import _scorer
    from gateway.domain.concepts.scope import probe_codes, segment_scope
    from gateway.domain.concepts.service import get_or_404, reads_context, run_data

    with session_scope(app.state.factory) as session:
        concept = get_or_404(session, concept_id)
        data = run_data(session, app.state.store, concept.sae_run_id)
        scorer, probe = _scorer(concept, data.space), concept.probe
    codes = probe_codes(app.state.factory, data.dataset.id, data.space,
                        segment_scope(data.space, probe.get("segment_words")), np.arange(data.space.n_docs),
                        context=reads_context(probe))
    return scorer.block(codes, 0)[1]


async def classify(client: httpx.AsyncClient, concept_id: int, texts: list[str]) -> list[float]:
    resp = await client.post(f"/api/v1/concepts/{concept_id}/classify", json={"texts": texts})
    assert resp.status_code == 200, resp.text
    return [item["score"] for item in resp.json()["items"]]


async def timed_calls(client: httpx.AsyncClient, concept_ids: list[int], batches: list[list[str]]) -> list[list[float]]:
    """Seconds of each call, per concept: the concepts take turns on each batch, first one then the other, so that
    the shared machine's load falls on them alike."""
    seconds: list[list[float]] = [[] for _ in concept_ids]
    for i, texts in enumerate(batches):
        order = list(range(len(concept_ids)))
        for j in order if i % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            await classify(client, concept_ids[j], texts)
            seconds[j].append(time.perf_counter() - start)
    return seconds


def floor_seconds(texts: list[list[str]]) -> tuple[list[float], str]:
    """sentence-transformers' encode of each batch (the same model directory, its passage prompt), and its path.
    A batch of one note is the floor of one note's call: the model reading the note once, whole (classify reads
    it clause by clause, as the run read it: about twice the tokens with each clause's prompt and specials, in a
    dozen small batches of one padded width each)."""
    from sentence_transformers import SentenceTransformer

    from services.embedder.models import ModelCache

    lm = ModelCache().get(None)
    st = SentenceTransformer(lm.path, device="cpu", local_files_only=True)
    st.encode(texts[0], prompt=lm.prompt_text or "")  # warm
    seconds = []
    for batch in texts:
        start = time.perf_counter()
        st.encode(batch, prompt=lm.prompt_text or "", batch_size=32)
        seconds.append(time.perf_counter() - start)
    return seconds, lm.path


async def measure(args: argparse.Namespace) -> dict:
    from gateway.app import create_app
    from gateway.config import GatewaySettings
    from gateway.db import session_scope
    from gateway.demo.corpus import generate_notes
    from gateway.domain.auth.service import create_key

    data = Path(tempfile.mkdtemp(prefix="prisma-bench-classify-"))
    app = create_app(GatewaySettings(data_dir=data, redis_url=None, log_json=False, log_level="WARNING"),
                     configure_logs=False)
    with session_scope(app.state.factory) as session:
        _, key = create_key(session, name="bench")
    notes = list(generate_notes(n=args.notes, seed=0))
    texts = [n.text for n in notes]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench",
                                 headers={"Authorization": f"Bearer {key}"}, timeout=None) as client:
        started = time.perf_counter()
        _, concept_id = await build(client, notes)
        built = time.perf_counter() - started
        _, unpadded_id = await build(client, notes, pad_multiple=1)
        scores = []
        for i in range(0, len(texts), 32):
            scores += await classify(client, concept_id, texts[i:i + 32])
        difference = float(np.abs(np.asarray(scores) - apply_scores(app, concept_id)).max())
        rng = np.random.default_rng(0)
        ones = [[texts[int(i)]] for i in rng.integers(0, len(texts), args.one_calls)]
        batches = [[texts[int(i)] for i in rng.choice(len(texts), 32, replace=False)] for _ in range(args.batch_calls)]
        (one, one_unpadded) = await timed_calls(client, [concept_id, unpadded_id], ones)
        (batch, batch_unpadded) = await timed_calls(client, [concept_id, unpadded_id], batches)
    app.state.runner.shutdown()
    floor, path = floor_seconds(batches)
    floor_one, _ = floor_seconds(ones)
    return {"built_seconds": round(built, 1), "max_abs_difference": difference, "one": one, "batch": batch,
            "one_unpadded": one_unpadded, "batch_unpadded": batch_unpadded,
            "floor": floor, "floor_one": floor_one, "floor_model": path, "clauses": clauses_per_note(texts)}


def clauses_per_note(texts: list[str]) -> float:
    """The mean number of clauses a note is cut into (the default unit), each one embedded."""
    from services.embedder.segments import segment_spans

    doc, _, _ = segment_spans(texts)
    return round(len(doc) / len(texts), 1)


def machine() -> dict:
    """The CPU as every bench reports it: its name, family and model (one name covers several generations: "AMD
    EPYC"), native bf16 and AMX; the usable CPUs, the commit and the date."""
    from services.cpu import cpu_flags, cpuinfo
    from services.embedder.models import cpu_has_native_bf16, default_threads

    info = cpuinfo()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    return {"cpu": info.get("model name", platform.processor()),
            "cpu_family_model": f"family {info.get('cpu family', '?')}, model {info.get('model', '?')}",
            "usable_cpus": default_threads(), "native_bf16": cpu_has_native_bf16(), "amx": "amx_bf16" in cpu_flags(),
            "commit": commit.strip(), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--one-calls", type=int, default=200)
    parser.add_argument("--batch-calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/classify.json")
    args = parser.parse_args()
    m = asyncio.run(measure(args))
    batch_p50, floor_p50 = percentile_ms(m["batch"], 50), percentile_ms(m["floor"], 50)
    report = {
        "benchmark": "classify", "machine": machine(),
        "setup": {"notes": args.notes, "embedding": "segments (clauses), document_vectors: segments (the demo's), "
                                                    f"pad_multiple {PAD_MULTIPLE}",
                  "sae": SAE_CONFIG, "concept": f"probe on labels {POSITIVE}", "built_seconds": m["built_seconds"]},
        "one_note": {"calls": args.one_calls, "p50_ms": percentile_ms(m["one"], 50),
                     "p95_ms": percentile_ms(m["one"], 95)},
        "batch32": {"calls": args.batch_calls, "p50_ms": batch_p50, "p95_ms": percentile_ms(m["batch"], 95)},
        "pad_multiple_1": {
            "what": "the same calls on a run of the same notes padded as runs were before they recorded a "
                    "pad_multiple (each sequence to its own length under 16), taking turns with the default's",
            "one_note": {"p50_ms": percentile_ms(m["one_unpadded"], 50), "p95_ms": percentile_ms(m["one_unpadded"], 95)},
            "batch32": {"p50_ms": percentile_ms(m["batch_unpadded"], 50)}},
        "floor": {"what": "sentence-transformers encode of the same notes, whole, the same model directory",
                  "model": m["floor_model"], "batch32": {"p50_ms": floor_p50},
                  "one_note": {"p50_ms": percentile_ms(m["floor_one"], 50), "p95_ms": percentile_ms(m["floor_one"], 95)},
                  "clauses_per_note": m["clauses"]},
        "equality": {"notes": args.notes, "max_abs_difference": m["max_abs_difference"],
                     "against": "apply's scores (apply.py Scorer.block on the stored codes)"},
        "goals": {"one_note.p95_ms <= 300": percentile_ms(m["one"], 95) <= 300,
                  "batch32.p50_ms <= 3 x floor": batch_p50 <= 3 * floor_p50,
                  "max_abs_difference <= 1e-4": m["max_abs_difference"] <= 1e-4},
    }
    report["machine"]["load_average"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
