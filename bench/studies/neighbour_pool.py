"""Hard negatives at scale: an anchor's nearest non-activating documents searched among every distinct vector, or
among a fixed sample of `SEARCHED` of them (services/interpreter/neighbours.py), on a corpus past the sample's size.

The corpus is a `bench/e2e.py` data directory whose SAE run has finished (200,000 imported notes: mixtures of
real multilingual-e5-small vectors, the generator's texts), or a `prisma demo` one (its clauses, whose names
mean something), sampled at the same share with `--searched`. The first `--features` features in naming order
are named as the naming job names them (Namer, keywords back-end, 64 a batch, PREPARE_BATCHES batches
prepared together, labels embedded by the run's query model, the default model, on one thread), once per
setting of SEARCHED, each in a process of its own; each run's seconds, and cProfile's top lines where asked. Beside
them, what the sample changes: how near the hard negatives are (cosine of each hard negative to its nearest
anchor, mean over features), how many of the exact search's hard negatives the sample keeps, and the names:
shown name identical, held-out embedding AUROC and near-miss AUROC (mean, and mean absolute change), reliable
fraction.

    nice -n 10 .venv/bin/python bench/studies/neighbour_pool.py --data /tmp/prisma-e2e-… --features 1024
    nice -n 10 .venv/bin/python bench/studies/neighbour_pool.py --data <prisma demo data dir> --features 3072 \
        --searched 3754 --out bench/studies/results/neighbour-pool-demo.json

Writes bench/studies/results/neighbour-pool.json (and, with --profile, neighbour-pool-profile.txt).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

OUT = ROOT / "bench/studies/results/neighbour-pool.json"
EVERY = 10**12
"""SEARCHED for 'every distinct vector' (larger than any corpus)."""


def corpus_ref(artifacts: Path):
    """The e2e run's document corpus (imported vectors: no chunks, no segments), as the naming job reads it; a
    `prisma demo` data dir's clause corpus (bench/naming_speed.py's) where the run has segment codes."""
    from contracts.interpret import CorpusRef

    if list(artifacts.glob("sae-runs/*/segment*codes*.npz")):
        from naming_speed import corpus_ref as clauses

        return clauses(artifacts)

    def uris(pattern: str) -> list[str]:
        return [f"file://{p}" for p in sorted(artifacts.glob(pattern))]

    sae = sorted(artifacts.glob("sae-runs/*/cfg.json"))[0].parent
    return CorpusRef(snapshot_uri=uris("datasets/*/snapshot.parquet")[0],
                     embeddings=uris("embedding-runs/*/embeddings/shard-*.npy"),
                     chunks=uris("embedding-runs/*/chunks/shard-*.npz"), codes_csc_uri=f"file://{sae}/codes.csc.npz",
                     sae_uri=f"file://{sae}")


def name_first(data: Path, features: int, searched: int, profile: bool) -> dict:
    """Name the first `features` features with neighbours.SEARCHED = `searched`: seconds, each feature's record."""
    from artifacts import ArtifactStore
    from contracts.interpret import BackendOptions
    from services.embedder.config import EmbedderSettings
    from services.embedder.encoder import embed_texts
    from services.embedder.models import ModelCache
    from services.interpreter import neighbours, runs
    from services.interpreter.corpus import load_corpus
    from services.interpreter.naming import Namer, naming_order
    from services.interpreter.phrases import PhraseBackend

    neighbours.SEARCHED = searched
    corpus = load_corpus(ArtifactStore(str(data / "artifacts")), corpus_ref(data / "artifacts"))
    lm = ModelCache.from_settings(EmbedderSettings(threads=1)).get("default", prompt_name="query")
    embed = lambda texts: embed_texts(lm, texts, pooling="mean", normalize=True).vectors  # noqa: E731
    embed(["warm-up"])
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    namer = Namer(corpus, [(BackendOptions(backend="keywords"), PhraseBackend())], embed)
    t_index = time.perf_counter() - t0
    order = naming_order(corpus)[:features]
    records, recent, evidence = [], [], {}
    ahead = 64 * runs.PREPARE_BATCHES
    for i in range(0, len(order), 64):
        if i % ahead == 0:
            for start in ([0] if i == 0 else []) + [i + ahead]:
                asyncio.run(namer.prepare(order[start:start + ahead]))
        pending_before = dict(namer._ready)
        got = asyncio.run(namer.name_features(order[i:i + 64], [lab for lab in recent[-256:] if lab]))
        for f in order[i:i + 64]:
            p = pending_before.get(f)
            if p is not None and p.evidence is not None:
                evidence[f] = p.evidence
        records += got
        recent += [r.interpretations[r.best].label if r.best is not None else None for r in got]
    seconds = time.perf_counter() - t0
    if prof:
        prof.disable()
    out: dict = {"searched": searched, "distinct_vectors": len(corpus.distinct.vectors), "features": len(records),
                 "seconds": round(seconds, 2), "seconds_indexes": round(t_index, 2), "records": {}}
    from services.interpreter.evidence import anchors_of

    for r in records:
        ev = evidence.get(r.feature)
        b = r.interpretations[r.best] if r.best is not None else None
        hard = [*ev.hard_negatives, *ev.selection_hard] if ev else []
        anchors = anchors_of(corpus, r.feature, namer.evidence) if ev else []
        near = (float(np.mean((corpus.vectors[hard] @ corpus.vectors[anchors].T).max(axis=1)))
                if len(hard) and len(anchors) else None)
        out["records"][str(r.feature)] = {
            "label": b.label if b else None, "score_embedding": b.score_embedding if b else None,
            "score_near_miss": b.score_near_miss if b else None, "reliable": b.reliable if b else None,
            "hard": sorted(int(h) for h in hard), "hard_cosine": near}
    if prof:
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(30)
        out["profile"] = text.getvalue()
    return out


