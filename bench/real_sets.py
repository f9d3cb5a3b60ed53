"""Real labelled sets through the product, as bench/real_text.py and bench/labelling.py read them.

Each set is ONE dataset uploaded to an embedded deployment (`prisma serve`: SQLite, in-process jobs; the
data directory kept under /tmp/prisma-bench/real/<set>) with its hidden label column, then the product's
default embedding run (multilingual-e5-small, segments on with the default unit, clauses, as the dataset
page's form sends it) and the product's default SAE run (`config` omitted: SaeConfig()). Read back: each
document's text (the API's listing), the run's dense document vectors (its shards), the SAE run's document
codes and segment codes with each segment's document (its artifacts, found from the run's stored result).

Sets:
  - e3c-<lang> (en, es, fr, eu): the E3C layer-1 sentences (/work/shared/data/e3c/<lang>, read in place),
    positive = `not_actual`, grouped by `doc` for splits, plus a seeded sample of the language's layer-3
    cases (whole cases, in a seeded order, until LAYER3_CHARS characters) as unlabelled documents of the
    same dataset: the large corpus a user has; they train the SAE and are never labelled or scored;
  - demo: bench/status_data.demo_set (2,000 generated notes, positive = confirmed bronchiolitis);
  - negex: bench/status_data.negex_set (positive = Affirmed, as bench/status.py reads it).

    nice -n 10 python bench/real_sets.py --sets e3c-en,e3c-es   # prepare (or show the cached ones)
    nice -n 10 python bench/real_sets.py --refresh-sae          # the cached embeddings, a new default SAE run each
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlparse

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

E3C = Path("/work/shared/data/e3c")
CACHE = Path("/tmp/prisma-bench/real")
LANGUAGES = ("en", "es", "fr", "eu")
SETS = tuple(f"e3c-{lang}" for lang in LANGUAGES) + ("demo", "negex")
LAYER3_CHARS = 1_000_000
"""Characters of layer-3 cases per language: e5-small int8 reads ~2,500 tokens/s on this machine's two shared
cores, text is ~3.7 characters a token and a default run reads it twice (documents, then clauses), so 1 M
characters is ~4 minutes of embedding a language and the four languages with their SAEs ~35 minutes."""
LAYER3_SEED = 0
POSITIVE = "not_actual"
EMBEDDING = {"segments": True}
"""The product's default embedding run as the dataset page sends it: default model, clauses on."""

VERSION = 1


def use_segment_unit(unit: str) -> None:
    """Embed the sets' segments as `unit` (the product's default, clauses, unless a bench asks for another); each
    unit's sets are cached apart (/tmp/prisma-bench/real-<unit>)."""
    global CACHE
    if unit != "clause":
        EMBEDDING["segment_unit"] = unit
        CACHE = CACHE.parent / f"real-{unit}"


def use_word_states() -> None:
    """Embed the sets' segments with their words (`word_states`), cached apart (/tmp/prisma-bench/real-word-states)."""
    global CACHE
    EMBEDDING["word_states"] = True
    CACHE = CACHE.parent / "real-word-states"


class RealSet(NamedTuple):
    name: str
    texts: list[str]  # [docs], every document of the dataset, in upload order
    y: np.ndarray  # int64 [docs]: 1 positive, 0 negative, -1 unlabelled (layer-3)
    group: np.ndarray  # str [docs]: the split unit (E3C: the case `doc`; else the row's own id); '' unlabelled
    codes: sp.csr_matrix  # float32 [docs, n]: the SAE run's document codes
    segment_codes: sp.csr_matrix  # float32 [segments, n]
    segment_position: np.ndarray  # int64 [segments]: each segment's document
    dense: np.ndarray  # float32 [docs, d]: the embedding run's document vectors
    description: dict

    @property
    def labelled(self) -> np.ndarray:
        return np.flatnonzero(self.y >= 0)


