"""Applying a concept resumes after a kill (blocks already written are not redone, the result equals
an uninterrupted run), and its CSV export streams 100,000 rows with flat memory."""

from __future__ import annotations

import asyncio
import io
import json
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from contracts.concepts import ConceptCreate
from gateway.db import session_scope
from gateway.domain.auth.service import Principal
from gateway.domain.concepts.apply import ConceptApplyJob, apply_concept, concept_version, start_apply
from gateway.domain.concepts.service import create_concept, get_or_404
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.jobs.runner import JobContext
from gateway.domain.jobs.service import JobRecorder, create_or_get
from gateway.search.space import clear_cache
from tests.concepts.conftest import write_run
from tests.concepts.test_concepts_api import CONFIRMED_VS_SUSPECTED
from tests.gateway.polling import wait_done

pytestmark = pytest.mark.anyio
ME = Principal(None, "test")


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs."""


class DyingContext(JobContext):
    """Dies once `die_after` documents are reported done, like a worker killed mid-job."""

    die_after: int = 0

    def report(self, progress, *, force: bool = False) -> None:  # noqa: ANN001
        if progress.done >= self.die_after:
            raise Killed()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_apply_resumes_from_its_blocks(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    body = ConceptCreate(sae_run_id=labelled_run.run_id, name="p", kind="probe", examples=CONFIRMED_VS_SUSPECTED)
    concept_id = await create_concept(app.state, body, ME, None)
    with session_scope(app.state.factory) as session:
        job = ConceptApplyJob(concept_id=concept_id, version=concept_version(get_or_404(session, concept_id)),
                              block_rows=40)
        row, _ = create_or_get(session, kind="concept_apply", queue="gateway", payload=job, created_by_key_id=None)
        job_id = row.id
    state = app.state
    ctx = DyingContext(job_id, state.settings, state.factory, state.store, state.services,
                       JobRecorder(state.factory, job_id))
    ctx.die_after = 200
    with pytest.raises(Killed):
        await asyncio.to_thread(apply_concept, ctx, job)
    prefix = f"concepts/{concept_id}/apply-{job.version}"
    written = state.store.list(prefix)
    assert len(written) == 5  # blocks 0-4: the kill came as block 4 was reported
    before = {k: state.store.fs.info(state.store._path(k))["mtime"] for k in written}
    JobRecorder(state.factory, job_id).fail("killed")  # what a dead worker's job looks like to a retry

    resumed = await start_apply(state, concept_id, ME, None, block_rows=40)
    assert resumed.id == job_id
    done = await wait_done(client, auth, f"/api/v1/jobs/{job_id}", timeout=60)
    assert done["status"] == "succeeded" and done["attempts"] == 1
    after = state.store.list(prefix)
    assert len(after) == 11 and after[-1].endswith("matches.npz")
    assert {k: state.store.fs.info(state.store._path(k))["mtime"] for k in written} == before  # not redone

    # The same matches as an uninterrupted run in one block.
    whole = ConceptApplyJob(concept_id=concept_id, version="uninterrupted", block_rows=1000)
    with session_scope(state.factory) as session:
        row, _ = create_or_get(session, kind="concept_apply", queue="gateway", payload=whole, created_by_key_id=None)
    reference = apply_concept(JobContext(row.id, state.settings, state.factory, state.store, state.services,
                                         JobRecorder(state.factory, row.id)), whole)
    assert reference["n_matches"] == done["result"]["n_matches"]
    a = np.load(io.BytesIO(state.store.read_bytes(f"{prefix}/matches.npz")))
    b = np.load(io.BytesIO(state.store.read_bytes(f"concepts/{concept_id}/apply-uninterrupted/matches.npz")))
    for key in ("positions", "scores", "features"):
        assert np.array_equal(a[key], b[key]), key


N_BIG = 100_000


def big_dataset(app) -> tuple[int, sp.csr_matrix]:  # noqa: ANN001
    """100,000 documents with bulky metadata, inserted in batches; F0 fires on all of them."""
    from gateway.domain.auth.accounts import default_project

    with session_scope(app.state.factory) as session:
        ds = dataset_repo.add_dataset(session, name="big", format="csv", n_documents=N_BIG,
                                      project_id=default_project(session).id)
        for start in range(0, N_BIG, 10_000):
            dataset_repo.insert_documents(session, rows=[
                {"dataset_id": ds.id, "position": p, "external_id": f"E{p}", "text": "t", "labels": ["a", "b"],
                 "meta": {"ward": p % 13, "note": "n" * 300}, "n_chars": 1} for p in range(start, start + 10_000)])
        dataset_id = ds.id
    rng = np.random.default_rng(0)
    cols = np.concatenate([np.zeros((N_BIG, 1), np.int64), rng.integers(1, 64, (N_BIG, 3))], axis=1)
    acts = rng.uniform(0.1, 2.0, (N_BIG, 4)).astype(np.float32)
    codes = sp.csr_matrix((acts.ravel(), cols.ravel(), np.arange(0, 4 * N_BIG + 1, 4)), shape=(N_BIG, 64))
    codes.sum_duplicates()
    return dataset_id, codes


async def asgi_get(app, path: str, key: str, on_chunk) -> int:  # noqa: ANN001
    """GET through the app's ASGI interface, handing each body chunk to `on_chunk` as it is sent
    (httpx's ASGITransport would collect the whole body first)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"prisma.test"), (b"authorization", f"Bearer {key}".encode())],
             "client": ("127.0.0.1", 1), "server": ("prisma.test", 80)}
    status, finished, requested = {}, asyncio.Event(), []

    async def receive() -> dict:
        if not requested:
            requested.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await finished.wait()  # the client stays connected until the last chunk
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            status["code"] = message["status"]
        elif message["type"] == "http.response.body":
            on_chunk(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    await app(scope, receive, send)
    return status["code"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_export_streams_100k_rows_with_bounded_memory(app, client, auth, api_key) -> None:  # noqa: ANN001
    clear_cache()
    dataset_id, codes = big_dataset(app)
    run_id = write_run(app, dataset_id, codes)
    created = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": run_id, "name": "all", "kind": "expression", "expression": 'label:"bronchiolite" > 0'})
    assert created.status_code == 201, created.text
    concept_id = created.json()["id"]
    job = (await client.post(f"/api/v1/concepts/{concept_id}/apply", headers=auth)).json()
    assert (await wait_done(client, auth, f"/api/v1/jobs/{job['id']}", timeout=240))["status"] == "succeeded"

    seen = {"bytes": 0, "chunks": 0, "lines": 0, "first": b"", "last": b""}

    def count(chunk: bytes) -> None:  # keeps nothing but counts and the two ends
        seen["bytes"] += len(chunk)
        seen["chunks"] += bool(chunk)
        seen["lines"] += chunk.count(b"\n")
        if len(seen["first"]) < 400:
            seen["first"] += chunk[:400]
        seen["last"] = chunk[-600:] if chunk else seen["last"]

    tracemalloc.start()
    try:
        code = await asgi_get(app, f"/api/v1/concepts/{concept_id}/export.csv", api_key, count)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 200
    print(f"export: {seen['bytes'] / 1e6:.1f} MB in {seen['chunks']} chunks, traced peak {peak / 1e6:.1f} MB")
    assert seen["lines"] == N_BIG + 1 and seen["chunks"] >= 100  # the header, then batch after batch
    assert seen["bytes"] > 35e6
    assert peak < 20e6, f"peak {peak / 1e6:.1f} MB for {seen['bytes'] / 1e6:.1f} MB of CSV"
    header, first = seen["first"].decode().splitlines()[:2]
    assert header == "document_id,external_id,score,matching_features,labels,metadata"
    assert ",F0 bronchiolite," in first and ",a|b," in first
    last = seen["last"].decode().splitlines()[-1]
    assert json.loads(last[last.index("{"):].replace('""', '"').strip('"'))["note"] == "n" * 300