def compare(exact: dict, sampled: dict) -> dict:
    """What the sample changed, over the features named in both."""
    feats = [f for f in exact["records"] if f in sampled["records"]]
    a, b = exact["records"], sampled["records"]

    def mean(side: dict, key: str) -> float | None:
        xs = [side[f][key] for f in feats if side[f][key] is not None]
        return round(float(np.mean(xs)), 4) if xs else None

    def change(key: str) -> float | None:
        xs = [abs(a[f][key] - b[f][key]) for f in feats if a[f][key] is not None and b[f][key] is not None]
        return round(float(np.mean(xs)), 4) if xs else None

    kept = [len(set(a[f]["hard"]) & set(b[f]["hard"])) / len(a[f]["hard"]) for f in feats if a[f]["hard"]]
    return {
        "features": len(feats),
        "hard_negative_cosine": {"every": mean(a, "hard_cosine"), "sample": mean(b, "hard_cosine")},
        "hard_negatives_kept": round(float(np.mean(kept)), 4) if kept else None,
        "names_identical": sum(a[f]["label"] == b[f]["label"] for f in feats),
        "score_embedding": {"every": mean(a, "score_embedding"), "sample": mean(b, "score_embedding"),
                            "mean_abs_change": change("score_embedding")},
        "score_near_miss": {"every": mean(a, "score_near_miss"), "sample": mean(b, "score_near_miss"),
                            "mean_abs_change": change("score_near_miss")},
        "reliable_fraction": {side: round(float(np.mean([r[f]["reliable"] is True for f in feats])), 4)
                              for side, r in (("every", a), ("sample", b))},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a bench/e2e.py data dir whose SAE run finished")
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--searched", type=int, default=None,
                        help="the sample's size (default: neighbours.SEARCHED): a smaller corpus sampled at the same "
                             "share, e.g. the demo's 15,017 distinct clauses at 3,754, a quarter, as 50,000 of 200,000")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        args.worker_out.write_text(json.dumps(name_first(args.data, args.features, args.worker, args.profile)))
        return
    from bench.classify import machine
    from services.interpreter.neighbours import SEARCHED

    runs = {}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    for side, searched in (("every", EVERY), ("sample", args.searched or SEARCHED)):
        tmp = Path(f"/tmp/neighbour-pool-{side}.json")
        subprocess.run([sys.executable, __file__, "--data", str(args.data), "--features", str(args.features),
                        "--worker", str(searched), "--worker-out", str(tmp)] + (["--profile"] if args.profile else []),
                       check=True, env=env)
        runs[side] = json.loads(tmp.read_text())
        print(side, runs[side]["seconds"], "s", flush=True)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    report = {
        "what": "naming the first features of a corpus with hard negatives searched among every distinct vector "
                "and among a fixed sample of `searched` of them",
        "data": str(args.data), "searched": args.searched or SEARCHED, "distinct_vectors": runs["every"]["distinct_vectors"],
        "features": args.features,
        "seconds": {side: runs[side]["seconds"] for side in runs},
        "seconds_indexes": {side: runs[side]["seconds_indexes"] for side in runs},
        "ratio_seconds": round(runs["every"]["seconds"] / runs["sample"]["seconds"], 2),
        "changes": compare(runs["every"], runs["sample"]),
        "commit": head, "date": time.strftime("%Y-%m-%d"),
        "machine": {**machine(), "load_average_1_5_15_min": [round(x, 1) for x in os.getloadavg()]},
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.profile:
        args.out.with_name(args.out.stem + "-profile.txt").write_text(
            "".join(f"== {side}: SEARCHED = {runs[side]['searched']}\n{runs[side]['profile']}\n" for side in runs))
    print(json.dumps({k: report[k] for k in ("seconds", "ratio_seconds", "changes")}, indent=1))


if __name__ == "__main__":
    main()
