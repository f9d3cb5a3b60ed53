"""Dashboard pages on a large run → bench/results/pages.json.

A synthetic catalogue at the scale of the first user: 200,000 documents, an SAE run with
12,288 features, each named (label, description, score), with histograms and neighbours, and
about 1,000 families, plus the run's artifacts (snapshot, 384-d vectors, chunk provenance, sparse
codes with k = 32, SAE weights). The dashboard's feature list (several sorts, a text filter, a
deep page), feature pages, the families page and the feature page's documents fragment (through
the interpreter service, in-process as in embedded mode) are requested through the real app
(httpx ASGI transport: routing, auth, database, templates; no network), on SQLite (embedded
mode) and on PostgreSQL. Goal: the feature list and a feature page served in under 300 ms
(p99 reported next to p50).

Usage: python bench/pages.py [--backends sqlite,postgres] [--requests 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp
from sqlalchemy import create_engine, insert, text
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from artifacts import ArtifactStore  # noqa: E402
from gateway.app import create_app  # noqa: E402
from gateway.config import GatewaySettings  # noqa: E402
from gateway.db import get_engine, refresh_statistics  # noqa: E402
from gateway.domain.artifacts.models import Artifact  # noqa: E402
from gateway.domain.auth.service import create_key  # noqa: E402
from gateway.domain.datasets.models import Dataset, Document  # noqa: E402
from gateway.domain.features.models import Family, FamilyMember, Feature, Interpretation  # noqa: E402
from gateway.domain.runs.models import EmbeddingRun, SaeRun  # noqa: E402
from gateway.migrate import upgrade  # noqa: E402
from services.sae.encoding import save_codes  # noqa: E402
from services.sae.io import save_sae  # noqa: E402
from services.sae.model import TopKSae  # noqa: E402

RESULTS = ROOT / "bench/results/pages.json"
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
N_DOCS, N_FEATURES, N_FAMILIES = 200_000, 12_288, 1_000
WORDS = ("bronchiolite tosse febbre wheezing sibili saturazione virus rsv otite faringite vomito diarrea "
         "disidratazione eruzione cutanea congiuntivite polmonite asma dispnea rinite").split()
GOAL_MS = 300.0


def artifacts(store: ArtifactStore, texts: list[str], rng: np.random.Generator) -> dict[str, object]:
    """The run's artifacts as the pipeline writes them (the interpreter reads them for examples)."""
    table = pa.table({"position": np.arange(N_DOCS), "doc_id": np.arange(1, N_DOCS + 1), "text": texts})
    with store.open_write("bench/snapshot.parquet", kind="snapshot") as f:
        pq.write_table(table, f)
    snapshot = f.info
    vectors = rng.standard_normal((N_DOCS, 384), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with store.open_write("bench/embeddings-000.npy", kind="embeddings") as f:
        np.save(f, vectors)
    shard = f.info
    n_chunks = np.where(np.arange(N_DOCS) % 5 == 0, 3, 1)  # a fifth of the documents in 3 chunks
    position = np.repeat(np.arange(N_DOCS), n_chunks)
    within = np.arange(len(position)) - np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
    with store.open_write("bench/chunks-000.npz", kind="chunks") as f:
        np.savez(f, vectors=(vectors[position] + 0.1 * rng.standard_normal((len(position), 384), dtype=np.float32))
                 .astype(np.float16), position=position, token_start=(within * 100).astype(np.int32),
                 token_end=(within * 100 + 100).astype(np.int32), char_start=(within * 100).astype(np.int32),
                 char_end=(within * 100 + 100).astype(np.int32))
    chunks = f.info
    indices = np.stack([rng.choice(N_FEATURES, 32, replace=False) for _ in range(N_DOCS)])  # [N, k]
    codes = sp.csr_matrix((rng.random(N_DOCS * 32, dtype=np.float32) + 0.01, indices.reshape(-1),
                           np.arange(0, N_DOCS * 32 + 1, 32)), shape=(N_DOCS, N_FEATURES))
    csr, csc = save_codes(store, "bench/sae", codes)
    saved = save_sae(store, "bench/sae", TopKSae(384, N_FEATURES, 32, seed=0), None)
    return {"snapshot": snapshot, "shard": shard, "chunks": chunks, "csr": csr, "csc": csc, "cfg": saved.cfg}


def populate(url: str, store: ArtifactStore, rng: np.random.Generator) -> int:
    """Dataset, embedding run, SAE run, features, interpretations, families and the run's artifacts;
    returns the SAE run id."""
    texts = [" ".join(rng.choice(WORDS, 60)) for _ in range(N_DOCS)]
    arts = artifacts(store, texts, rng)
    engine = create_engine(url)
    with engine.begin() as conn:
        snap = arts["snapshot"]
        snap_id = conn.execute(insert(Artifact).values(uri=snap.uri, kind="snapshot", size=snap.size,
                                                       sha256=snap.sha256).returning(Artifact.id)).scalar_one()
        ds = conn.execute(insert(Dataset).values(name="synthetic", format="csv", n_documents=N_DOCS,
                                                 snapshot_artifact_id=snap_id).returning(Dataset.id)).scalar_one()
        for start in range(0, N_DOCS, 20_000):
            conn.execute(insert(Document), [
                {"dataset_id": ds, "position": p, "external_id": f"doc-{p}", "labels": [], "meta": {},
                 "text": texts[p], "n_chars": len(texts[p])}
                for p in range(start, min(start + 20_000, N_DOCS))])
        emb_result = {"shards": [arts["shard"].model_dump(mode="json")], "chunks": [arts["chunks"].model_dump(mode="json")]}
        emb = conn.execute(insert(EmbeddingRun).values(dataset_id=ds, model="all-MiniLM-L6-v2", status="succeeded",
                                                       dim=384, n_documents=N_DOCS, result=emb_result)
                           .returning(EmbeddingRun.id)).scalar_one()
        sae_result = {"artifacts": {name: arts[key].model_dump(mode="json")
                                    for name, key in (("codes_csr", "csr"), ("codes_csc", "csc"), ("cfg", "cfg"))}}
        sae = conn.execute(insert(SaeRun).values(embedding_run_id=emb, status="succeeded", d=384, n_latents=N_FEATURES,
                                                 k=32, metrics={"fvu": 0.2}, result=sae_result)
                           .returning(SaeRun.id)).scalar_one()
        density = np.sort(rng.pareto(1.5, N_FEATURES))[::-1] / 200 + 1e-4
        conn.execute(insert(Feature), [
            {"sae_run_id": sae, "index": i, "density": float(min(density[i], 1.0)),
             "mean_activation": float(rng.random()), "max_activation": float(1 + rng.random()),
             "histogram": {"counts": rng.integers(0, 1000, 20).tolist(), "max": 2.0},
             "neighbours": {"cooccurring": [[int(j), float(rng.random())] for j in rng.integers(0, N_FEATURES, 10)],
                            "decoder": [[int(j), float(rng.random())] for j in rng.integers(0, N_FEATURES, 10)]}}
            for i in range(N_FEATURES)])
        ids = dict(conn.execute(text("SELECT \"index\", id FROM features WHERE sae_run_id = :s"), {"s": sae}).all())
        scores = rng.random(N_FEATURES)
        conn.execute(insert(Interpretation), [
            {"feature_id": ids[i], "backend": "keywords", "label": " ".join(rng.choice(WORDS, 3)),
             "description": "Documents with " + ", ".join(rng.choice(WORDS, 6)), "score_embedding": float(scores[i]),
             "score": float(scores[i]), "reliable": bool(scores[i] >= 0.6), "evidence": {"activating": []}}
            for i in range(N_FEATURES)])
        conn.execute(text("UPDATE features SET best_interpretation_id = (SELECT max(i.id) FROM interpretations i "
                          "WHERE i.feature_id = features.id) WHERE sae_run_id = :s"), {"s": sae})
        add_families(conn, sae, rng)
    with Session(engine) as session, session.begin():  # as the gateway does after storing a run's features
        refresh_statistics(session, "features", "interpretations", "families", "family_members")
    engine.dispose()
    return sae


def add_families(conn, sae: int, rng: np.random.Generator) -> None:  # noqa: ANN001
    order = rng.permutation(N_FEATURES)
    for f in range(N_FAMILIES):
        members = order[f * 8:(f + 1) * 8].tolist()  # a root, 3 children, 4 grandchildren
        fid = conn.execute(insert(Family).values(sae_run_id=sae, iteration=f % 3, root_index=members[0],
                                                 size=len(members)).returning(Family.id)).scalar_one()
        parents = [None, members[0], members[0], members[0], members[1], members[1], members[2], members[3]]
        conn.execute(insert(FamilyMember), [
            {"family_id": fid, "feature_index": m, "parent_index": p, "depth": 0 if p is None else (1 if p == members[0] else 2)}
            for m, p in zip(members, parents, strict=True)])


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def time_pages(app, key: str, sae: int, n: int, rng: np.random.Generator) -> dict[str, dict[str, float]]:  # noqa: ANN001
    urls = {
        "feature list (density)": lambda: f"/sae-runs/{sae}/features",
        "feature list (score)": lambda: f"/sae-runs/{sae}/features?sort=score",
        "feature list (deep page)": lambda: f"/sae-runs/{sae}/features?offset={int(rng.integers(10_000, 12_200))}",
        "feature list (text filter)": lambda: f"/sae-runs/{sae}/features?q={rng.choice(WORDS)}",
        "feature page": lambda: f"/sae-runs/{sae}/features/{int(rng.integers(0, N_FEATURES))}",
        "families page": lambda: f"/sae-runs/{sae}/families",
        "feature documents fragment": lambda: f"/sae-runs/{sae}/features/{int(rng.integers(0, N_FEATURES))}/examples",
    }
    out = {}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench",
                                 headers={"Authorization": f"Bearer {key}"}) as client:
        for name, make in urls.items():
            t0 = time.perf_counter()
            (await client.get(make())).raise_for_status()
            first_ms = (time.perf_counter() - t0) * 1000  # the examples' first call loads the corpus
            for _ in range(2):  # warm caches and the connection pool
                (await client.get(make())).raise_for_status()
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                r = await client.get(make())
                times.append((time.perf_counter() - t0) * 1000)
                r.raise_for_status()
            out[name] = {"p50_ms": round(percentile(times, 50), 1), "p99_ms": round(percentile(times, 99), 1),
                         "max_ms": round(max(times), 1), "first_ms": round(first_ms, 1), "bytes": len(r.content),
                         "under_300_ms_p99": percentile(times, 99) < GOAL_MS}
            print(f"  {name}: p50 {out[name]['p50_ms']} ms, p99 {out[name]['p99_ms']} ms", flush=True)
    return out


