"""The whole pipeline through the public HTTP API → bench/results/e2e.json.

N notes of the demo generator (`gateway.demo.corpus`, seed 0) go through a real deployment as a
client would drive it: upload → embedding run (computed by the embedder, or imported with
`POST /api/v1/embedding-runs/import` and a query model) → SAE run (training, encoding, statistics,
families) → naming every feature (keywords back-end, each name scored) → families → an expression
search → a text search → a probe concept (`bronchiolitis:confirmed`) → its apply job → the CSV
export. Per stage: wall seconds (request to finished job), the peak RSS of every process of the
deployment (VmHWM, reset at the start of each stage through /proc/PID/clear_refs and read every
0.25 s), and what was written (artifact store bytes, database bytes and rows).

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
    nice -n 19 python bench/e2e.py --make-donors
    nice -n 19 python bench/e2e.py --make-query-model /tmp/bert768 --dim 768
    nice -n 19 python bench/e2e.py --n 200000 --embedding imported --dim 768 --expansion 16 --query-model /tmp/bert768
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import numpy as np
import psutil
from sqlalchemy import create_engine, inspect, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from gateway.demo.corpus import generate_notes  # noqa: E402
from tests.live import free_port  # noqa: E402

RESULTS = ROOT / "bench/results/e2e.json"
PRISMA = str(Path(sys.executable).parent / "prisma")
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TERMINAL = ("succeeded", "failed", "cancelled")
PROBE_LABEL = "bronchiolitis:confirmed"
TEXT_QUERY = "bronchiolite confermata con sibili e rientramenti"
MIB = 2**20


# -- processes and what they hold ---------------------------------------------------------

def _vm(pid: int, field: str) -> int:
    """VmHWM / VmRSS of a process in bytes (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakMeter:
    """Peak RSS per role over a stage: every process of each role's tree, VmHWM sampled."""

    def __init__(self, roots: dict[str, int], interval: float = 0.25) -> None:
        self.roots, self.interval = roots, interval
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _tree(self) -> dict[str, list[int]]:
        out = {}
        for role, pid in self.roots.items():
            try:
                proc = psutil.Process(pid)
                out[role] = [pid, *(c.pid for c in proc.children(recursive=True))]
            except psutil.NoSuchProcess:
                out[role] = []
        return out

    def _sample(self) -> None:
        for role, pids in self._tree().items():
            self.peaks[role] = max([self.peaks.get(role, 0), *(_vm(p, "VmHWM") for p in pids)])

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakMeter:
        for pids in self._tree().values():
            for pid in pids:  # the peak restarts from the current RSS
                try:
                    Path(f"/proc/{pid}/clear_refs").write_text("5")
                except OSError:
                    pass
        self.peaks = {}
        self._sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


class Deployment:
    """What a stage needs of a deployment: its URL, key, processes, store and database."""

    url: str
    key: str
    artifact_dir: Path
    database_url: str

    def roles(self) -> dict[str, int]:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def db_bytes(self) -> int:
        if self.database_url.startswith("sqlite"):
            db = Path(self.database_url.split("///", 1)[1])
            return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
        with create_engine(self.database_url).connect() as c:
            return int(c.execute(text("SELECT pg_database_size(current_database())")).scalar_one())

    def db_rows(self) -> int:
        engine = create_engine(self.database_url)
        try:
            tables = [t for t in inspect(engine).get_table_names() if t != "alembic_version"]
            with engine.connect() as c:
                return sum(int(c.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one()) for t in tables)
        finally:
            engine.dispose()


class Embedded(Deployment):
    """One `prisma serve` on a fresh data dir: SQLite, jobs in-process."""

    def __init__(self, root: Path) -> None:
        self.data = root / "data"
        self.artifact_dir = self.data / "artifacts"
        self.database_url = f"sqlite:///{self.data / 'prisma.db'}"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("PRISMA_", "DATABASE_URL", "REDIS_URL", "ARTIFACT_ROOT"))}
        self.env.update({"PRISMA_DATA_DIR": str(self.data), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
                         "PRISMA_LOG_LEVEL": "WARNING"})
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(root / "serve.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen([PRISMA, "serve", "--port", str(port)], env=self.env, cwd=ROOT,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait(lambda: _healthy(self.url), 180, "prisma serve")
        try:  # a name of its own: --resume starts a server on a data dir that has one already
            out = subprocess.run([PRISMA, "apikey", "create", "--name", f"e2e-{uuid.uuid4().hex[:8]}"], env=self.env,
                                 cwd=ROOT, capture_output=True, text=True, check=True)
        except BaseException:
            self.stop()
            raise
        self.key = out.stdout.strip().splitlines()[-1]

    def roles(self) -> dict[str, int]:
        return {"serve": self.proc.pid}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Distributed(Deployment):
    """The distributed tests' layout (tests/distributed/harness.py) with production-like settings."""

    def __init__(self, root: Path) -> None:
        from tests.distributed.harness import Deployment as Harness

        self.pg_name = f"prisma_e2e_{uuid.uuid4().hex[:8]}"
        with create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT").connect() as c:
            c.execute(text(f'CREATE DATABASE "{self.pg_name}"'))
        self.database_url = PG_ADMIN.rsplit("/", 1)[0] + f"/{self.pg_name}"
        self.artifact_dir = root / "artifacts"
        self.dep = Harness(root=root, database_url=self.database_url, artifact_root=self.artifact_dir.as_uri(),
                           extra_env={"PRISMA_EMBEDDER_THREADS": "2", "PRISMA_SAE_THREADS": "2",
                                      "OMP_NUM_THREADS": "2", "PRISMA_EMBEDDER_PRECISION": "auto",
                                      "PRISMA_JOB_LEASE_S": "30", "PRISMA_EMBEDDER_CLAIM_LEASE_S": "60",
                                      "PYTHONPATH": str(ROOT)})  # INFO logs: the harness waits on them
        try:
            self.dep.start_all(gateway_workers=1)
        except BaseException:
            self.stop()
            raise
        self.url, self.key = self.dep.url(), self.dep.api_key

    def roles(self) -> dict[str, int]:
        return {name: p.popen.pid for name, p in self.dep.procs.items() if p.alive}

    def stop(self) -> None:
        self.dep.stop_all()
        with create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT").connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)'))


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


# -- the client -------------------------------------------------------------------------

class Client:
    def __init__(self, dep: Deployment) -> None:
        self.http = httpx.Client(base_url=dep.url, headers={"Authorization": f"Bearer {dep.key}"},
                                 timeout=httpx.Timeout(1800, connect=30))

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        resp = self.http.request(method, path, **kw)
        if resp.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text[:2000]}")
        return resp

    def done(self, path: str, timeout: float = 7200) -> dict:
        def finished() -> dict | None:
            body = self.call("GET", path).json()
            return body if body["status"] in TERMINAL else None

        body = wait(finished, timeout, path)
        if body["status"] != "succeeded":
            raise RuntimeError(f"{path}: {body['status']} {body.get('error') or ''}")
        return body


