"""The GPU path → bench/results/gpu.json, on a machine with a CUDA device (CI has none).

(a) Embedding on CUDA: Prisma's encoder at its 'auto' precision there (bf16) and in fp32, against
    sentence-transformers' `encode` on the same model directory and the same GPU, in fp32 and bf16
    (`model_kwargs={"dtype": ...}`), at its default batch of 32 and at 256; the same texts, runs
    interleaved, median of repeats. Texts: `--notes` demo notes (documents), their distinct segments
    (clauses) and the Medical Abstracts (real, read in place). tokens/s counts what each one fed the
    model (as bench/embed.py). Quality: cosine of Prisma's CUDA bf16 vectors to its CPU fp32 ones.
(b) The first user's scale (DESIGN: 200,000 records end to end on one GPU in well under an hour):
    `--scale-notes` demo notes embedded as an embedding run embeds them (each note whole, each
    distinct segment once) on CUDA; seconds per stage and the figure scaled to 200,000 notes
    (linearly: distinct segments grow slower than notes, so it is an upper bound), plus the SAE
    stage at the trainer's measured samples/s and the default epochs.
(c) SAE training on CUDA: Prisma's trainer against eai-sparsify's `SparseCoder` (bench/sae.py's
    `SparsifyRun`: the same d, n, k, batch, steps, lr, b_dec, Adam and batches), stepped in
    interleaved blocks; samples/s and held-out FVU. Training vectors: the training abstracts' segment
    and document vectors from (a) (split 90/10 by abstract); held out: the other abstracts'.

On a lent machine that cannot install packages, the model travels as bench/gpu_model.py makes it
(the 4-bit file with the word-embedding rows no text here uses set to zero; checked below).

    python bench/gpu.py [--notes 2000] [--scale-notes 50000] [--sae-steps 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.embed import cosines, interleaved, machine_info, negex_sentences, segments_of, timed  # noqa: E402
from bench.sae_data import DATA as ABSTRACTS, read_abstracts  # noqa: E402
from contracts.sae import SaeConfig  # noqa: E402
from services.embedder.distinct import distinct_texts  # noqa: E402
from services.embedder.encoder import default_batch_tokens, embed_texts, tokenize_texts  # noqa: E402
from services.embedder.models import LoadedModel, load_model, select_dtype  # noqa: E402
from services.embedder.segments import segment_spans  # noqa: E402
from services.sae.trainer import SaeTrainer, holdout_split  # noqa: E402

RESULTS = ROOT / "bench/results/gpu.json"
MODEL = "multilingual-e5-small"
FIRST_USER_NOTES = 200_000


def demo_notes(n: int) -> list[str]:
    from gateway.demo.corpus import generate_notes

    return [note.text for note in generate_notes(n)]


def texts_used(notes: list[str], n_timed: int, abstracts: list[str], negex: list[str]) -> list[str]:
    """Every distinct text this benchmark embeds (and tests/test_cuda.py's), as ST also sees them
    (prompt prepended): what bench/gpu_model.py keeps the rows of."""
    from tests.test_cuda import TEXTS

    pieces = [*notes, *segments_of(notes), *abstracts, *segments_of(abstracts), *negex, *TEXTS]
    timed_texts = [*notes[:n_timed], *segments_of(notes[:n_timed]), *abstracts]
    return list(dict.fromkeys([*pieces, *(p + t for p in ("passage: ", "query: ") for t in timed_texts)]))


def token_ids(lm: LoadedModel, texts: list[str]) -> np.ndarray:
    """The distinct token ids of `texts` (no specials), in batches."""
    seen: set[int] = set()
    for i in range(0, len(texts), 20_000):
        seen.update(tokenize_texts(lm, texts[i:i + 20_000]).ids.tolist())
    return np.array(sorted(seen), dtype=np.int64)


def check_vocabulary(lm: LoadedModel, texts: list[str]) -> int:
    """The number of all-zero word-embedding rows (bench/gpu_model.py's transfer copy zeroes the
    unused ones); refuses to time texts that read one: their vectors would not be the model's."""
    weight = lm.model.get_input_embeddings().weight  # [V, d]
    zeroed = (weight == 0).all(1).nonzero().flatten().cpu().numpy()
    if len(zeroed):
        hit = np.intersect1d(token_ids(lm, texts), zeroed)
        if len(hit):
            raise SystemExit(f"{len(hit)} token ids of these texts are zeroed in the transfer copy (e.g. {hit[:5]}); "
                             "remake it with bench/gpu_model.py over the same arguments")
    return len(zeroed)


def gpu_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "none (CPU: a trial of the script)"


def sync_timed(fn: Callable[[], int], n_docs: int) -> dict[str, float]:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return timed(fn, n_docs)


def median_of(runs: list[dict[str, float]]) -> dict[str, object]:
    return {"seconds": statistics.median(r["seconds"] for r in runs), "tokens": runs[0]["tokens"],
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
            "docs_per_s": statistics.median(r["docs_per_s"] for r in runs),
            "runs_tokens_per_s": [round(r["tokens_per_s"]) for r in runs]}


def bench_embedding(sets: dict[str, list[str]], repeats: int, device: torch.device) -> tuple[dict, dict[str, LoadedModel]]:
    from sentence_transformers import SentenceTransformer

    half = select_dtype("auto", device)
    models = {"prisma_auto": load_model(MODEL, device=device, dtype=half),
              "prisma_fp32": load_model(MODEL, device=device, dtype=torch.float32)}
    path = models["prisma_fp32"].path
    prompt = models["prisma_fp32"].prompt_text or ""
    st = {"fp32": SentenceTransformer(path, device=str(device), model_kwargs={"dtype": torch.float32}),
          "bf16": SentenceTransformer(path, device=str(device), model_kwargs={"dtype": torch.bfloat16})}

    def st_tokens(texts: list[str]) -> int:
        model = st["fp32"]
        enc = model.tokenizer([prompt + t for t in texts], truncation=True, max_length=model.max_seq_length)
        return sum(len(x) for x in enc["input_ids"])

    tokens_cache: dict[int, int] = {}

    def st_run(which: str, batch: int) -> Callable[[list[str]], int]:
        def run(texts: list[str]) -> int:
            st[which].encode(texts, batch_size=batch, convert_to_numpy=True, prompt=prompt or None)
            return tokens_cache.setdefault(id(texts), st_tokens(texts))
        return run

    def prisma(lm: LoadedModel) -> Callable[[list[str]], int]:
        return lambda texts: int(embed_texts(lm, texts, batch_tokens=default_batch_tokens(device)).n_tokens.sum())

    systems = {"prisma_auto": prisma(models["prisma_auto"]), "prisma_fp32": prisma(models["prisma_fp32"]),
               "st_fp32_b32": st_run("fp32", 32), "st_bf16_b32": st_run("bf16", 32),
               "st_bf16_b256": st_run("bf16", 256)}
    for fn in systems.values():  # warm-up: cuBLAS handles, kernels, tokenizer caches
        fn(sets["documents"][:64] + sets["segments"][:256])
    runs = interleaved(systems, sets, repeats, timer=sync_timed)
    results = {s: {k: median_of(v) for k, v in per.items()} for s, per in runs.items()}

    def combined(system: str) -> float:
        return sum(results[s][system]["tokens"] for s in results) / sum(results[s][system]["seconds"] for s in results)

    ratios = {f"{a}_vs_{b}": combined(a) / combined(b) for a, b in (
        ("prisma_auto", "st_bf16_b32"), ("prisma_auto", "st_bf16_b256"), ("prisma_auto", "st_fp32_b32"),
        ("prisma_fp32", "st_fp32_b32"))}
    ratios["by_set"] = {s: {f"{a}_vs_{b}": r[a]["tokens_per_s"] / r[b]["tokens_per_s"]
                            for a, b in (("prisma_auto", "st_bf16_b256"), ("prisma_fp32", "st_fp32_b32"))}
                        for s, r in results.items()}
    out = {"precision_auto": str(half).removeprefix("torch."), "batch_tokens": default_batch_tokens(device),
           "st_max_seq_length": st["fp32"].max_seq_length, "prompt": prompt,
           "tokens_per_s_combined": {k: combined(k) for k in systems}, "ratios": ratios, "results": results}
    st.clear()
    return out, models


def bench_quality(lm: LoadedModel, sets: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Cosine of the CUDA vectors (auto precision) to CPU fp32's, per set."""
    cpu = load_model(MODEL, device=torch.device("cpu"), dtype=torch.float32)
    return {name: cosines(embed_texts(lm, texts).vectors, embed_texts(cpu, texts).vectors)
            for name, texts in sets.items()}


def bench_scale(lm: LoadedModel, notes: list[str]) -> dict[str, object]:
    """The notes embedded as an embedding run does: each whole, each distinct segment once."""
    if lm.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    docs = embed_texts(lm, notes)
    t1 = time.perf_counter()
    segs = segments_of(notes)
    found = distinct_texts(lm, segs)
    t2 = time.perf_counter()
    seg = embed_texts(lm, found.texts)
    t3 = time.perf_counter()
    seconds = {"documents": t1 - t0, "segmenting_and_distinct": t2 - t1, "distinct_segments": t3 - t2}
    total = sum(seconds.values())
    scale = FIRST_USER_NOTES / len(notes)
    return {"notes": len(notes), "segments": len(segs), "distinct_segments": len(found.texts),
            "tokens": {"documents": int(docs.n_tokens.sum()), "distinct_segments": int(seg.n_tokens.sum())},
            "seconds": seconds, "seconds_total": total,
            "tokens_per_s": float((docs.n_tokens.sum() + seg.n_tokens.sum()) / (seconds["documents"] + seconds["distinct_segments"])),
            "peak_gpu_memory_mib": torch.cuda.max_memory_allocated() / 2**20 if lm.device.type == "cuda" else None,
            "seconds_at_200000_notes_linear": total * scale}


def sae_vectors(lm: LoadedModel, abstracts: list[str]) -> dict[str, np.ndarray]:
    """Training = the training abstracts' segment + document vectors; held out = the others'."""
    doc, start, end = segment_spans(abstracts)
    seg_vecs = embed_texts(lm, [abstracts[d][a:b] for d, a, b in zip(doc.tolist(), start.tolist(), end.tolist())]).vectors
    doc_vecs = embed_texts(lm, abstracts).vectors
    train, hold = holdout_split(len(abstracts), 0.1, seed=0)
    in_train = np.isin(doc, train)
    return {"train": np.concatenate([seg_vecs[in_train], doc_vecs[train]]), "holdout_segments": seg_vecs[~in_train],
            "holdout_documents": doc_vecs[hold]}


def bench_sae(vectors: dict[str, np.ndarray], steps: int, batch_size: int, device: torch.device, block: int = 100) -> dict:
    from bench.sae import SparsifyRun, fvu, prisma_encode_decode, train_interleaved

    x = torch.from_numpy(vectors["train"]).to(device)
    cfg = SaeConfig(expansion_factor=8, k=32, batch_size=batch_size, max_steps=steps, seed=0, device=device.type)
    prisma = SaeTrainer(x, cfg, device)
    peer = SparsifyRun(x, cfg, prisma.batch_rows)
    for run in (prisma, peer):  # warm-up (kernels, cuBLAS); then both start again from the seed, timed
        run.train_step()
    prisma = SaeTrainer(x, cfg, device)
    peer = SparsifyRun(x, cfg, prisma.batch_rows)  # the same batches in the same order
    sync_timed(lambda: 0, 1)
    seconds = train_interleaved(prisma, peer, steps, block)
    samples = steps * prisma.batch_size
    held = {k: torch.from_numpy(v).to(device) for k, v in vectors.items() if k.startswith("holdout")}

    def figures(encode_decode: Callable, secs: float) -> dict[str, float]:
        return {"samples_per_s": round(samples / secs, 1), "seconds": round(secs, 2),
                **{f"fvu_{k}": fvu(encode_decode, v) for k, v in held.items()}, "fvu_train": fvu(encode_decode, x)}

    ours = figures(lambda v: prisma_encode_decode(prisma, v), seconds["prisma"])
    theirs = figures(peer.encode_decode, seconds["sparsify"])
    return {"config": {"d": x.shape[1], "n": prisma.sae.num_latents, "k": cfg.k, "batch_size": prisma.batch_size,
                       "steps": steps, "epochs": round(samples / len(x), 2), "training_vectors": len(x),
                       "interleaved_block_steps": block, "precision": "fp32 (TF32 off: torch's default)"},
            "prisma": ours, "sparsify": {**theirs, "version": peer.version},
            "speed_ratio": ours["samples_per_s"] / theirs["samples_per_s"],
            "fvu_relative_difference": ours["fvu_holdout_segments"] / theirs["fvu_holdout_segments"] - 1}


def profile_steps(runs: dict[str, object], steps: int, path: Path) -> dict[str, float]:
    """`steps` training steps of each run under torch.profiler: the kernel and operator tables into
    `path`, and each run's wall-clock milliseconds a step (profiler overhead included)."""
    from torch.profiler import ProfilerActivity, profile

    per_step, tables = {}, []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    for name, run in runs.items():
        with profile(activities=activities) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                run.train_step()  # type: ignore[attr-defined]
            per_step[name] = (time.perf_counter() - t0) / steps * 1000
        for key in ("self_cuda_time_total", "self_cpu_time_total"):
            if key == "self_cuda_time_total" and not torch.cuda.is_available():
                continue
            tables.append(f"== {name}: {steps} steps, sorted by {key}\n"
                          + prof.key_averages().table(sort_by=key, row_limit=25))
    path.write_text("\n\n".join(tables) + "\n")
    return per_step


def save(report: dict, out: Path) -> None:
    """The report as measured so far: written after each stage, so a failure late in a call keeps the rest."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=float) + "\n")


def sae_only(args: argparse.Namespace, report: dict, device: torch.device, abstracts: list[str],
             started: float) -> None:
    from bench.sae import SparsifyRun

    lm = load_model(MODEL, device=device, dtype=select_dtype("auto", device))
    report["model_rows_zeroed_for_transfer"] = check_vocabulary(lm, [*abstracts, *segments_of(abstracts)])
    report["model_provenance"] = lm.provenance
    vectors = sae_vectors(lm, abstracts)
    report["sae"] = {f"batch_{b}": bench_sae(vectors, steps, b, device)
                     for b, steps in ((256, args.sae_steps), (4096, max(args.sae_steps // 4, 1)))}
    print(json.dumps(report["sae"], indent=1, default=float), flush=True)
    save(report, args.out)
    x = torch.from_numpy(vectors["train"]).to(device)
    cfg = SaeConfig(expansion_factor=8, k=32, batch_size=256, max_steps=200, seed=0, device=device.type)
    prisma = SaeTrainer(x, cfg, device)
    sparse_products = SaeTrainer(x, cfg, device)  # the same trainer with embedding_bag's products (the CPU's)
    sparse_products.sae.dense = False
    runs = {"prisma": prisma, "prisma_sparse_products": sparse_products,
            "sparsify": SparsifyRun(x, cfg, prisma.batch_rows)}
    for run in runs.values():
        run.train_step()
    report["profile_ms_per_step_batch_256"] = profile_steps(runs, 50, args.out.with_suffix(".profile.txt"))
    report["machine"] = machine_info(torch.get_num_threads()) | {
        "gpu": gpu_name(device), "cuda": torch.version.cuda, "gpu_count": torch.cuda.device_count()}
    report["seconds_total"] = time.perf_counter() - started
    save(report, args.out)
    print(json.dumps({b: {k: v[k] for k in ("speed_ratio", "fvu_relative_difference")} for b, v in report["sae"].items()}
                     | {"profile_ms_per_step": report["profile_ms_per_step_batch_256"]}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=2000, help="demo notes timed in (a), with their distinct segments")
    parser.add_argument("--scale-notes", type=int, default=50_000, help="demo notes embedded in (b)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sae-steps", type=int, default=3000)
    parser.add_argument("--abstracts", type=Path, default=ABSTRACTS)
    parser.add_argument("--max-abstracts", type=int, default=None, help="the first N abstracts only (a trial)")
    parser.add_argument("--negex", type=Path, default=Path("/work/shared/data/negex/rsAnnotations-1-120-random.txt"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only-sae", action="store_true", help="(c) alone, with a profile of the training steps")
    parser.add_argument("--device", default="cuda", help="'cpu' only to try the script itself (small sizes)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark measures the GPU path")
    device = torch.device(args.device)
    started = time.perf_counter()
    notes = demo_notes(args.scale_notes)
    abstracts = read_abstracts(args.abstracts)[: args.max_abstracts]
    sets = {"documents": notes[: args.notes], "segments": [], "abstracts": abstracts}

    report: dict[str, object] = {"benchmark": "gpu", "model": MODEL, "device": gpu_name(device)}
    if args.only_sae:
        return sae_only(args, report, device, abstracts, started)
    probe = load_model(MODEL, device=device, dtype=torch.float32)
    sets["segments"] = distinct_texts(probe, segments_of(sets["documents"])).texts
    negex = negex_sentences(args.negex)
    report["model_rows_zeroed_for_transfer"] = check_vocabulary(probe, texts_used(notes, args.notes, abstracts, negex))
    report["model_provenance"] = probe.provenance
    del probe

    report["embedding"], models = bench_embedding(sets, args.repeats, device)
    save(report, args.out)
    print(json.dumps(report["embedding"]["ratios"], indent=1), flush=True)
    quality_sets = {"documents": sets["documents"][:200], "segments": sets["segments"][:1000],
                    "abstracts": abstracts[:200], "negex": negex[:1000]}
    report["quality_auto_vs_cpu_fp32"] = bench_quality(models["prisma_auto"], quality_sets)
    report["scale"] = bench_scale(models["prisma_auto"], notes)
    print(json.dumps(report["scale"], indent=1), flush=True)
    save(report, args.out)
    vectors = sae_vectors(models["prisma_auto"], abstracts)
    report["sae"] = {f"batch_{b}": bench_sae(vectors, steps, b, device)
                     for b, steps in ((256, args.sae_steps), (4096, max(args.sae_steps // 4, 1)))}
    print(json.dumps(report["sae"], indent=1, default=float), flush=True)
    save(report, args.out)
    default = SaeConfig()
    scale = report["scale"]
    rows = FIRST_USER_NOTES * (1 + scale["distinct_segments"] / scale["notes"])  # type: ignore[operator]
    sae_rate = report["sae"]["batch_256"]["prisma"]["samples_per_s"]  # type: ignore[index]
    report["first_user_estimate"] = {
        "notes": FIRST_USER_NOTES, "embedding_seconds_linear": scale["seconds_at_200000_notes_linear"],
        "sae_training_rows": rows, "sae_epochs_default": default.epochs,
        "sae_seconds_at_default_batch": rows * default.epochs / sae_rate,
        "note": "engine stages only (no shards, naming or indexes); distinct segments scaled linearly (an upper bound)"}
    report["machine"] = machine_info(torch.get_num_threads()) | {
        "gpu": gpu_name(device), "cuda": torch.version.cuda, "gpu_count": torch.cuda.device_count()}
    report["seconds_total"] = time.perf_counter() - started
    save(report, args.out)
    print(json.dumps({k: report[k] for k in ("first_user_estimate", "seconds_total")}, indent=1, default=float))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
