"""Phrase names against the term lists they replace, on the status benchmark's demo clauses → bench/studies/results/names-demo-clauses.json.

bench/names.py measures both corpora on their own SAEs; this is the same comparison (keywords = phrase names,
keywords_terms = the term lists, each alone, the first FEATURES features in naming order, names.summarise's
metrics) on the corpus the status benchmark's expression is written from: the 2,000 demo notes cut into clauses,
embedded by the default encoder, and the SAE of status.py's probe_segments (read from status.py's cache).

    python bench/studies/names_clauses.py [--features 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    import numpy as np
    import pyarrow as pa
    import torch

    import names as nb
    import status as S
    from gateway.domain.concepts.probe import heldout_split
    from interpret import label_embedder
    from services.interpreter.backends.keywords import TermIndex
    from services.interpreter.corpus import segment_corpus
    from services.interpreter.naming import Namer, naming_order

    parser = argparse.ArgumentParser()
    parser.add_argument("--features", type=int, default=60)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/studies/results/names-demo-clauses.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ds = S.demo_set()
    split = heldout_split(ds.y, test_fraction=0.25, seed=0)
    x, _ = S.document_vectors(ds)
    seg, _ = S.segment_vectors(ds)
    keep: list = []
    S.segment_probe(x, seg, ds, split, {}, keep=keep)
    table = pa.table({"position": np.arange(len(ds.texts)), "doc_id": np.arange(len(ds.texts)), "text": ds.texts})
    shard = {"vectors": seg.vectors, "position": seg.position, "char_start": seg.char_start, "char_end": seg.char_end}
    corpus = segment_corpus(table, [shard], keep[0].segments.tocsr())
    embed = label_embedder(1, S.MODEL_NAME[0])
    index = TermIndex(corpus.text(p) for p in range(corpus.n_docs))
    feats = naming_order(corpus)[: args.features]
    results = {}
    for key in ("keywords", "keywords_terms"):
        opts, backend = nb.build(key)
        namer = Namer(corpus, [(opts, backend)], embed, term_index=index)
        t0, done = time.perf_counter(), []
        for i in range(0, len(feats), 16):
            pool = [r.interpretations[r.best].label for r in done[-256:] if r.best is not None]
            done += asyncio.run(namer.name_features(feats[i:i + 16], pool))
        results[key] = nb.summarise(done, time.perf_counter() - t0, evidence_texts=lambda b: [
            corpus.text(p) for p in b.evidence.activating])
        print(key, {k: results[key][k] for k in ("embedding_auroc_top_half", "near_miss_auroc_top_half",
                                                  "shared_name_fraction", "phrase_fraction")}, flush=True)
    out = {"benchmark": "names on the status benchmark's demo clauses", "model": S.MODEL_NAME[0],
           "corpus": {"segments": corpus.n_docs, "sae_latents": corpus.n_features,
                      "features_named": f"the first {len(feats)} in naming order (densest first)"},
           "command": " ".join(["python bench/studies/names_clauses.py", *sys.argv[1:]]), "results": {"demo_clauses": results}}
    args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