# -- the corpus and its vectors -----------------------------------------------------------

def write_corpus(path: Path, n: int) -> list[list[str]]:
    """The generator's CSV (as `prisma demo-corpus` writes it); returns each note's labels."""
    labels = []
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "labels", "condition", "status"])
        for note in generate_notes(n, seed=0):
            w.writerow([note.id, note.text, "|".join(note.labels), note.condition, note.status])
            labels.append(note.labels)
    return labels


def synthetic_vectors(labels: list[list[str]], donors: Path, noise: float, seed: int = 0) -> np.ndarray:
    """[N, d] float32, unit rows: two real donors' mean with the note's label set, plus noise."""
    src = np.load(donors, allow_pickle=False)
    vecs, donor_labels = src["vectors"].astype(np.float32), [str(s) for s in src["labels"]]
    by_set: dict[str, list[int]] = {}
    by_primary: dict[str, list[int]] = {}
    for i, s in enumerate(donor_labels):
        by_set.setdefault(s, []).append(i)
        by_primary.setdefault(s.split("|")[0], []).append(i)
    rng = np.random.default_rng(seed)
    pairs = np.empty((len(labels), 2), dtype=np.int64)
    everyone = list(range(len(vecs)))
    for i, ls in enumerate(labels):
        pool = by_set.get("|".join(ls)) or by_primary.get(ls[0]) or everyone
        pairs[i] = rng.choice(pool, 2)
    out = (vecs[pairs[:, 0]] + vecs[pairs[:, 1]]) / 2  # [N, d]
    out += rng.standard_normal(out.shape, dtype=np.float32) * (noise / np.sqrt(out.shape[1]))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def widen(x: np.ndarray, dim: int, noise: float, seed: int = 0) -> np.ndarray:
    """[N, d] unit rows → [N, dim]: through a fixed random isometry (cosines kept, rows still unit),
    plus Gaussian noise of norm `noise` in the wide space, renormalised. Blocks of 8,192 rows."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((dim, x.shape[1])))  # [dim, d], orthonormal columns
    q = q.astype(np.float32)
    out = np.empty((len(x), dim), dtype=np.float32)
    for start in range(0, len(x), 8192):
        block = x[start:start + 8192] @ q.T  # [b, dim]
        block += rng.standard_normal(block.shape, dtype=np.float32) * (noise / np.sqrt(dim))
        out[start:start + 8192] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def make_donors(path: Path, n: int = 2000) -> None:
    """The n notes embedded in this process as a default embedding run embeds them, with their labels."""
    import torch

    from services.embedder.encoder import embed_texts
    from services.embedder.models import load_model

    notes = list(generate_notes(n, seed=0))
    t0 = time.perf_counter()
    lm = load_model("default", device=torch.device("cpu"), dtype=torch.float32)
    vectors = embed_texts(lm, [note.text for note in notes]).vectors
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=vectors.astype(np.float32), labels=np.array(["|".join(x.labels) for x in notes]))
    print(f"donors: {n} notes embedded in {time.perf_counter() - t0:.0f} s → {path}", flush=True)


def make_query_model(path: Path, dim: int) -> None:
    """A BERT of hidden size `dim` (2 layers, random weights, seed 0) with MiniLM's tokenizer: a query
    model of the right width for imported vectors of `dim` dimensions, nothing more."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from services.embedder.models import default_model_path

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(default_model_path(), local_files_only=True)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=dim, num_hidden_layers=2,
                        num_attention_heads=max(1, dim // 64), intermediate_size=4 * dim, max_position_embeddings=512)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    print(f"query model: BERT, hidden size {dim}, 2 layers, random weights → {path}", flush=True)


def save_donors(dep: Deployment, run: dict, labels: list[list[str]], path: Path) -> None:
    """The computed run's real vectors (its shards, in dataset order) and each note's labels."""
    vectors = np.concatenate([np.load(urlparse(s["uri"]).path) for s in run["result"]["shards"]]).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=vectors, labels=np.array(["|".join(ls) for ls in labels]))


