"""Naming speed → bench/results/naming-speed.json: the demo's naming, the code before the speed-ups against now.

One SAE run of `prisma demo` (its data directory, `--data`: the clause corpus the demo names, its segment
codes, every feature) is named by two checkouts: `--before` (a commit, checked out once as a `git worktree`
under /tmp/prisma-bench/naming-speed) and this working tree, each in its own process that imports that
checkout's services/, alternating (before, now, now, before, …) so that the shared machine's load falls on both
alike. A run is what the `interpret_run` job does in embedded mode, without its shards: Namer (term index
included) over the features in browse order, 64 a batch (each PREPARE_BATCHES batches prepared together where
the checkout's runs.py does so), controls from the latest names, labels embedded by
the embedding run's model as the demo embeds them (the embedder service's
model cache at its default settings: its precision, its threads); loading the corpus and
the model is not timed; `cpu_seconds` counts a child process's (one drawing groups ahead) with the run's. `ratio_features_per_min` is now's best over before's best; `names` compares every
feature's shown name, score, threshold and reliability between the two's last runs.

`--data` may also be the data directory of `bench/e2e.py --embedding imported --until sae` (its `data/`): imported
vectors have no segments, so that run's documents are named, as its naming job names them, with labels embedded by
the default model (the import's query model).

Usage: nice -n 10 python bench/naming_speed.py --data <prisma demo data dir> --before <commit> [--rounds 2]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path("/tmp/prisma-bench/naming-speed")
RESULTS = ROOT / "bench/results/naming-speed.json"


def corpus_ref(artifacts: Path):
    """The demo's clause corpus as the naming job reads it (gateway/domain/features/interpret.py `_corpus_ref`),
    from the store's files: the first dataset, embedding run and SAE run."""
    from contracts.interpret import CorpusRef

    def uris(pattern: str) -> list[str]:
        return [f"file://{p}" for p in sorted(artifacts.glob(pattern))]

    sae = sorted(artifacts.glob("sae-runs/*/cfg.json"))[0].parent
    segments, segment_codes = uris("embedding-runs/*/segments/shard-*.npz"), uris(f"sae-runs/{sae.name}/segment*codes*.npz")
    ref = CorpusRef(snapshot_uri=uris("datasets/*/snapshot.parquet")[0],
                    embeddings=uris("embedding-runs/*/embeddings/shard-*.npy"),
                    chunks=uris("embedding-runs/*/chunks/shard-*.npz"),
                    codes_csc_uri=f"file://{sae}/codes.csc.npz", sae_uri=f"file://{sae}")
    # a run with segments names its clauses; imported vectors without segments (bench/e2e.py) name documents
    return ref.model_copy(update={"segments": segments, "segment_codes_uri": segment_codes[0]}) if segment_codes else ref


def demo_label_embedder(artifacts: Path):
    """Labels embedded as the demo embeds them (gateway/embedded.py `label_embedder`): the embedding run's model,
    pooling and query prompt, through the embedder service's model cache at its settings' precision, padded
    as the run's texts were (its spec's pad_multiple), so that both checkouts embed a label alike."""
    from services.embedder.config import EmbedderSettings
    from services.embedder.encoder import embed_texts
    from services.embedder.models import ModelCache

    spec = json.loads(next(artifacts.glob("embedding-runs/*/spec.json")).read_text())
    if spec.get("model", "").startswith("imported:"):  # bench/e2e.py's import: the default model is its query model
        spec = {"model": None, "pooling": "mean", "normalize": True, "prompt_name": "query"}
    lm = ModelCache.from_settings(EmbedderSettings(threads=1)).get(spec.get("model"), prompt_name="query" if spec.get("prompt") or spec.get(
        "prompt_name") else None)
    # padded as the run's own texts were (a run made before pad_multiple existed: 1), where the checkout pads
    pad = ({"pad_multiple": spec.get("pad_multiple", 1)} if "pad_multiple" in inspect.signature(embed_texts).parameters
           else {})
    return lambda texts: embed_texts(lm, texts, pooling=spec.get("pooling", "mean"), normalize=spec.get("normalize", True),
                                     **pad).vectors


