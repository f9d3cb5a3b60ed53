"""The whole pipeline through the public HTTP API → bench/results/e2e.json.

N notes of the demo generator (`gateway.demo.corpus`, seed 0) go through a real deployment as a
client would drive it: upload → embedding run (computed by the embedder, or imported with
`POST /api/v1/embedding-runs/import` and a query model) → SAE run (training, encoding, statistics,
families) → naming every feature (keywords back-end, each name scored) → families → an expression
search → a text search → a probe concept (`bronchiolitis:confirmed`) → its apply job → the CSV
export. Per stage: wall seconds (request to finished job), the peak RSS of every process of the
deployment (VmHWM, reset at the start of each stage through /proc/PID/clear_refs and read every
0.25 s), the peak of each role's summed PSS (every second: a forked naming child's shared pages
counted once), and what was written (artifact store bytes, database bytes and rows).

Modes: `embedded` (one `prisma serve` process on a fresh data dir: SQLite, in-process jobs) and
`distributed` (tests/distributed/harness.py: gateway, service apps and queue workers as separate
processes, PostgreSQL, a Redis of its own).

Imported vectors (`--embedding imported`, the only practical choice for 200,000 notes on a CPU):
a computed run saves its real vectors and each note's labels as *donors* (`--donors`); each
imported note's vector is the normalised mean of two donors' vectors with the note's own label
set (else its primary condition:status, else any), plus Gaussian noise of norm `--noise`. The SAE
then sees the corpus's real structure (conditions, statuses, co-mentions) at a larger scale; the
texts stay the generator's, so keywords, search and probes read real notes.

Donors without a whole computed run: `--make-donors` embeds the 2,000 notes in this process (the
default model, its mean pooling, unit norm: what a default embedding run computes) and writes them.

Wider vectors (`--dim 768`): the 384-dimensional donors' mixtures are carried into `--dim`
dimensions by a fixed random isometry (orthonormal columns, seed 0) before the noise is added in
the wide space, so cosines between notes are kept. Text search and naming then need a query
model of that width: `--make-query-model DIR` writes a BERT of hidden size `--dim` (2 layers,
random weights, MiniLM's tokenizer) there, and `--query-model DIR` names it. Its vectors mean
nothing (search hits and name scores are noise); what such a run measures is time and memory.

    nice -n 19 python bench/e2e.py --n 2000 --embedding computed
    nice -n 19 python bench/e2e.py --n 200000 --embedding imported [--mode distributed]
    timeout 540 python bench/e2e.py --n 200000 --embedding imported; python bench/e2e.py --resume /tmp/prisma-e2e-…
    nice -n 19 python bench/e2e.py --n 200000 --embedding imported --until sae   # then keep a copy of the data dir;
    # --resume it, put the copy back at the same path (artifact URIs are absolute) and --resume again
    nice -n 19 python bench/e2e.py --make-donors
    nice -n 19 python bench/e2e.py --make-query-model /tmp/bert768 --dim 768
    nice -n 19 python bench/e2e.py --n 200000 --embedding imported --dim 768 --expansion 16 --query-model /tmp/bert768
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.e2e_data import (make_donors, make_query_model, save_donors, synthetic_vectors,  # noqa: E402
                            widen, write_corpus)
from bench.e2e_deploy import Client, Deployment, Distributed, Embedded, PeakMeter, tree_bytes  # noqa: E402
from bench.e2e_state import StageState, stop_on_sigterm  # noqa: E402

RESULTS = ROOT / "bench/results/e2e.json"
PROBE_LABEL = "bronchiolitis:confirmed"
TEXT_QUERY = "bronchiolite confermata con sibili e rientramenti"
MIB = 2**20


class Pipeline:
    """The stages in order; each returns its extra figures and leaves ids on self."""

    def __init__(self, client: Client, args: argparse.Namespace, corpus: Path, vectors: Path | None,
                 state: StageState) -> None:
        self.c, self.args, self.corpus, self.vectors, self.state = client, args, corpus, vectors, state
        self.ids: dict[str, Any] = state.ids  # saved with the state after every stage

    def upload(self) -> dict:
        with self.corpus.open("rb") as f:
            ds = self.c.call("POST", "/api/v1/datasets", files={"file": ("notes.csv", f, "text/csv")},
                             data={"id_column": "id", "label_columns": "labels"}).json()
        self.ids["dataset"] = ds["id"]
        return {"documents": ds["n_documents"], "upload_bytes": self.corpus.stat().st_size}

    def embed(self) -> dict:
        body = {"dataset_id": self.ids["dataset"]} | ({"precision": self.args.precision} if self.args.precision else {})
        run = self.c.done(self.state.job("embed", lambda: "/api/v1/embedding-runs/"
                                         f"{self.c.call('POST', '/api/v1/embedding-runs', json=body).json()['id']}"))
        self.ids["embedding"], self.ids["embedding_run"] = run["id"], run
        return {"docs_per_s": run["docs_per_s"], "chunks": run["n_chunks"], "tokens": run["n_tokens"],
                "model": run["model"], "precision": (run["result"] or {}).get("precision"),
                "tokens_per_s": (run["result"] or {}).get("tokens_per_s")}

    def embed_import(self) -> dict:
        with self.vectors.open("rb") as f:
            run = self.c.call("POST", "/api/v1/embedding-runs/import",
                              files={"file": ("vectors.npy", f, "application/octet-stream")},
                              data={"dataset_id": str(self.ids["dataset"]), "name": "e2e-synthetic",
                                    "query_model": self.args.query_model}).json()
        self.ids["embedding"] = run["id"]
        return {"upload_bytes": self.vectors.stat().st_size, "dim": run["dim"]}

    def sae(self) -> dict:
        config = {"expansion_factor": self.args.expansion, "k": self.args.k}
        config |= {"max_steps": self.args.sae_steps} if self.args.sae_steps else {}  # else the product's schedule
        body = {"embedding_run_id": self.ids["embedding"], "config": config}
        run = self.c.done(self.state.job("sae", lambda: "/api/v1/sae-runs/"
                                         f"{self.c.call('POST', '/api/v1/sae-runs', json=body).json()[0]['id']}"))
        self.ids["sae"] = run["id"]
        m = run["metrics"] or {}
        sae = (run.get("config") or {}).get("sae") or {}
        return {"config": config, "n_latents": run["n_latents"],
                "schedule": {k: sae.get(k) for k in ("epochs", "max_steps", "max_samples", "batch_size")},
                "steps": (run.get("loss_curve") or [{}])[-1].get("step"),  # counted from 1
                **{k: m.get(k) for k in ("fvu", "explained_variance", "dead_fraction", "l0") if k in m}}

    def naming(self) -> dict:
        path = f"/api/v1/sae-runs/{self.ids['sae']}/interpretations"
        body = {"backends": [{"backend": "keywords"}]}
        started = time.perf_counter()
        job = self.c.done(self.state.job("naming", lambda: f"/api/v1/jobs/{self.c.call('POST', path, json=body).json()['id']}"))
        seconds = time.perf_counter() - started
        result = job.get("result") or {}
        named = result.get("n_named", result.get("n_features", job["progress"].get("done")))
        return {"features": named, "features_per_min": round(60 * named / seconds, 1) if named else None,
                "result": {k: v for k, v in result.items() if isinstance(v, int | float | str)}}

    def families(self) -> dict:
        fams: list[dict] = []
        while True:  # a page at a time, as a client reads them
            page = self.c.call("GET", f"/api/v1/sae-runs/{self.ids['sae']}/families?limit=200&offset={len(fams)}").json()
            fams += page["items"]
            if not page["items"] or len(fams) >= page["total"]:
                break
        return {"families": len(fams), "members": sum(len(f.get("members", [])) for f in fams)}

    def search_expression(self) -> dict:
        sae = self.ids["sae"]
        dense = self.c.call("GET", f"/api/v1/sae-runs/{sae}/features?sort=density&limit=2").json()["items"]
        a, b = (f["index"] for f in dense)
        expr = f"F{a} > 0.05 AND NOT F{b}"
        return self._search({"mode": "expression", "expression": expr, "limit": 20}) | {"expression": expr}

    def search_text(self) -> dict:
        return self._search({"mode": "text", "text": TEXT_QUERY, "top_features": 5, "limit": 20})

    def _search(self, body: dict) -> dict:
        path = f"/api/v1/sae-runs/{self.ids['sae']}/search"
        t0 = time.perf_counter()
        first = self.c.call("POST", path, json=body).json()
        first_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        self.c.call("POST", path, json=body)
        return {"first_ms": round(first_ms, 1), "warm_ms": round((time.perf_counter() - t0) * 1000, 1),
                "total": first.get("total")}

    def concept_probe(self) -> dict:
        body = {"sae_run_id": self.ids["sae"], "name": "confirmed bronchiolitis", "kind": "probe",
                "examples": {"labels": {"positive": [PROBE_LABEL]}}}
        concept = self.c.call("POST", "/api/v1/concepts", json=body).json()
        self.ids["concept"] = concept["id"]
        m = concept["metrics"] or {}
        return {"f1": m.get("f1"), "precision": m.get("precision"), "recall": m.get("recall"),
                "features": len(concept.get("features") or (concept.get("probe") or {}).get("weights") or [])}

    def concept_apply(self) -> dict:
        path = f"/api/v1/concepts/{self.ids['concept']}/apply"
        self.c.done(self.state.job("concept_apply", lambda: f"/api/v1/jobs/{self.c.call('POST', path).json()['id']}"))
        return {"matches": self.c.call("GET", f"/api/v1/concepts/{self.ids['concept']}").json()["applied"]}

    def export_csv(self) -> dict:
        size = lines = 0
        with self.c.http.stream("GET", f"/api/v1/concepts/{self.ids['concept']}/export.csv") as resp:
            resp.raise_for_status()
            for chunk in resp.iter_bytes():
                size += len(chunk)
                lines += chunk.count(b"\n")
        return {"csv_bytes": size, "csv_lines": lines}


def measure(dep: Deployment, name: str, fn: Callable[[], dict]) -> dict:
    art0, db0, rows0 = tree_bytes(dep.artifact_dir), dep.db_bytes(), dep.db_rows()
    with PeakMeter(dep.roles()) as meter:
        t0 = time.perf_counter()
        extra = fn()
        seconds = time.perf_counter() - t0
    peaks = {role: round(b / MIB, 1) for role, b in meter.peaks.items()}
    pss = {role: round(b / MIB, 1) for role, b in meter.pss_peaks.items()}
    out = {"seconds": round(seconds, 2), "peak_rss_mib": max(peaks.values(), default=None), "peak_rss_mib_by_process": peaks,
           "peak_pss_mib_by_role": pss, "max_processes_by_role": meter.max_processes,
           "artifact_bytes_written": tree_bytes(dep.artifact_dir) - art0, "db_bytes_delta": dep.db_bytes() - db0,
           "db_rows_delta": dep.db_rows() - rows0, **extra}
    print(f"  {name}: {out['seconds']} s, peak {out['peak_rss_mib']} MiB  {json.dumps(extra)[:300]}", flush=True)
    return out


STAGES = ("upload", "embed", "embed_import", "sae", "naming", "families", "search_expression", "search_text",
          "concept_probe", "concept_apply", "export_csv")


def run(args: argparse.Namespace) -> tuple[dict | None, argparse.Namespace]:
    """Every stage, or (`--resume DIR`) those a stopped run had not finished, on its kept data dir."""
    if args.resume is not None:
        root = args.resume
        saved = json.loads((root / "e2e-state.json").read_text())["args"]
        args = argparse.Namespace(**{**saved, "resume": root, "out": args.out, "until": args.until})
        if args.mode != "embedded":
            raise SystemExit("--resume: only an embedded run's data dir can be resumed")
    else:
        root = Path(tempfile.mkdtemp(prefix="prisma-e2e-", dir=args.tmp))
    state = StageState(root, {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()})
    stop_on_sigterm()
    labels = None  # each note's labels, for the donors a computed run saves (a fresh run writes them)
    try:
        vectors = root / "vectors.npy" if args.embedding == "imported" else None
        if not (root / "notes.csv").exists():
            t0 = time.perf_counter()
            labels = write_corpus(root / "notes.csv", args.n)
            print(f"corpus: {args.n} notes in {time.perf_counter() - t0:.1f} s", flush=True)
            if vectors is not None:
                x = synthetic_vectors(labels, Path(args.donors), args.noise)
                np.save(vectors, x if args.dim is None or args.dim == x.shape[1] else widen(x, args.dim, args.noise))
                del x
        dep = Embedded(root) if args.mode == "embedded" else Distributed(root)
        try:
            pipe = Pipeline(Client(dep), args, root / "notes.csv", vectors, state)
            skip = "embed" if args.embedding == "imported" else "embed_import"
            for name in (s for s in STAGES if s != skip):
                if name in state.stages:
                    continue
                state.start(name)
                state.finish(name, measure(dep, name, getattr(pipe, name)))
                if name == "embed" and args.save_donors and labels is not None:
                    save_donors(dep, pipe.ids["embedding_run"], labels, Path(args.donors))
                if name == args.until:
                    print(f"stopped after {name}: the data dir is kept in {root}; go on with --resume {root}",
                          flush=True)
                    return None, args
        finally:
            dep.stop()
    except BaseException:
        state.interrupted()
        print(f"stopped: the data dir and logs are kept in {root}; go on with --resume {root}", flush=True)
        raise
    stages, calls = state.stages, state.data["calls"]
    shutil.rmtree(root)
    after_embed = sum(s["seconds"] for k, s in stages.items() if not k.startswith("embed"))
    peak = max(s["peak_rss_mib"] or 0 for k, s in stages.items() if not k.startswith("embed"))
    pss = max((max(s.get("peak_pss_mib_by_role", {}).values(), default=0) for k, s in stages.items()
               if not k.startswith("embed")), default=0)
    dim = stages.get("embed_import", {}).get("dim") or 384
    return {"n": args.n, "mode": args.mode, "embedding": args.embedding, "dim": dim, "stages": stages,
            "totals": {"seconds_without_embedding": round(after_embed, 1),
                       "seconds": round(sum(s["seconds"] for s in stages.values()), 1),
                       "peak_rss_mib_without_embedding": peak, "peak_pss_mib_without_embedding": pss},
            "calls": calls,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.strip(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S")}, args


def machine() -> dict:
    """This run's machine: CPUs, and the GPU where torch sees one (the embedder and the SAE use it at 'auto')."""
    from bench.classify import machine as cpu_of

    cpu = cpu_of()
    out: dict[str, Any] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "cpu": f"{cpu['cpu']} ({cpu['cpu_family_model']})", "native_bf16": cpu["native_bf16"],
                           "amx": cpu["amx"]}
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            out |= {"gpu": props.name, "gpu_memory_gib": round(props.total_memory / 2**30, 1),
                    "torch": torch.__version__, "cuda": torch.version.cuda}
    except ImportError:
        pass
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="Notes generated (seed 0).")
    parser.add_argument("--mode", choices=["embedded", "distributed"], default="embedded")
    parser.add_argument("--embedding", choices=["computed", "imported"], default="computed")
    parser.add_argument("--donors", type=Path, default=Path("/tmp/prisma-e2e-donors.npz"),
                        help="Real vectors and labels: written by a computed run, read by an imported one.")
    parser.add_argument("--no-save-donors", dest="save_donors", action="store_false")
    parser.add_argument("--noise", type=float, default=0.3, help="Norm of the noise added to each imported vector.")
    parser.add_argument("--expansion", type=int, default=32, help="SAE expansion factor (32: n = 12,288 at d = 384).")
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--sae-steps", type=int, default=None,
                        help="SAE optimiser steps of 256 documents (default: none given, the product's schedule).")
    parser.add_argument("--dim", type=int, default=None,
                        help="Imported vectors' dimension (default: the donors'); wider ones through a random isometry.")
    parser.add_argument("--query-model", default="default",
                        help="The import's query model (a model directory of the vectors' width; see --make-query-model).")
    parser.add_argument("--make-donors", action="store_true", help="Embed 2,000 notes here into --donors, then stop.")
    parser.add_argument("--make-query-model", type=Path, default=None,
                        help="Write a random BERT of width --dim to this directory, then stop.")
    parser.add_argument("--resume", type=Path, default=None,
                        help="The data dir a stopped embedded run kept: its stages not finished, the job it waited on "
                             "resumed from its checkpoint (bench/e2e_state.py); the figures join the others.")
    parser.add_argument("--until", choices=STAGES, default=None,
                        help="Stop after this stage, keeping the data dir (a copy of it is a corpus to resume from "
                             "more than once: e.g. the naming stage on two commits).")
    parser.add_argument("--tmp", default=None, help="Where the data dir is made (default: the system's).")
    parser.add_argument("--precision", choices=["fp32", "bf16", "int8"], default=None,
                        help="A computed run's precision (default: the embedder's 'auto' on this CPU); a run per "
                             "precision is kept in the results.")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.make_donors or args.make_query_model:
        if args.make_donors:
            make_donors(args.donors)
        if args.make_query_model:
            make_query_model(args.make_query_model, args.dim or 384)
        return
    if not args.resume and args.embedding == "imported" and not args.donors.exists():
        parser.error(f"{args.donors} missing: run a computed embedding first (e.g. --n 2000), which writes it")

    load0 = os.getloadavg()[0]
    result, args = run(args)
    if result is None:  # --until
        return
    result["load_average_at_start"] = round(load0, 2)
    report = json.loads(args.out.read_text()) if args.out.exists() else {}
    report.update({
        "what": "the whole pipeline through the public HTTP API on N demo notes (gateway.demo.corpus, seed 0): "
                "seconds per stage (request to finished job), peak RSS per process (VmHWM, reset per stage), "
                "peak summed PSS per role (a forked child's shared pages counted once), artifact and database bytes and rows written",
        "machine": machine() | {"note": "2 cores shared with other work (see each run's load average); run under "
                                        "nice -n 19" if os.cpu_count() == 2 else "each run's own `machine` says "
                                        "where it ran (bench/gpu_e2e.sh: a lent GPU machine, nothing else running)"},
        "imported_vectors": "each note: the normalised mean of two real vectors of the default model (from a "
                            "computed run of 2,000 notes or --make-donors; all-MiniLM-L6-v2 before "
                            "multilingual-e5-small was the default) of notes with the same label set (else the "
                            "same primary condition:status), plus Gaussian noise of norm --noise, renormalised",
    })
    result["precision_requested"] = args.precision
    result["machine"] = machine()
    key = (args.n, args.mode, args.embedding, result["dim"], args.precision, result["machine"].get("cpu"))
    runs = [r for r in report.get("runs", [])  # one run a configuration and CPU: the latest
            if (r["n"], r["mode"], r["embedding"], r.get("dim", 384), r.get("precision_requested"),
                r.get("machine", {}).get("cpu")) != key]
    report["runs"] = sorted([*runs, result], key=lambda r: (r["mode"], r.get("dim", 384), r["n"], r["embedding"]))
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(result["totals"]))


if __name__ == "__main__":
    main()