# -- the stages ---------------------------------------------------------------------------

class Pipeline:
    """The stages in order; each returns its extra figures and leaves ids on self."""

    def __init__(self, client: Client, args: argparse.Namespace, corpus: Path, vectors: Path | None) -> None:
        self.c, self.args, self.corpus, self.vectors = client, args, corpus, vectors
        self.ids: dict[str, Any] = {}

    def upload(self) -> dict:
        with self.corpus.open("rb") as f:
            ds = self.c.call("POST", "/api/v1/datasets", files={"file": ("notes.csv", f, "text/csv")},
                             data={"id_column": "id", "label_columns": "labels"}).json()
        self.ids["dataset"] = ds["id"]
        return {"documents": ds["n_documents"], "upload_bytes": self.corpus.stat().st_size}

    def embed(self) -> dict:
        run = self.c.call("POST", "/api/v1/embedding-runs", json={"dataset_id": self.ids["dataset"]}).json()
        run = self.c.done(f"/api/v1/embedding-runs/{run['id']}")
        self.ids["embedding"], self.ids["embedding_run"] = run["id"], run
        return {"docs_per_s": run["docs_per_s"], "chunks": run["n_chunks"], "tokens": run["n_tokens"]}

    def embed_import(self) -> dict:
        with self.vectors.open("rb") as f:
            run = self.c.call("POST", "/api/v1/embedding-runs/import",
                              files={"file": ("vectors.npy", f, "application/octet-stream")},
                              data={"dataset_id": str(self.ids["dataset"]), "name": "e2e-synthetic",
                                    "query_model": self.args.query_model}).json()
        self.ids["embedding"] = run["id"]
        return {"upload_bytes": self.vectors.stat().st_size, "dim": run["dim"]}

    def sae(self) -> dict:
        config = {"expansion_factor": self.args.expansion, "k": self.args.k, "max_steps": self.args.sae_steps}
        run = self.c.call("POST", "/api/v1/sae-runs",
                          json={"embedding_run_id": self.ids["embedding"], "config": config}).json()[0]
        run = self.c.done(f"/api/v1/sae-runs/{run['id']}")
        self.ids["sae"] = run["id"]
        m = run["metrics"] or {}
        return {"config": config, "n_latents": run["n_latents"],
                **{k: m.get(k) for k in ("fvu", "explained_variance", "dead_fraction", "l0") if k in m}}

    def naming(self) -> dict:
        job = self.c.call("POST", f"/api/v1/sae-runs/{self.ids['sae']}/interpretations",
                          json={"backends": [{"backend": "keywords"}]}).json()
        started = time.perf_counter()
        job = self.c.done(f"/api/v1/jobs/{job['id']}")
        seconds = time.perf_counter() - started
        result = job.get("result") or {}
        named = result.get("n_named", result.get("n_features", job["progress"].get("done")))
        return {"features": named, "features_per_min": round(60 * named / seconds, 1) if named else None,
                "result": {k: v for k, v in result.items() if isinstance(v, int | float | str)}}

    def families(self) -> dict:
        fams = self.c.call("GET", f"/api/v1/sae-runs/{self.ids['sae']}/families").json()
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
        job = self.c.call("POST", f"/api/v1/concepts/{self.ids['concept']}/apply").json()
        self.c.done(f"/api/v1/jobs/{job['id']}")
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
    out = {"seconds": round(seconds, 2), "peak_rss_mib": max(peaks.values(), default=None), "peak_rss_mib_by_process": peaks,
           "artifact_bytes_written": tree_bytes(dep.artifact_dir) - art0, "db_bytes_delta": dep.db_bytes() - db0,
           "db_rows_delta": dep.db_rows() - rows0, **extra}
    print(f"  {name}: {out['seconds']} s, peak {out['peak_rss_mib']} MiB  {json.dumps(extra)[:300]}", flush=True)
    return out


