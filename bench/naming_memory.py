"""Naming's memory against features named (issue #18): does the job grow with the features it has named?

A synthetic corpus — the demo generator's notes, each embedded as a hashed bag of words, coded by a
random projection's top k (a stand-in SAE) — is named by `name_run` (keywords back-end, the same
hashed embedder for labels, or MiniLM in this process), and then (`--record`) recorded by the
gateway's `record_interpretations` into a SQLite database. After every batch the process's RSS is
read (naming trims glibc's arenas after each batch, so RSS is what is held) and, with
`--tracemalloc`, the bytes of live Python allocations. The slope of each against features named
is the figure: a job that names features in batches should hold one batch, not every feature
named so far.

    nice -n 10 python bench/naming_memory.py --docs 20000 --features 8192 --name 6144 [--embed-cache 0]
                                             [--embedder minilm] [--tracemalloc] [--record]

Prints a JSON summary: MB per 1,000 features named (RSS and, with --tracemalloc, live Python
objects), fitted past the first quarter of the run; with --record, recording's peak above what
the process held before it. Nothing is written to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from artifacts import ArtifactStore  # noqa: E402
from artifacts.heap import trim_heap  # noqa: E402
from contracts.interpret import CorpusRef, InterpretRunPayload, InterpretRunResult  # noqa: E402
from contracts.jobs import Progress  # noqa: E402
from gateway.demo.corpus import generate_notes  # noqa: E402
from services.interpreter import naming  # noqa: E402
from services.interpreter.config import InterpreterSettings  # noqa: E402
from services.interpreter.runs import name_run  # noqa: E402

MB = 1e6
WORD = np.random.default_rng(0).standard_normal((1 << 16, 384)).astype(np.float32)
"""A vector per hashed word: texts and labels embedded alike, so label scores mean something."""


def hashed_embed(texts: list[str]) -> np.ndarray:
    """[len(texts), 384] unit rows: the sum of each text's words' hashed vectors."""
    out = np.zeros((len(texts), WORD.shape[1]), np.float32)
    for i, text in enumerate(texts):
        ids = [zlib.crc32(w.encode()) & 0xFFFF for w in text.lower().split()]
        if ids:
            out[i] = WORD[ids].sum(0)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


def label_embedder(kind: str) -> Callable[[list[str]], np.ndarray]:
    """How labels are embedded: `hashed_embed`, or MiniLM as the gateway's in-process embedder calls it."""
    if kind == "hashed":
        return hashed_embed
    import torch

    from services.embedder.encoder import embed_texts
    from services.embedder.models import load_model

    lm = load_model("default", device=torch.device("cpu"), dtype=torch.float32)
    return lambda texts: embed_texts(lm, texts).vectors


def write_corpus(store: ArtifactStore, n_docs: int, n_features: int, k: int) -> CorpusRef:
    """Snapshot, vectors and top-k codes of a random projection, in the store as a naming job reads them."""
    texts = [note.text for note in generate_notes(n_docs, seed=0)]
    table = pa.table({"position": np.arange(n_docs), "doc_id": np.arange(1, n_docs + 1), "text": texts})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    store.write_bytes("snapshot.parquet", buf.getvalue(), kind="snapshot")
    vectors = np.concatenate([hashed_embed(texts[i:i + 4096]) for i in range(0, n_docs, 4096)])
    buf = io.BytesIO()
    np.save(buf, vectors)
    store.write_bytes("vectors.npy", buf.getvalue(), kind="embeddings")
    proj = np.random.default_rng(1).standard_normal((vectors.shape[1], n_features)).astype(np.float32)
    rows, cols, vals = [], [], []
    for start in range(0, n_docs, 4096):
        pre = vectors[start:start + 4096] @ proj  # [b, n]
        top = np.argpartition(-pre, k - 1, axis=1)[:, :k]
        rows.append(np.repeat(np.arange(start, start + len(pre)), k))
        cols.append(top.ravel())
        vals.append(np.maximum(np.take_along_axis(pre, top, 1).ravel(), 1e-3))
    codes = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(n_docs, n_features), dtype=np.float32)
    buf = io.BytesIO()
    sp.save_npz(buf, codes)
    store.write_bytes("codes.npz", buf.getvalue(), kind="codes")
    return CorpusRef(snapshot_uri=store.uri("snapshot.parquet"), embeddings=[store.uri("vectors.npy")],
                     codes_csc_uri=store.uri("codes.npz"))


