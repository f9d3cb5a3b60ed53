"""The artifact store on `s3://` (s3fs), against moto's S3 server on loopback started here: the
store's contract (atomic writes, listings without temporaries, checksums, what another process
wrote is seen at once), and a dataset imported and embedded with every artifact in the bucket."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import boto3
import httpx
import pytest
from moto.server import ThreadedMotoServer

from artifacts import ArtifactStore
from tests.conftest import make_settings
from tests.distributed.harness import wait_until
from tests.gateway.polling import wait_done
from tests.live import free_port

BUCKET = "prisma-test"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A fresh bucket; the AWS_* variables a deployment would set (botocore reads them)."""
    for name, value in {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ACCESS_KEY_ID": "test",
                        "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    yield client
    # Jobs started by a test (a search index after an embedding run) may still be writing: the
    # objects are dropped with the server at the end of the module, not here.
    for obj in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])


def keys(client, prefix: str = "") -> list[str]:  # noqa: ANN001
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def test_store_contract_on_s3(s3) -> None:  # noqa: ANN001
    store = ArtifactStore(f"s3://{BUCKET}/root")
    other_process = ArtifactStore(f"s3://{BUCKET}/root", skip_instance_cache=True)
    assert other_process.list("runs") == []  # a listing it might cache

    data = b"x" * 3_000_000
    info = store.write_bytes("runs/1/a.npy", data, kind="embeddings")
    assert info.uri == f"s3://{BUCKET}/root/runs/1/a.npy"
    assert (info.size, info.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert other_process.exists(info.uri) and other_process.read_bytes("runs/1/a.npy") == data
    assert other_process.list("runs") == ["runs/1/a.npy"]
    assert store.checksum(info.uri) == info.sha256

    with pytest.raises(RuntimeError), store.open_write("runs/1/b.npy") as f:
        f.write(b"half")
        raise RuntimeError("killed mid-write")
    assert keys(s3) == ["root/runs/1/a.npy"], "a failed write leaves nothing"

    s3.put_object(Bucket=BUCKET, Key="root/runs/1/c.npy.tmp-dead", Body=b"?")  # a killed writer's leftover
    assert store.list("runs") == ["runs/1/a.npy"]
    assert store.sweep_temporaries() == 1 and keys(s3) == ["root/runs/1/a.npy"]
    with pytest.raises(ValueError):
        store.read_bytes("s3://elsewhere/runs/1/a.npy")
    store.delete("runs")
    assert keys(s3) == [] and not other_process.exists("runs/1/a.npy")


@pytest.mark.slow
@pytest.mark.anyio
async def test_import_and_embed_with_artifacts_on_s3(s3, tmp_path) -> None:  # noqa: ANN001
    from gateway.app import create_app
    from gateway.db import session_scope
    from gateway.domain.auth.service import create_key

    app = create_app(make_settings(tmp_path / "data", artifact_root=f"s3://{BUCKET}/prisma"), configure_logs=False)
    try:
        with session_scope(app.state.factory) as session:
            _, key = create_key(session, name="s3")
        auth = {"Authorization": f"Bearer {key}"}
        rows = "\n".join(f"N{i},nota {i}: tosse e febbre da {i % 7 + 1} giorni" for i in range(30))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            ds = await client.post("/api/v1/datasets", headers=auth,
                                   files={"file": ("n.csv", f"id,text\n{rows}\n".encode())})
            assert ds.status_code == 201, ds.text
            run = await client.post("/api/v1/embedding-runs", headers=auth,
                                    json={"dataset_id": ds.json()["id"], "shard_size": 8})
            done = await wait_done(client, auth, f"/api/v1/embedding-runs/{run.json()['id']}", timeout=180)
        # The run's search index is built just after the run succeeds, by the same job: wait for its
        # write to finish before stopping the jobs thread (stopping it abandons the job, and with it a
        # write in flight; CI runs caught `flat.faiss.tmp-…` that way). On S3 the rename into place is
        # a copy, then a delete: the index appears before its temporary is gone, so wait for both.
        def index_written() -> bool:
            search = [k for k in keys(s3, "prisma/") if "/search/" in k]
            return any(k.endswith("/search/flat.faiss") for k in search) and not any(".tmp-" in k for k in search)

        wait_until(index_written, 60, "the search index written")
    finally:
        app.state.runner.shutdown()
    assert done["status"] == "succeeded", done
    assert all(s["uri"].startswith(f"s3://{BUCKET}/prisma/") for s in done["result"]["shards"])
    stored = keys(s3, "prisma/")
    assert len([k for k in stored if "/embeddings/shard-" in k]) == 4
    assert any(k.endswith("snapshot.parquet") for k in stored)
    assert not [k for k in stored if ".tmp-" in k]