def resume_after_naming(args: argparse.Namespace) -> dict:
    """The stages after naming on the kept data dir of an embedded run stopped in naming (`--resume
    ROOT`): a fresh `prisma serve` on it, the dataset and SAE run found through the API. For a
    machine too loaded to name every feature in the time at hand; the stages before are in the
    stopped run's log."""
    root = args.resume
    dep = Embedded(root)
    try:
        client = Client(dep)
        pipe = Pipeline(client, args, root / "notes.csv", None)
        pipe.ids["dataset"] = client.call("GET", "/api/v1/datasets").json()["items"][0]["id"]
        pipe.ids["sae"] = client.call("GET", "/api/v1/sae-runs").json()["items"][0]["id"]
        stages = {name: measure(dep, name, fn) for name, fn in [
            ("families", pipe.families), ("search_expression", pipe.search_expression),
            ("search_text", pipe.search_text), ("concept_probe", pipe.concept_probe),
            ("concept_apply", pipe.concept_apply), ("export_csv", pipe.export_csv)]}
    finally:
        dep.stop()
    return {"stages_after_naming": stages, "load_average": [round(x, 2) for x in os.getloadavg()],
            "when": time.strftime("%Y-%m-%dT%H:%M:%S")}


def run(args: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix="prisma-e2e-", dir=args.tmp))
    try:
        t0 = time.perf_counter()
        labels = write_corpus(root / "notes.csv", args.n)
        print(f"corpus: {args.n} notes in {time.perf_counter() - t0:.1f} s", flush=True)
        vectors = None
        if args.embedding == "imported":
            vectors = root / "vectors.npy"
            x = synthetic_vectors(labels, args.donors, args.noise)
            np.save(vectors, x if args.dim is None or args.dim == x.shape[1] else widen(x, args.dim, args.noise))
            del x
        dep = Embedded(root) if args.mode == "embedded" else Distributed(root)
        try:
            pipe = Pipeline(Client(dep), args, root / "notes.csv", vectors)
            order = [("upload", pipe.upload),
                     ("embed", pipe.embed) if args.embedding == "computed" else ("embed_import", pipe.embed_import),
                     ("sae", pipe.sae), ("naming", pipe.naming), ("families", pipe.families),
                     ("search_expression", pipe.search_expression), ("search_text", pipe.search_text),
                     ("concept_probe", pipe.concept_probe), ("concept_apply", pipe.concept_apply),
                     ("export_csv", pipe.export_csv)]
            stages = {}
            for name, fn in order:
                stages[name] = measure(dep, name, fn)
                if name == "embed" and args.save_donors:
                    save_donors(dep, pipe.ids["embedding_run"], labels, args.donors)
        finally:
            dep.stop()
    except BaseException:
        print(f"failed: the data dir and logs are kept in {root}", flush=True)
        raise
    shutil.rmtree(root)
    after_embed = sum(s["seconds"] for k, s in stages.items() if not k.startswith("embed"))
    peak = max(s["peak_rss_mib"] or 0 for k, s in stages.items() if not k.startswith("embed"))
    dim = stages.get("embed_import", {}).get("dim") or 384
    return {"n": args.n, "mode": args.mode, "embedding": args.embedding, "dim": dim, "stages": stages,
            "totals": {"seconds_without_embedding": round(after_embed, 1),
                       "seconds": round(sum(s["seconds"] for s in stages.values()), 1),
                       "peak_rss_mib_without_embedding": peak},
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.strip(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S")}


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
    parser.add_argument("--sae-steps", type=int, default=600,
                        help="SAE optimiser steps of 256 documents (600: 154k samples; 1.8 steps/s here at n = 12,288).")
    parser.add_argument("--dim", type=int, default=None,
                        help="Imported vectors' dimension (default: the donors'); wider ones through a random isometry.")
    parser.add_argument("--query-model", default="default",
                        help="The import's query model (a model directory of the vectors' width; see --make-query-model).")
    parser.add_argument("--make-donors", action="store_true", help="Embed 2,000 notes here into --donors, then stop.")
    parser.add_argument("--make-query-model", type=Path, default=None,
                        help="Write a random BERT of width --dim to this directory, then stop.")
    parser.add_argument("--resume", type=Path, default=None,
                        help="A kept data dir of an embedded run stopped in naming: run the stages after it, print them.")
    parser.add_argument("--tmp", default=None, help="Where the data dir is made (default: the system's).")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.make_donors or args.make_query_model:
        if args.make_donors:
            make_donors(args.donors)
        if args.make_query_model:
            make_query_model(args.make_query_model, args.dim or 384)
        return
    if args.resume:
        print(json.dumps(resume_after_naming(args), indent=2))
        return
    if args.embedding == "imported" and not args.donors.exists():
        parser.error(f"{args.donors} missing: run a computed embedding first (e.g. --n 2000), which writes it")

    load0 = os.getloadavg()[0]
    result = run(args) | {"load_average_at_start": round(load0, 2)}
    report = json.loads(args.out.read_text()) if args.out.exists() else {}
    report.update({
        "what": "the whole pipeline through the public HTTP API on N demo notes (gateway.demo.corpus, seed 0): "
                "seconds per stage (request to finished job), peak RSS per process (VmHWM, reset per stage), "
                "artifact and database bytes and rows written",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "2 cores shared with other work (see each run's load average); run under nice -n 19"},
        "imported_vectors": "each note: the normalised mean of two real all-MiniLM-L6-v2 vectors (from a computed "
                            "run of 2,000 notes) of notes with the same label set (else the same primary "
                            "condition:status), plus Gaussian noise of norm --noise, renormalised",
    })
    key = (args.n, args.mode, args.embedding, result["dim"])
    runs = [r for r in report.get("runs", []) if (r["n"], r["mode"], r["embedding"], r.get("dim", 384)) != key]
    report["runs"] = sorted([*runs, result], key=lambda r: (r["mode"], r.get("dim", 384), r["n"], r["embedding"]))
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(result["totals"]))


if __name__ == "__main__":
    main()