def name_all(data: Path, limit: int | None) -> dict:
    """One timed naming run with the services/ first on sys.path: seconds, CPU seconds, every feature's shown name."""
    import asyncio

    from artifacts import ArtifactStore
    from contracts.interpret import BackendOptions
    from services.interpreter import runs
    from services.interpreter.corpus import load_corpus
    from services.interpreter.naming import Namer, naming_order
    from services.interpreter.phrases import PhraseBackend

    store = ArtifactStore(str(data / "artifacts"))
    ref = corpus_ref(data / "artifacts")
    corpus = load_corpus(store, ref)
    embed = demo_label_embedder(data / "artifacts")
    embed(["warm-up"])
    spent = [0.0]

    def timed(texts: list[str]):
        t = time.perf_counter()
        out = embed(texts)
        spent[0] += time.perf_counter() - t
        return out

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    children0 = before.ru_utime + before.ru_stime
    t0, c0 = time.perf_counter(), time.process_time()
    namer = Namer(corpus, [(BackendOptions(backend="keywords"), PhraseBackend())], timed)
    features = naming_order(corpus)[:limit]
    records, recent = [], []
    ahead = 64 * getattr(runs, "PREPARE_BATCHES", 0)  # as the checkout's name_run prepares batches, if it does
    groups = getattr(runs, "AHEAD_GROUPS", 1)  # groups prepared beyond the one named
    for i in range(0, len(features), 64):
        if ahead and i % ahead == 0:  # this group and those ahead (the first time), the next one, as name_run does
            for start in (list(range(0, groups * ahead, ahead)) if i == 0 else []) + [i + groups * ahead]:
                asyncio.run(namer.prepare(features[start:start + ahead]))
        got = asyncio.run(namer.name_features(features[i:i + 64], [lab for lab in recent[-256:] if lab]))
        records += got
        recent += [r.interpretations[r.best].label if r.best is not None else None for r in got]
    if hasattr(namer, "close"):  # the child process drawing groups ahead, if any: joined, so its CPU is counted
        namer.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0 + children.ru_utime + children.ru_stime - children0
    names = {}
    for r in records:
        b = r.interpretations[r.best] if r.best is not None else None
        names[str(r.feature)] = None if b is None else [b.label, b.score, b.threshold, b.reliable, b.unreliable_reason,
                                                       [a.label for a in b.alternatives]]
    return {"segments": corpus.n_docs, "named_on": "segments" if ref.segments else "documents", "features": len(records), "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "label_embedding_seconds": round(spent[0], 2), "labels_embedded": namer.embedded,
            "features_per_min_besides_label_embedding": round(60 * len(records) / max(seconds - spent[0], 1e-9), 1),
            "features_per_min": round(60 * len(records) / seconds, 1), "names": names}


def checkout(commit: str) -> Path:
    """A worktree of `commit` (made once)."""
    path = CACHE / f"before-{commit[:12]}"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True)
    return path


def run_side(code: Path, data: Path, limit: int | None) -> dict:
    out = CACHE / f"run-{os.getpid()}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(code), "--data", str(data), "--worker-out", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(cmd + (["--limit", str(limit)] if limit else []), check=True, env=env, cwd=str(code))
    return json.loads(out.read_text())


FIELDS = ("label", "score", "threshold", "reliable", "reason", "alternatives")
"""What a feature's record holds (name_all's `names`), in order."""


def compare(before: dict, now: dict) -> dict:
    """Every feature whose record differs, counted by what differs (`by_field`); every one whose shown name
    differs listed (`names_changed`), the rest up to 50 (`differences`)."""
    differ = [{"feature": int(f), "before": before[f], "now": now.get(f)} for f in before if before[f] != now.get(f)]
    fields = {f: 0 for f in FIELDS}
    named = []
    for d in differ:
        b, n = d["before"] or [None] * len(FIELDS), d["now"] or [None] * len(FIELDS)
        for field, x, y in zip(FIELDS, b, n):
            fields[field] += x != y
        if b[0] != n[0]:
            named.append(d)
    return {"features_compared": len(before), "identical": not differ and before.keys() == now.keys(),
            "n_differences": len(differ), "by_field": fields, "names_changed": named,
            "differences": [d for d in differ if d not in named][:50]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="a `prisma demo` data directory whose features were trained")
    parser.add_argument("--before", help="the commit before the speed-ups")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="name only the first features (quick checks)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:  # a child: this checkout's code first on the path
        sys.path.insert(0, str(args.worker))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        args.worker_out.write_text(json.dumps(name_all(args.data, args.limit)))
        return
    sides = {"before": checkout(args.before), "now": ROOT}
    runs: dict[str, list[dict]] = {"before": [], "now": []}
    for r in range(args.rounds):
        for side in (("before", "now") if r % 2 == 0 else ("now", "before")):
            runs[side].append(run_side(sides[side], args.data, args.limit))
            print(f"round {r} {side}: {runs[side][-1]['seconds']} s, {runs[side][-1]['features_per_min']} features/min",
                  flush=True)
    from classify import machine  # bench/classify.py: the CPU as every bench reports it

    cpu = machine()
    best = {s: max(x["features_per_min"] for x in runs[s]) for s in runs}
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = {
        "benchmark": "naming speed: " + ("the demo's clause corpus" if runs["now"][-1].get("named_on") != "documents" else
                                         "the documents of an imported-vectors run (bench/e2e.py --until sae)")
                     + ", every feature, keywords back-end, embedding scorer",
        "before_commit": args.before[:12], "now_commit": head, "segments": runs["now"][-1]["segments"],
        "features": runs["now"][-1]["features"],
        "runs": {s: [{k: v for k, v in x.items() if k != "names"} for x in runs[s]] for s in runs},
        "features_per_min_before": best["before"], "features_per_min_now": best["now"],
        "ratio_features_per_min": round(best["now"] / best["before"], 2),
        "names": compare(runs["before"][-1]["names"], runs["now"][-1]["names"]),
        "machine": {**{k: cpu[k] for k in ("cpu", "cpu_family_model", "native_bf16", "amx", "date")}, "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "load_average_1_5_15_min": [round(x, 1) for x in os.getloadavg()]},
    }
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: report[k] for k in ("features_per_min_before", "features_per_min_now", "ratio_features_per_min")}))


if __name__ == "__main__":
    main()