# --- the rows -----------------------------------------------------------------------------------
def _layer3(lang: str, cap: int) -> tuple[list[dict], dict]:
    with gzip.open(E3C / lang / "layer3.jsonl.gz", "rt", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    order = np.random.default_rng(LAYER3_SEED).permutation(len(cases))
    chosen, chars = [], 0
    for i in order.tolist():
        if chars + len(cases[i]["text"]) > cap:
            break
        chosen.append(cases[i])
        chars += len(cases[i]["text"])
    return chosen, {"layer3_cap_chars": cap, "layer3_cases": len(chosen), "layer3_chars": chars,
                    "layer3_cases_available": len(cases), "layer3_sample": f"seeded order (seed {LAYER3_SEED}), "
                    "whole cases until the next would pass the cap"}


def e3c_rows(lang: str, cap: int = LAYER3_CHARS) -> tuple[list[dict], dict]:
    """Upload rows (id, text, labels, group) of one language: layer-1 sentences, then the layer-3 sample."""
    with (E3C / lang / "layer1-sentences.csv").open(newline="", encoding="utf-8") as f:
        sentences = list(csv.DictReader(f))
    rows = [{"id": r["id"], "text": r["text"], "labels": r["labels"], "group": r["doc"]} for r in sentences]
    cases, info = _layer3(lang, cap)
    rows += [{"id": f"L3-{c['id']}", "text": c["text"], "labels": "", "group": ""} for c in cases]
    positives = sum(r["labels"] == POSITIVE for r in sentences)
    return rows, {"source": str(E3C / lang), "positive": POSITIVE, "sentences": len(sentences),
                  "sentence_positives": positives, "documents_layer1": len({r["doc"] for r in sentences}),
                  "sentence_chars": sum(len(r["text"]) for r in sentences), **info}


def status_rows(name: str) -> tuple[list[dict], dict, np.ndarray]:
    try:
        from status_data import demo_set, negex_set
    except ImportError:  # bench/status_data.py may have moved to bench/studies/
        sys.path.insert(0, str(ROOT / "bench/studies"))
        from status_data import demo_set, negex_set
    ds = demo_set() if name == "demo" else negex_set()
    rows = [{"id": f"{name}-{i}", "text": t, "labels": "positive" if y else "negative", "group": f"{name}-{i}"}
            for i, (t, y) in enumerate(zip(ds.texts, ds.y.tolist()))]
    return rows, ds.description, ds.y


def set_rows(name: str, cap: int) -> tuple[list[dict], np.ndarray, dict]:
    if name.startswith("e3c-"):
        rows, info = e3c_rows(name[4:], cap)
        y = np.array([-1 if not r["labels"] else int(r["labels"] == POSITIVE) for r in rows], dtype=np.int64)
        return rows, y, info
    rows, info, y = status_rows(name)
    return rows, y.astype(np.int64), info


def group_split(ds: RealSet, test_fraction: float = 0.25, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) positions of the labelled documents: whole groups (E3C: cases) in a seeded order go to
    the test side until it holds `test_fraction` of the labelled rows; one split per set, for every method."""
    labelled = ds.labelled
    groups = np.unique(ds.group[labelled])
    order = groups[np.random.default_rng(seed).permutation(len(groups))]
    sizes = dict(zip(*np.unique(ds.group[labelled], return_counts=True)))
    test_groups, held = set(), 0
    for g in order.tolist():
        if held >= test_fraction * len(labelled):
            break
        test_groups.add(g)
        held += sizes[g]
    is_test = np.array([g in test_groups for g in ds.group[labelled].tolist()])
    return labelled[~is_test], labelled[is_test]


# --- through the product ------------------------------------------------------------------------
def _deploy() -> tuple[Any, Any]:
    try:
        from bench.e2e_deploy import Client, Embedded
    except ImportError:  # moved with the other studies
        from bench.studies.e2e_deploy import Client, Embedded
    return Client, Embedded


def _artifact_path(uri: str) -> Path:
    return Path(urlparse(uri).path)


def _sae_artifacts(data: Path, sae_id: int) -> dict:
    with sqlite3.connect(data / "prisma.db") as db:
        (result,) = db.execute("SELECT result FROM sae_runs WHERE id = ?", (sae_id,)).fetchone()
    return json.loads(result)["artifacts"]


def _texts(client: Any, dataset_id: int, total: int) -> list[str]:
    out: list[str] = []
    while len(out) < total:
        page = client.call("GET", f"/api/v1/datasets/{dataset_id}/documents?limit=500&offset={len(out)}").json()
        for doc in page["items"]:
            assert doc["position"] == len(out), "documents listed out of order"
            text = doc["text"]
            if doc["truncated"]:
                text = client.call("GET", f"/api/v1/datasets/{dataset_id}/documents/{doc['id']}").json()["text"]
            out.append(text)
    return out


def run_product(root: Path, rows: list[dict], embedding_run_id: int | None = None) -> dict:
    """Upload, embed, SAE through the API of a fresh embedded deployment in root/; returns what was read back.
    With `embedding_run_id`, the deployment already in root/ and its embedding run are kept: only a new default SAE
    run is trained on it (the code's defaults now), and `seconds_upload_and_embed` is the cached run's."""
    Client, Embedded = _deploy()
    dep = Embedded(root)
    try:
        c = Client(dep)
        t0 = time.perf_counter()
        if embedding_run_id is None:
            upload = root / "upload.csv"
            with upload.open("w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(["id", "text", "labels"])
                w.writerows([r["id"], r["text"], r["labels"]] for r in rows)
            with upload.open("rb") as f:
                ds = c.call("POST", "/api/v1/datasets", files={"file": ("upload.csv", f, "text/csv")},
                            data={"id_column": "id", "text_column": "text", "label_columns": "labels"}).json()
            run = c.call("POST", "/api/v1/embedding-runs", json={"dataset_id": ds["id"], **EMBEDDING}).json()
            run = c.done(f"/api/v1/embedding-runs/{run['id']}")
        else:
            run = c.call("GET", f"/api/v1/embedding-runs/{embedding_run_id}").json()
            ds = c.call("GET", f"/api/v1/datasets/{run['dataset_id']}").json()
        t1 = time.perf_counter()
        sae = c.call("POST", "/api/v1/sae-runs", json={"embedding_run_id": run["id"]}).json()[0]
        sae = c.done(f"/api/v1/sae-runs/{sae['id']}")
        t2 = time.perf_counter()
        texts = _texts(c, ds["id"], ds["n_documents"])
    finally:
        dep.stop()
    arts = _sae_artifacts(dep.data, sae["id"])
    result = run["result"] or {}
    dense = np.concatenate([np.load(_artifact_path(s["uri"])) for s in result["shards"]]).astype(np.float32)
    with np.load(_artifact_path(arts["segments"]["uri"])) as seg:
        position = seg["position"].astype(np.int64)
    return {"texts": texts, "dense": dense, "codes": sp.load_npz(_artifact_path(arts["codes_csr"]["uri"])).tocsr(),
            "segment_codes": sp.load_npz(_artifact_path(arts["segment_codes"]["uri"])).tocsr(),
            "segment_position": position,
            "embedding": {"spec": run["spec"], "model": run["model"], "n_documents": run["n_documents"],
                          "n_tokens": run["n_tokens"], "seconds_upload_and_embed": round(t1 - t0, 1),
                          **{k: result.get(k) for k in ("precision", "engine", "n_segments", "tokens_per_s",
                                                        "seconds")}},
            "sae": {"id": sae["id"], "config": sae["config"], "n_latents": sae["n_latents"], "k": sae["k"],
                    "metrics": sae["metrics"], "precision": sae.get("precision"), "seconds": round(t2 - t1, 1),
                    "fvu_heldout": (sae["metrics"] or {}).get("fvu")}}


def prepare(name: str, cap: int = LAYER3_CHARS, refresh: bool = False, refresh_sae: bool = False) -> RealSet:
    """The set, from the cache when it has it (same rows), else through the product (minutes to tens of them).
    `refresh_sae`: keep the cached upload and embedding run, train a new default SAE run on it (the code's
    defaults now) and read its codes instead of the cached run's."""
    root = CACHE / name
    cached = root / "prepared.npz"
    rows, y, info = set_rows(name, cap)
    meta = json.loads((root / "prepared.json").read_text()) if cached.exists() else {}
    usable = meta.get("version") == VERSION and meta.get("ids") == [r["id"] for r in rows]
    if usable and not refresh and not refresh_sae:
        return _load(name, cached, meta, rows, y)
    t0 = time.perf_counter()
    if usable and refresh_sae:
        with sqlite3.connect(root / "data" / "prisma.db") as db:
            (run_id,) = db.execute("SELECT id FROM embedding_runs ORDER BY id LIMIT 1").fetchone()
        got = run_product(root, rows, embedding_run_id=run_id)
        got["embedding"]["seconds_upload_and_embed"] = meta["description"]["embedding"]["seconds_upload_and_embed"]
    else:
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        got = run_product(root, rows)
    for r, text in zip(rows, got["texts"]):
        assert r["text"].strip() == text.strip(), f"{name}: document {r['id']} read back differently"
    meta = {"version": VERSION, "ids": [r["id"] for r in rows],
            "description": {"set": name, "data": info, "documents": len(rows), "labelled": int((y >= 0).sum()),
                            "positives": int((y == 1).sum()), "embedding": got["embedding"], "sae": got["sae"],
                            "segments": len(got["segment_position"]),
                            "preparation_seconds": round(time.perf_counter() - t0, 1),
                            "data_dir": str(root / "data"), "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S")}}
    np.savez(cached, dense=got["dense"], segment_position=got["segment_position"],
             **{f"codes_{k}": v for k, v in _csr_arrays(got["codes"]).items()},
             **{f"seg_{k}": v for k, v in _csr_arrays(got["segment_codes"]).items()})
    (root / "texts.json").write_text(json.dumps(got["texts"]))
    (root / "prepared.json").write_text(json.dumps(meta))
    return _load(name, cached, meta, rows, y)


def _csr_arrays(m: sp.csr_matrix) -> dict[str, np.ndarray]:
    return {"data": m.data, "indices": m.indices, "indptr": m.indptr, "shape": np.array(m.shape)}


def _csr(z: Any, prefix: str) -> sp.csr_matrix:
    return sp.csr_matrix((z[f"{prefix}_data"], z[f"{prefix}_indices"], z[f"{prefix}_indptr"]),
                         shape=tuple(z[f"{prefix}_shape"]))


def _load(name: str, path: Path, meta: dict, rows: list[dict], y: np.ndarray) -> RealSet:
    texts = json.loads((path.parent / "texts.json").read_text())
    with np.load(path) as z:
        return RealSet(name, texts, y, np.array([r["group"] for r in rows]), _csr(z, "codes"), _csr(z, "seg"),
                       z["segment_position"], z["dense"], meta["description"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    parser.add_argument("--layer3-chars", type=int, default=LAYER3_CHARS, help="layer-3 characters per language")
    parser.add_argument("--refresh", action="store_true", help="prepare again even when cached")
    parser.add_argument("--refresh-sae", action="store_true",
                        help="keep the cached upload and embedding, train a new default SAE run (the code's defaults now)")
    args = parser.parse_args()
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        t0 = time.perf_counter()
        ds = prepare(name, args.layer3_chars, args.refresh, args.refresh_sae)
        d = ds.description
        print(json.dumps({"set": name, "documents": d["documents"], "labelled": d["labelled"],
                          "segments": d["segments"], "fvu_heldout": d["sae"]["fvu_heldout"],
                          "preparation_seconds": d["preparation_seconds"],
                          "seconds_now": round(time.perf_counter() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