def run_backend(backend: str, n: int) -> dict[str, object]:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="prisma-pages-") as tmp:
        pg_name = None
        if backend == "postgres":
            pg_name = f"prisma_bench_{uuid.uuid4().hex[:8]}"
            with create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT").connect() as c:
                c.execute(text(f'CREATE DATABASE "{pg_name}"'))
            url = PG_ADMIN.rsplit("/", 1)[0] + f"/{pg_name}"
        else:
            url = f"sqlite:///{tmp}/prisma.db"
        try:
            upgrade(url)
            t0 = time.perf_counter()
            store = ArtifactStore(str(Path(tmp) / "artifacts"))
            sae = populate(url, store, rng)
            print(f"{backend}: populated in {time.perf_counter() - t0:.0f} s", flush=True)
            settings = GatewaySettings(data_dir=Path(tmp), database_url=None if backend == "sqlite" else url,
                                       log_level="WARNING")
            assert settings.sqlalchemy_url == url
            app = create_app(settings, configure_logs=False)
            engine = create_engine(url)
            with Session(engine) as session:
                key = create_key(session, name="bench")[1]
                session.commit()
            engine.dispose()
            pages = asyncio.run(time_pages(app, key, sae, n, rng))
        finally:
            get_engine.cache_clear()
            if pg_name:
                with create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT").connect() as c:
                    c.execute(text(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)'))
    goal_pages = [p for name, p in pages.items() if name.startswith(("feature list", "feature page"))]
    return {"pages": pages, "feature_list_and_page_under_300_ms_p99": all(p["under_300_ms_p99"] for p in goal_pages)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--requests", type=int, default=40)
    args = ap.parse_args()
    results = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "scale": {"documents": N_DOCS, "features": N_FEATURES, "families": N_FAMILIES, "requests_per_page": args.requests},
        "method": "httpx ASGI transport into the real app (auth, database, templates), one client, sequential",
        "goal_ms": GOAL_MS,
    }
    for backend in args.backends.split(","):
        results[backend] = run_backend(backend, args.requests)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps({b: results[b]["feature_list_and_page_under_300_ms_p99"] for b in args.backends.split(",")}))


if __name__ == "__main__":
    main()
