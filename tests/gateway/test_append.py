"""POST /api/v1/datasets/{id}/documents: documents appended after a dataset's, with the upload's formats and
checks; an id already in the dataset (or twice in the body) is refused; all or nothing; roles as an upload."""

from __future__ import annotations

import io

import httpx
import pyarrow.parquet as pq
import pytest

from gateway.domain.datasets import repo
from tests.gateway.test_datasets_api import stored, upload, zip_bytes

pytestmark = pytest.mark.anyio


async def append(client: httpx.AsyncClient, auth: dict, ds: int, filename: str, body: bytes, **data: str) -> httpx.Response:
    return await client.post(f"/api/v1/datasets/{ds}/documents", files={"file": (filename, body)}, data=data,
                             headers=auth)


@pytest.fixture
async def dataset(client, auth) -> int:  # noqa: ANN001
    resp = await upload(client, auth, "seed.csv", b"id,text,labels\ns1,prima nota,a\ns2,seconda nota,b|a\n")
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


def snapshot_ids(app, ds: int) -> list[str]:  # noqa: ANN001
    with app.state.factory() as session:
        uri = repo.get_dataset(session, dataset_id=ds).snapshot_artifact_id
        from gateway.domain.artifacts import repo as artifact_repo
        art = artifact_repo.get(session, artifact_id=uri)
    table = pq.read_table(io.BytesIO(app.state.store.read_bytes(art.uri)))
    assert table.column("position").to_pylist() == list(range(table.num_rows))
    return table.column("external_id").to_pylist()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_csv_append_adds_after_the_last_document(app, client, auth, dataset) -> None:  # noqa: ANN001
    resp = await append(client, auth, dataset, "more.csv", b"id,text,labels\ns3,terza nota,a\ns4,quarta nota,c\n")
    assert resp.status_code == 201, resp.text
    assert resp.json() == {"dataset_id": dataset, "added": 2, "n_documents": 4, "first_position": 2}
    ds = (await client.get(f"/api/v1/datasets/{dataset}", headers=auth)).json()
    assert ds["n_documents"] == 4 and ds["label_counts"] == {"a": 3, "b": 1, "c": 1}
    docs = (await client.get(f"/api/v1/datasets/{dataset}/documents", headers=auth)).json()["items"]
    assert [(d["position"], d["external_id"]) for d in docs] == [(0, "s1"), (1, "s2"), (2, "s3"), (3, "s4")]
    assert snapshot_ids(app, dataset) == ["s1", "s2", "s3", "s4"]


async def test_jsonl_and_zip_append(client, auth, dataset) -> None:  # noqa: ANN001
    resp = await append(client, auth, dataset, "more.jsonl", b'{"id": "j1", "text": "nota json"}\n')
    assert resp.status_code == 201, resp.text
    resp = await append(client, auth, dataset, "more.zip", zip_bytes({"z1.txt": "nota zip".encode()}))
    assert resp.status_code == 201, resp.text
    assert resp.json()["n_documents"] == 4


BAD = [
    ("empty text", "more.csv", b"id,text\ns3,   \n", "text", "line 2"),
    ("not UTF-8", "more.csv", b"id,text\ns3,caff\xe8\n", None, "line 2"),
    ("no text column", "more.csv", b"id,note\ns3,terza\n", "text", "line 1"),
    ("id already in the dataset", "more.csv", b"id,text\ns3,terza\ns1,di nuovo\n", "id", "line 3"),
    ("id twice in the body", "more.csv", b"id,text\ns3,terza\ns3,di nuovo\n", "id", "line 3"),
    ("id already there, JSONL", "more.jsonl", b'{"id": "s2", "text": "x"}\n', "id", "line 1"),
    ("no documents", "more.csv", b"id,text\n", None, None),
    ("unknown format", "more.txt", b"terza", "format", None),
]


@pytest.mark.parametrize(("case", "filename", "body", "field", "locator"), BAD, ids=[b[0] for b in BAD])
async def test_bad_append_stores_nothing(app, client, auth, dataset, case, filename, body, field, locator) -> None:  # noqa: ANN001
    before = stored(app)
    resp = await append(client, auth, dataset, filename, body)
    assert resp.status_code == 422, resp.text
    err = resp.json()
    assert (err["field"], err["locator"]) == (field, locator), err
    if locator:
        assert locator in err["detail"]
    assert stored(app) == before
    assert snapshot_ids(app, dataset) == ["s1", "s2"]


async def test_document_and_body_bounds(app, client, auth, dataset, settings) -> None:  # noqa: ANN001
    before = stored(app)
    big = b"id,text\ns3," + b"x" * (settings.max_document_bytes + 1) + b"\n"
    resp = await append(client, auth, dataset, "big.csv", big)
    assert resp.status_code in (413, 422), resp.text
    assert "limit" in resp.json()["detail"]
    app.state.settings.max_upload_bytes = 200_000  # the bound is the upload's, streamed: a small one shows it
    huge = b"id,text\n" + b"s,x\n" * (app.state.settings.max_upload_bytes // 4 + 1)
    resp = await append(client, auth, dataset, "huge.csv", huge)
    assert resp.status_code == 413, resp.text
    assert stored(app) == before


async def test_missing_dataset_is_404(client, auth) -> None:  # noqa: ANN001
    resp = await append(client, auth, 999, "more.csv", b"id,text\ns3,terza\n")
    assert resp.status_code == 404


async def test_roles(clients, world) -> None:  # noqa: ANN001
    ds = world.ids["dataset_id"]
    body = b"id,text\nB1,nuova nota\n"
    assert (await append(clients["viewer"], {}, ds, "n.csv", body)).status_code == 403
    assert (await append(clients["read_only"], {}, ds, "n.csv", body)).status_code == 403
    assert (await append(clients["other"], {}, ds, "n.csv", body)).status_code == 404
    assert (await append(clients["none"], {}, ds, "n.csv", body)).status_code == 401
    # the world's embedding run of this dataset is queued: its snapshot must not change under it
    resp = await append(clients["editor"], {}, ds, "n.csv", body)
    assert resp.status_code == 409 and resp.json()["field"] == "dataset_id", resp.text


async def test_append_is_audited(app, client, auth, dataset) -> None:  # noqa: ANN001
    from sqlalchemy import select

    from gateway.domain.auth.models import AuditEvent

    assert (await append(client, auth, dataset, "more.csv", b"id,text\ns3,terza\n")).status_code == 201
    with app.state.factory() as session:
        event = session.scalars(select(AuditEvent).where(AuditEvent.action == "dataset.append")).one()
    assert event.target_id == str(dataset) or event.target_id == dataset
    assert event.details["n_documents"] == 1
