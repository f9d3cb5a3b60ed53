"""Interpretation benchmark → bench/results/interpret.json.

Medical Abstracts (read in place) → Prisma snapshot → embedding run (services.embedder core:
chunk-and-average, chunk provenance kept) → TopK SAE (k = 32, services.sae.pipeline) → every
feature named by each back-end that runs here, scored by the embedding scorer with a
random-label control. Everything but the results is cached under /tmp/prisma-bench/interp.

Usage: python bench/interpret.py [--prepare-only] [--backends keywords,llamacpp]
                                 [--llm-features 40] [--features 256] [--batch 64] [--out PATH]
                                 [--embed-threads 1] [--ceiling 96]
                                 [--sae-data sentences|documents] [--expansion 4]
                                 [--hard-negatives neighbours|centroid] [--no-compare] [--seed 0] [--extra-seeds 1,2]

--sae-data sentences (the default) trains the SAE on every abstract's sentence vectors and
document vectors (27,874 vectors instead of 2,888: features of a finer grain, document FVU 0.16
instead of 0.38), saves it in sparsify's layout and imports it, as a user importing an SAE
trained elsewhere would; `documents` trains it in the SAE service's pipeline on the document
vectors alone.

--features names an evenly spaced subset (by index, not by score) for quick iterations; only a
full run (no --features) should be committed to bench/results/.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from artifacts import ArtifactStore  # noqa: E402
from contracts.embed import EmbedJobPayload, EmbedJobResult  # noqa: E402
from contracts.sae import SaeConfig, SaeTrainPayload, SaeTrainResult  # noqa: E402

DATA = Path("/work/shared/data/medical-abstracts/medical_tc_test.csv")
CACHE = Path("/tmp/prisma-bench/interp")
RESULTS = ROOT / "bench/results/interpret.json"
SNAPSHOT_SCHEMA = pa.schema([
    pa.field("position", pa.int64(), nullable=False), pa.field("doc_id", pa.int64(), nullable=False),
    pa.field("external_id", pa.string()), pa.field("text", pa.string(), nullable=False),
    pa.field("labels", pa.list_(pa.string())), pa.field("metadata", pa.string()),
])
SAE_CONFIG = SaeConfig(expansion_factor=4, k=32, seed=0)


SENTENCE_STEPS = 3000  # ~29 passes over ~26,000 sentence and document vectors


def train_on_sentences(store: ArtifactStore, emb: EmbedJobResult) -> SaeTrainResult:
    """The SAE trained elsewhere on every abstract's sentence vectors and document vectors (about
    9× more vectors than documents alone), saved in sparsify's layout and imported as a user
    would (POST /sae-runs/import: `analyse_imported_sae`): the codes are of the documents."""
    import numpy as np
    import torch

    from bench.sae_data import TAG, _cached, read_abstracts, split_sentences
    from services.sae.io import save_sae
    from services.sae.pipeline import analyse_imported_sae
    from services.sae.trainer import SaeTrainer, load_embeddings

    name = f"medabs-sentences-x{SAE_CONFIG.expansion_factor}"
    payload = SaeTrainPayload(run_id=2, embeddings=emb.shards, artifact_prefix=f"sae-runs/{name}", config=SAE_CONFIG)
    if store.exists(f"{payload.artifact_prefix}/result.json"):  # imported before: its analysis is reused
        return analyse_imported_sae(payload, f"sae-source/{name}", store)
    docs = load_embeddings(store, emb.shards)
    sents = [s for text in read_abstracts() for s in split_sentences(text)]
    sx = _cached(f"medabs-sentences-{TAG}", sents, 128)  # the encoder's own cache file
    sx = sx / np.maximum(np.linalg.norm(sx, axis=1, keepdims=True), 1e-12)
    x = np.ascontiguousarray(np.concatenate([sx, docs]).astype(np.float32))
    cfg = SAE_CONFIG.model_copy(update={"max_steps": SENTENCE_STEPS}).validate_for_dim(x.shape[1])
    torch.manual_seed(cfg.seed)
    trainer = SaeTrainer(torch.from_numpy(x), cfg, torch.device("cpu"))
    t0 = time.perf_counter()
    while trainer.step < trainer.total_steps:
        trainer.train_step()
    print(f"SAE on {len(x)} sentence+document vectors: {trainer.step} steps in {time.perf_counter() - t0:.0f} s, "
          f"fvu {trainer.curve[-1]['fvu']:.4f}", flush=True)
    save_sae(store, f"sae-source/{name}", trainer.sae, cfg)
    return analyse_imported_sae(payload, f"sae-source/{name}", store)


def prepare(store: ArtifactStore, sae_data: str = "sentences") -> tuple[str, EmbedJobResult, SaeTrainResult]:
    """Snapshot, embedding run and SAE run in the bench store (each reused when present)."""
    snapshot = "datasets/medabs/snapshot.parquet"
    if not store.exists(snapshot):
        with DATA.open(newline="") as f:
            rows = list(csv.DictReader(f))
        table = pa.table({
            "position": list(range(len(rows))), "doc_id": [1000 + i for i in range(len(rows))],
            "external_id": [f"medabs-{i}" for i in range(len(rows))],
            "text": [r["medical_abstract"] for r in rows],
            "labels": [[r["condition_label"]] for r in rows], "metadata": ["{}"] * len(rows),
        }, schema=SNAPSHOT_SCHEMA)
        local = CACHE / "snapshot.tmp.parquet"
        pq.write_table(table, local)
        store.put_file(snapshot, local, kind="snapshot")
        local.unlink()
    emb_key = "embedding-runs/medabs/result.json"
    if store.exists(emb_key):
        emb = EmbedJobResult.model_validate_json(store.read_bytes(emb_key))
    else:
        from services.embedder.config import EmbedderSettings
        from services.embedder.runs import run_embedding

        settings = EmbedderSettings(artifact_root=store.root, threads=2)
        emb = run_embedding(EmbedJobPayload(run_id=1, snapshot_uri=store.uri(snapshot),
                                            artifact_prefix="embedding-runs/medabs"), store,
                            settings=settings, on_progress=lambda p: print(p.message, flush=True))
        store.write_bytes(emb_key, emb.model_dump_json().encode())
    if sae_data == "sentences":
        return store.uri(snapshot), emb, train_on_sentences(store, emb)
    from services.sae.pipeline import train_sae

    prefix = "sae-runs/medabs" + ("" if SAE_CONFIG.expansion_factor == 4 else f"-x{SAE_CONFIG.expansion_factor}")
    sae = train_sae(SaeTrainPayload(run_id=1, embeddings=emb.shards, artifact_prefix=prefix, config=SAE_CONFIG), store)
    return store.uri(snapshot), emb, sae


def corpus_ref(store: ArtifactStore, snapshot: str, emb: EmbedJobResult, sae: SaeTrainResult):
    from contracts.interpret import CorpusRef

    return CorpusRef(snapshot_uri=snapshot, embeddings=[s.uri for s in emb.shards],
                     chunks=[c.uri for c in emb.chunks], codes_csc_uri=sae.artifacts.codes_csc.uri,
                     sae_uri=sae.artifacts.cfg.uri.rsplit("/", 1)[0])


embed_seconds = [0.0]
"""Seconds spent embedding label texts (all calls of label_embedder's function)."""


def label_embedder(threads: int = 1, model_name: str = "all-MiniLM-L6-v2"):
    """The encoder through sentence-transformers (short labels fit its window: same vectors as the
    embedder service's chunk-and-average; E5's labels with its `query: ` prompt, as the gateway
    embeds them), on `threads` torch threads (one is 3× faster than two on this machine's two busy
    cores: no thread waits for a descheduled sibling)."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from contracts.model_allowlist import allowed_models
    from services.embedder.models import reference_path

    torch.set_num_threads(threads)

    path = reference_path(model_name, allowed_models("encoder")[model_name])
    model = SentenceTransformer(str(path), device="cpu")
    prompt = {"prompt_name": "query"} if "query" in model.prompts else {}

    def embed(texts: list[str]) -> np.ndarray:
        t0 = time.perf_counter()
        out = model.encode(texts, batch_size=128, normalize_embeddings=True, convert_to_numpy=True, **prompt)
        embed_seconds[0] += time.perf_counter() - t0
        return out.astype(np.float32)

    return embed


def summarise(records, seconds: float, n_features: int) -> dict:
    import numpy as np

    named = [r for r in records if r.best is not None]
    best = [r.interpretations[r.best] for r in named]
    scores = np.array([b.score_embedding for b in best if b.score_embedding is not None])
    controls = np.array([b.control_embedding for b in best if b.control_embedding is not None])
    top = np.sort(scores)[::-1][: max(1, len(scores) // 2)] if len(scores) else scores
    flags = [b.reliable for b in best if b.reliable is not None]
    det = [b.score_detection for b in best if b.score_detection is not None]
    return {
        "features": n_features, "named": len(named), "skipped": len(records) - len(named),
        "errors": sum(len(r.errors) for r in records), "seconds": round(seconds, 2),
        "features_per_min": round(60 * n_features / seconds, 1),
        "embedding_score_mean": round(float(scores.mean()), 4) if len(scores) else None,
        "embedding_score_top_half_mean": round(float(top.mean()), 4) if len(top) else None,
        "control_embedding_mean": round(float(controls.mean()), 4) if len(controls) else None,
        "detection_score_mean": round(float(np.mean(det)), 4) if det else None,
        "evidence_score_mean": round(float(np.mean(ev)), 4) if (ev := [b.score_evidence for b in best
                                                                       if b.score_evidence is not None]) else None,
        "unreliable_fraction": round(1 - float(np.mean(flags)), 4) if flags else None,
        "shown_label_kinds": {  # a term list "a, b, c", a single word, or a name of 2+ words (phrase or span)
            "term_list": sum(", " in b.label for b in best), "word": sum(len(b.label.split()) == 1 for b in best),
            "name_of_2_plus_words": sum(", " not in b.label and len(b.label.split()) > 1 for b in best)},
        "name_examples": [{"feature": r.feature, "label": b.label, "score": round(b.score_embedding, 3)}
                          for r, b in zip(named, best) if ", " not in b.label and len(b.label.split()) > 1][:12],
        "examples": [{"feature": r.feature, "n_activating": r.n_activating, "label": b.label,
                      "score": round(b.score_embedding, 3) if b.score_embedding is not None else None}
                     for r, b in list(zip(named, best))[:12]],
    }


def run_backend(namer_args: dict, name: str, features: list[int], batch: int) -> dict:
    """Name `features` in batches as the job does (controls from earlier batches), timed."""
    import asyncio

    from contracts.interpret import BackendOptions
    from services.interpreter.backends import build_backend
    from services.interpreter.config import InterpreterSettings
    from services.interpreter.naming import Namer

    opts = BackendOptions(backend=name)
    backend = build_backend(opts, InterpreterSettings(llamacpp_threads=2, max_retries=2, backoff_s=0.1))
    namer = Namer(backends=[(opts, backend)], **namer_args)
    embedded_before, embed_before = namer.embedded, embed_seconds[0]
    records, t0 = [], time.perf_counter()
    for i in range(0, len(features), batch):
        pool = [r.interpretations[r.best].label for r in records[-256:] if r.best is not None]
        records += asyncio.run(namer.name_features(features[i:i + batch], pool))
        print(f"{name}: {len(records)}/{len(features)} features, {time.perf_counter() - t0:.0f} s", flush=True)
    out = summarise(records, time.perf_counter() - t0, len(features))
    out["model"] = backend.model
    out["label_texts_embedded_per_feature"] = round((namer.embedded - embedded_before) / max(1, len(features)), 2)
    out["embedding_seconds"] = round(embed_seconds[0] - embed_before, 2)
    return out


def ceiling(corpus, index, embed, features: list[int], evidence) -> dict:
    """How high text labels of the keywords kind can score: per feature a wide pool (its 8 top and 8
    near terms alone, top × near pairs, 4 phrases, the 3 best spans of 5, 8 and 12 words), the held-out
    AUROC of the one picked on the evidence documents (what naming may do) and of the best one on the
    held-out documents themselves (an oracle, for this measurement only)."""
    import itertools

    import numpy as np

    from services.interpreter.backends.base import NamingRequest
    from services.interpreter.backends.keywords import KeywordsBackend, best_span, top_terms
    from services.interpreter.evidence import excerpts, sample_evidence
    from services.interpreter.scoring import auroc_columns

    kb, pools = KeywordsBackend(index), []
    for f in features:
        ev = sample_evidence(corpus, f, evidence, pool=200)
        req = NamingRequest(f, excerpts(corpus, f, ev.activating, 600), (), activating_ids=ev.pool_activating,
                            non_activating_ids=ev.pool_non_activating, hard_negative_ids=ev.selection_hard)
        ranked, near_r = kb.ranked(req, 60), kb.ranked(req, 60, hard=True)
        topic, near = (([index.display(t) for t in top_terms(r, 8)]) for r in (ranked, near_r))
        pool = {*topic, *near, *(index.display(t) for t in top_terms(ranked, 4, phrases_only=True))}
        pool |= {f"{a}, {b}" for a, b in itertools.product(topic[:4], near[:4]) if a != b}
        for words in (5, 8, 12):
            spans = sorted((x for t in req.activating if (x := best_span(t, dict(ranked[:30]), words))), reverse=True)
            pool |= {x[1] for x in spans[:3]}
        pools.append((ev, sorted(pool)))
    texts = sorted({t for _, pool in pools for t in pool})
    vectors = dict(zip(texts, embed(texts)))
    picked, oracle = [], []
    for ev, pool in pools:
        labels = np.stack([vectors[t] for t in pool]).T  # [d, L]
        v = corpus.vectors
        chosen = auroc_columns(v[ev.selection_activating] @ labels, v[ev.selection_hard + ev.selection_random] @ labels)
        held = auroc_columns(v[ev.holdout_activating] @ labels, v[ev.holdout_non_activating] @ labels)
        picked.append(held[int(np.argmax(chosen))])
        oracle.append(held.max())
    half = lambda a: round(float(np.sort(a)[::-1][: max(1, len(a) // 2)].mean()), 4)  # noqa: E731
    return {"features": len(features), "candidates_per_feature": round(len(texts) / len(features), 1),
            "picked_on_evidence": {"mean": round(float(np.mean(picked)), 4), "top_half_mean": half(picked)},
            "oracle_picked_on_held_out": {"mean": round(float(np.mean(oracle)), 4), "top_half_mean": half(oracle)}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument("--backends", default="keywords,llamacpp")
    parser.add_argument("--llm-features", type=int, default=24,
                        help="features named by language-model back-ends (SmolLM2 on CPU is slow)")
    parser.add_argument("--features", type=int, default=None,
                        help="keywords: an evenly spaced subset of this many features (default: all)")
    parser.add_argument("--batch", type=int, default=64, help="features named per batch (the job's batch_features)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    parser.add_argument("--embed-threads", type=int, default=1, help="torch threads of the label embedder")
    parser.add_argument("--ceiling", type=int, default=0,
                        help="also measure, on this many features, how high keywords-kind labels can score")
    parser.add_argument("--sae-data", choices=["documents", "sentences"], default="sentences",
                        help="train the SAE on the document vectors (the service's way) or on every "
                             "abstract's sentence vectors and document vectors (trained here, imported)")
    parser.add_argument("--expansion", type=int, default=4, help="the SAE's expansion factor (n = 384 × it)")
    parser.add_argument("--selection-activating", type=int, default=None,
                        help="EvidenceConfig.selection_activating (default: the config's)")
    parser.add_argument("--selection-hard", type=int, default=None,
                        help="EvidenceConfig.selection_hard_negatives (default: the config's)")
    parser.add_argument("--hard-negatives", choices=["neighbours", "centroid"], default="neighbours",
                        help="EvidenceConfig.hard_negatives_from; the other one is also run for keywords, "
                             "as keywords_<other>_hard_negatives, unless --no-compare")
    parser.add_argument("--seed", type=int, default=0, help="EvidenceConfig.seed (which documents are drawn)")
    parser.add_argument("--extra-seeds", default="",
                        help="comma-separated seeds keywords is also run with (keywords_seeds: top-half means)")
    parser.add_argument("--no-compare", action="store_true", help="skip the other hard-negative definition")
    args = parser.parse_args()
    global SAE_CONFIG
    SAE_CONFIG = SAE_CONFIG.model_copy(update={"expansion_factor": args.expansion})
    CACHE.mkdir(parents=True, exist_ok=True)
    store = ArtifactStore(str(CACHE / "store"))
    snapshot, emb, sae = prepare(store, args.sae_data)
    if args.prepare_only:
        return
    from services.interpreter.backends.keywords import TermIndex
    from services.interpreter.corpus import load_corpus

    corpus = load_corpus(store, corpus_ref(store, snapshot, emb, sae))
    embed = label_embedder(args.embed_threads)
    embed(["warm-up"])
    t0 = time.perf_counter()
    index = TermIndex(corpus.text(p) for p in range(corpus.n_docs))
    index_s = time.perf_counter() - t0
    from contracts.interpret import EvidenceConfig

    evidence = EvidenceConfig(hard_negatives_from=args.hard_negatives, seed=args.seed,
                              **{k: v for k, v in (("selection_activating", args.selection_activating),
                                                   ("selection_hard_negatives", args.selection_hard))
                                 if v is not None})
    namer_args = dict(corpus=corpus, embed_texts=embed, term_index=index, evidence=evidence)
    counts = corpus.codes.getnnz(axis=0)
    all_features = list(range(corpus.n_features))
    results = {}
    for name in args.backends.split(","):
        feats = all_features
        if name == "keywords" and args.features:
            feats = all_features[:: max(1, len(all_features) // args.features)][: args.features]
        if name == "keywords":
            feats_keywords = feats
        if name != "keywords":  # an evenly spaced subset, by index (not chosen by score)
            feats = all_features[:: max(1, len(all_features) // args.llm_features)][: args.llm_features]
        results[name] = run_backend(namer_args, name, feats, args.batch)
        if name == "keywords" and not args.no_compare:  # the same features, hard negatives found the other way
            other = "centroid" if args.hard_negatives == "neighbours" else "neighbours"
            results[f"keywords_{other}_hard_negatives"] = run_backend(
                {**namer_args, "evidence": evidence.model_copy(update={"hard_negatives_from": other})},
                name, feats, args.batch)
    if args.extra_seeds and "keywords" in results:  # other draws of the evidence and held-out documents
        seeds = {args.seed: results["keywords"]}
        for seed in (int(x) for x in args.extra_seeds.split(",")):
            seeds[seed] = run_backend({**namer_args, "evidence": evidence.model_copy(update={"seed": seed})},
                                      "keywords", feats_keywords, args.batch)
        results["keywords_seeds"] = {str(seed): {k: r[k] for k in ("embedding_score_mean", "embedding_score_top_half_mean",
                                                                    "control_embedding_mean", "unreliable_fraction",
                                                                    "features_per_min")}
                                     for seed, r in seeds.items()}
    if args.ceiling:
        step = max(1, len(all_features) // args.ceiling)
        results["keywords_ceiling"] = ceiling(corpus, index, embed, all_features[::step][: args.ceiling], evidence)
    out = {
        "benchmark": "interpret",
        "data": {"path": str(DATA), "documents": corpus.n_docs, "chunks": int(emb.n_chunks)},
        "embedding": {"model": "all-MiniLM-L6-v2", "service": "services.embedder (chunk-and-average)",
                      "labels": "sentence-transformers encode, normalised"},
        "sae": {"trained_on": args.sae_data if args.sae_data == "documents" else
                "sentence and document vectors of every abstract (bench/sae_data.py sentences), "
                f"{SENTENCE_STEPS} steps; imported (sparsify layout), codes of the documents",
                "n": sae.num_latents, "k": SAE_CONFIG.k, "expansion_factor": SAE_CONFIG.expansion_factor,
                "fvu": round(sae.metrics.fvu, 4), "dead_fraction": sae.metrics.dead_fraction,
                "features_firing_on_40_plus_docs": int((counts >= 40).sum())},
        "settings": {"threads": os.cpu_count(), "machine": platform.machine(),
                     "label_embedder_threads": args.embed_threads, "batch_features": args.batch,
                     "term_index_seconds": round(index_s, 2),
                     "evidence": "defaults of EvidenceConfig (12 shown, 20+20 held out, half hard negatives)",
                     "hard_negatives_from": f"{args.hard_negatives}: " + (
                         "each of the 10 strongest non-held-out activating documents' nearest non-activating "
                         "documents in turn (as delphi's FAISS constructor: neighbours of activating examples)"
                         if args.hard_negatives == "neighbours" else
                         "the non-activating documents nearest to the activating documents' centroid"),
                     "candidates": "keywords: top terms (words and 2-4 word phrases by log-odds), the best phrase, "
                                   "the top term, one extractive span (<= 8 words) of the driving-chunk excerpts, "
                                   "and term lists composed greedily from 16 topic + 8 near terms; at most 8 a "
                                   "feature, labels at most 8 words",
                     "selection": "each back-end's candidates compared by embedding AUROC on evidence documents only "
                                  "(up to 200 activating across ranks, 66 hard + 66 random negatives, never held "
                                  "out); the best one is kept (a name rather than a term list when within 0.02) and "
                                  "only it is scored on the held-out documents",
                     "load_average_1_5_15_min": [round(x, 1) for x in os.getloadavg()],
                     "embedding_threshold": 0.65},
        "goals": {"keywords_features_per_min": 1000, "top_half_mean_score": 0.80, "control_mean_max": 0.55},
        "results": results,
    }
    if args.out.exists():  # back-ends not run this time keep their last results, marked as such
        for name, old in json.loads(args.out.read_text()).get("results", {}).items():
            if name not in results:
                results[name] = {**old, "not_rerun": old.get("not_rerun", "carried over from an earlier run "
                                                          "(before candidate selection on evidence documents)")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