def vm(field: str = "VmRSS") -> int:
    """This process's VmRSS or VmHWM (peak RSS), bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def record(root: Path, store: ArtifactStore, result: InterpretRunResult, n_docs: int, n_features: int) -> dict:
    """The gateway's `record_interpretations` of the run into a fresh SQLite database (one feature row a
    latent, as an SAE run has): its peak RSS and peak of live Python bytes above what was held before."""
    from gateway.db import session_factory, session_scope
    from gateway.domain.features import repo as feature_repo
    from gateway.domain.features.interpret import record_interpretations
    from gateway.migrate import upgrade
    from tests.factories import add_stub_dataset, add_succeeded_embedding_run, add_succeeded_sae_run

    url = f"sqlite:///{root}/gateway.db"
    upgrade(url)
    factory = session_factory(url)
    with session_scope(factory) as session:
        ds = add_stub_dataset(session, name="bench", n_documents=n_docs)
        emb = add_succeeded_embedding_run(session, dataset_id=ds.id, dim=WORD.shape[1], n_documents=n_docs)
        run = add_succeeded_sae_run(session, embedding_run_id=emb.id, d=WORD.shape[1], n_latents=n_features, k=32)
        feature_repo.replace_features(session, sae_run_id=run.id, rows=[
            {"sae_run_id": run.id, "index": i, "histogram": {}, "neighbours": {}} for i in range(n_features)])
        run_id = run.id
    gc.collect()
    trim_heap()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM restarts from the current RSS
    before = vm()
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    record_interpretations(SimpleNamespace(store=store, factory=factory), run_id, result)
    seconds = time.perf_counter() - t0
    traced_peak = tracemalloc.get_traced_memory()[1] - base
    if not tracing:
        tracemalloc.stop()
    return {"record_seconds": round(seconds, 1), "record_rss_peak_mb": round((vm("VmHWM") - before) / MB, 1),
            "record_traced_peak_mb": round(traced_peak / MB, 1)}


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys against xs."""
    return float(np.polyfit(xs, ys, 1)[0]) if len(xs) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=30_000)
    parser.add_argument("--features", type=int, default=4096, help="Latents of the stand-in SAE.")
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--name", type=int, default=3072, help="Features named (densest first).")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--embedder", choices=["hashed", "minilm"], default="hashed",
                        help="Labels embedded by the hashed bag of words, or by all-MiniLM-L6-v2 in this process "
                        "as embedded mode does (scores are then noise, the documents' vectors being hashed).")
    parser.add_argument("--embed-cache", type=int, default=naming.EMBED_CACHE,
                        help="Label vectors the Namer keeps (naming.EMBED_CACHE); 0 keeps none past a batch, to "
                        "see what grows besides that bounded cache.")
    parser.add_argument("--tracemalloc", action="store_true", help="Also live Python bytes (slower).")
    parser.add_argument("--record", action="store_true",
                        help="Then record the run as the gateway does (record_interpretations, SQLite).")
    args = parser.parse_args()
    naming.EMBED_CACHE = args.embed_cache
    root = Path(tempfile.mkdtemp(prefix="naming-memory-"))
    try:
        print(json.dumps(measure(args, root), indent=1))
    finally:
        shutil.rmtree(root)


def measure(args: argparse.Namespace, root: Path) -> dict:
    """Name the synthetic corpus in `root`, RSS after each batch; then record it if asked."""
    store = ArtifactStore(str(root))
    t0 = time.perf_counter()
    ref = write_corpus(store, args.docs, args.features, args.k)
    print(f"corpus: {args.docs} notes, {args.features} features in {time.perf_counter() - t0:.0f} s", flush=True)
    payload = InterpretRunPayload(run_id=1, corpus=ref, artifact_prefix="run", limit=args.name,
                                  batch_features=args.batch)
    samples: list[tuple[int, int, int]] = []  # (features done, RSS, traced bytes)

    def on_progress(p: Progress) -> None:
        traced = tracemalloc.get_traced_memory()[0] if args.tracemalloc else 0
        samples.append((p.done, vm(), traced))
        if len(samples) % 8 == 0:
            print(f"{p.done:6d} features  RSS {samples[-1][1] / MB:7.1f} MB  traced {traced / MB:7.1f} MB", flush=True)

    if args.tracemalloc:
        tracemalloc.start()
    t0 = time.perf_counter()
    result = asyncio.run(name_run(payload, store, settings=InterpreterSettings(),
                                  embed_texts=label_embedder(args.embedder), on_progress=on_progress))
    seconds = time.perf_counter() - t0
    # the first batches load caches (term index, label vectors): the slope is fitted past the first quarter
    tail = samples[len(samples) // 4:]
    xs = [s[0] / 1000 for s in tail]
    out = {
        "docs": args.docs, "features": args.features, "named": result.n_named, "batch": args.batch,
        "seconds": round(seconds, 1), "mean_score": result.mean_score,
        "rss_mb_first_batch": round(samples[0][1] / MB, 1), "rss_mb_last_batch": round(samples[-1][1] / MB, 1),
        "embed_cache": args.embed_cache,
        "rss_mb_per_1000_features": round(slope(xs, [s[1] / MB for s in tail]), 2),
        "rss_mb_by_features": {s[0]: round(s[1] / MB, 1) for s in samples[7::8]},
    }
    if args.tracemalloc:
        out["traced_mb_per_1000_features"] = round(slope(xs, [s[2] / MB for s in tail]), 2)
        out["traced_mb_last_batch"] = round(samples[-1][2] / MB, 1)
    if args.record:
        out.update(record(root, store, result, args.docs, args.features))
    return out


if __name__ == "__main__":
    main()
