"""Uploading datasets through the API: formats, paging, deletion, and every bad input.

Each bad input must answer 4xx with a message naming the line/member and field, and leave
the stored datasets, documents and artifacts exactly as they were (an upload is all or nothing).
"""

from __future__ import annotations

import io
import json
import zipfile

import httpx
import pyarrow.parquet as pq
import pytest

from gateway.domain.datasets import repo

pytestmark = pytest.mark.anyio


def stored(app) -> tuple[int, int, int]:  # noqa: ANN001
    """(datasets, documents, finished artifact files) as stored now."""
    with app.state.factory() as session:
        n_ds, n_docs = repo.count_datasets(session), repo.count_documents(session)
    return n_ds, n_docs, len(app.state.store.list("datasets"))


async def upload(client: httpx.AsyncClient, auth: dict, filename: str, body: bytes, **data: str) -> httpx.Response:
    return await client.post("/api/v1/datasets", files={"file": (filename, body)}, data=data, headers=auth)


@pytest.fixture
async def seeded(app, client, auth):  # noqa: ANN001, ANN201
    """One good dataset already stored, which no failed upload may disturb."""
    resp = await upload(client, auth, "seed.csv", b"id,text,labels\ns1,prima nota,a\ns2,seconda nota,b|a\n")
    assert resp.status_code == 201, resp.text
    return stored(app)


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


# --- formats that work ------------------------------------------------------------------


async def test_csv_upload_stores_documents_and_snapshot(app, client, auth) -> None:  # noqa: ANN001
    csv = "id,text,labels,ward\nA1,Bronchiolite confermata,bronchiolitis:confirmed,PS\nA2,Sospetta otite,otitis:suspected|fever,amb\n"
    resp = await upload(client, auth, "notes.csv", csv.encode(), name="Notes")
    assert resp.status_code == 201, resp.text
    ds = resp.json()
    assert (ds["name"], ds["n_documents"], ds["format"]) == ("Notes", 2, "csv")
    assert ds["label_counts"] == {"bronchiolitis:confirmed": 1, "otitis:suspected": 1, "fever": 1}
    docs = (await client.get(f"/api/v1/datasets/{ds['id']}/documents", headers=auth)).json()
    assert [d["external_id"] for d in docs["items"]] == ["A1", "A2"]
    assert docs["items"][1]["labels"] == ["otitis:suspected", "fever"]
    assert docs["items"][0]["metadata"] == {"ward": "PS"}
    snapshot = pq.read_table(app.state.store.local_path(ds["snapshot_uri"])).to_pylist()
    assert [r["text"] for r in snapshot] == ["Bronchiolite confermata", "Sospetta otite"]
    assert [r["position"] for r in snapshot] == [0, 1]
    assert [r["doc_id"] for r in snapshot] == [d["id"] for d in docs["items"]]


async def test_jsonl_and_zip_uploads(client, auth) -> None:  # noqa: ANN001
    jsonl = b'{"id": 7, "text": "uno", "labels": ["x", "y"]}\n\n{"id": 8, "text": "due", "labels": "z"}\n'
    resp = await upload(client, auth, "a.jsonl", jsonl)
    assert resp.status_code == 201, resp.text
    assert resp.json()["n_documents"] == 2 and resp.json()["label_counts"] == {"x": 1, "y": 1, "z": 1}
    z = zip_bytes({"notes/a.txt": "testo A".encode(), "notes/b.TXT": "testo B".encode(), "readme.md": b"skip"})
    resp = await upload(client, auth, "notes.zip", z)
    assert resp.status_code == 201, resp.text
    docs = (await client.get(f"/api/v1/datasets/{resp.json()['id']}/documents", headers=auth)).json()
    assert sorted(d["external_id"] for d in docs["items"]) == ["notes/a", "notes/b"]


async def test_column_mapping(client, auth) -> None:  # noqa: ANN001
    csv = "codice;nota;diagnosi\nX1;Febbre alta;febbre\n".encode()
    resp = await upload(client, auth, "it.csv", csv, text_column="nota", id_column="codice", label_columns="diagnosi")
    assert resp.status_code == 201, resp.text
    docs = (await client.get(f"/api/v1/datasets/{resp.json()['id']}/documents", headers=auth)).json()
    assert docs["items"][0] == {**docs["items"][0], "external_id": "X1", "text": "Febbre alta", "labels": ["febbre"]}


async def test_paging_and_delete(app, client, auth) -> None:  # noqa: ANN001
    rows = "\n".join(f"d{i},documento numero {i}" for i in range(120))
    resp = await upload(client, auth, "many.csv", f"id,text\n{rows}\n".encode())
    ds_id = resp.json()["id"]
    page = (await client.get(f"/api/v1/datasets/{ds_id}/documents?limit=50&offset=100", headers=auth)).json()
    assert page["total"] == 120 and [d["position"] for d in page["items"]] == list(range(100, 120))
    listing = (await client.get("/api/v1/datasets", headers=auth)).json()
    assert listing["total"] == 1 and listing["items"][0]["id"] == ds_id
    assert (await client.delete(f"/api/v1/datasets/{ds_id}", headers=auth)).status_code == 204
    assert stored(app) == (0, 0, 0)
    assert (await client.get(f"/api/v1/datasets/{ds_id}", headers=auth)).status_code == 404
    assert (await client.delete(f"/api/v1/datasets/{ds_id}", headers=auth)).status_code == 404


# --- bad input: 4xx naming the place, nothing stored changes -----------------------------

BAD_INPUTS = {
    "whitespace document": ("a.csv", b"id,text\n1,ok\n2,   \n", 422, ["line 3", "empty"], "text"),
    "empty document jsonl": ("a.jsonl", b'{"text": "ok"}\n{"text": ""}\n', 422, ["line 2", "empty"], "text"),
    "non-utf8": ("a.csv", "id,text\n1,ok\n2,perché\n".encode("latin-1"), 422, ["line 3", "UTF-8"], None),
    "missing text column": ("a.csv", b"id,body,ward\n1,x,y\n", 422, ["'text'", "'id'", "'body'", "'ward'"], "text"),
    "duplicate ids": ("a.csv", b"id,text\nA,x\nB,y\nA,z\n", 422, ["line 4", "'A'", "line 2"], "id"),
    "malformed jsonl": ("a.jsonl", b'{"text": "a"}\n{"text": "b",}\n', 422, ["line 2", "JSON"], None),
    "zip without text files": ("a.zip", zip_bytes({"a.pdf": b"%PDF", "b.md": b"x"}), 422, [".txt", "a.pdf"], "path"),
    "zip path traversal": ("a.zip", zip_bytes({"../../etc/evil.txt": b"x"}), 422, ["../../etc/evil.txt"], "path"),
    "zip bomb": ("a.zip", zip_bytes({"bomb.txt": b"0" * 30_000_000}), 422, ["bomb.txt"], None),
    "not a zip": ("a.zip", b"this is not a zip", 422, ["zip"], None),
    "unknown format": ("a.xlsx", b"PK", 422, ["a.xlsx"], "format"),
    "empty file": ("a.csv", b"", 422, ["no documents"], None),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
async def test_bad_input_is_refused_and_nothing_changes(case: str, app, client, auth, seeded) -> None:  # noqa: ANN001
    name, body, status, fragments, field = BAD_INPUTS[case]
    resp = await upload(client, auth, name, body)
    assert resp.status_code == status, resp.text
    err = resp.json()
    for fragment in fragments:
        assert fragment in err["detail"], f"{fragment!r} not in {err['detail']!r}"
    if field is not None:
        assert err["field"] == field
    assert stored(app) == seeded
    assert list(app.state.settings.uploads_dir.iterdir()) == []  # temporary files removed


async def test_bad_mapping_names_the_field(app, client, auth, seeded) -> None:  # noqa: ANN001
    resp = await upload(client, auth, "a.csv", b"text\nx\n", mapping='{"text": "text", "colour": "x"}')
    assert resp.status_code == 422 and "colour" in resp.json()["detail"]
    resp = await upload(client, auth, "a.csv", b"text\nx\n", mapping="{not json")
    assert resp.status_code == 422 and resp.json()["field"] == "mapping"
    assert stored(app) == seeded


async def test_document_over_the_size_limit(app, client, auth, seeded) -> None:  # noqa: ANN001
    big = "a" * (10 * 1024 * 1024 + 10)  # the default limit is 10 MB
    body = f"id,text\n1,short\n2,{big}\n".encode()
    resp = await upload(client, auth, "big.csv", body)
    assert resp.status_code == 422
    assert "line 3" in resp.json()["detail"] and "limit" in resp.json()["detail"]
    assert stored(app) == seeded


async def test_upload_over_the_limit_is_refused_while_streaming(app, client, auth, seeded) -> None:  # noqa: ANN001
    app.state.settings.max_upload_bytes = 200_000
    sent = 0

    async def body():  # noqa: ANN202 - a 5 MB multipart body, produced lazily
        nonlocal sent
        boundary = b"--xyz"
        yield boundary + b'\r\nContent-Disposition: form-data; name="file"; filename="big.csv"\r\n\r\nid,text\n'
        for i in range(5000):
            sent += 1
            yield f"{i},{'x' * 1000}\n".encode()
        yield b"\r\n" + boundary + b"--\r\n"

    resp = await client.post(
        "/api/v1/datasets", content=body(), headers={**auth, "Content-Type": "multipart/form-data; boundary=xyz"}
    )
    assert resp.status_code == 413
    assert "200,000-byte limit" in resp.json()["detail"] and resp.json()["field"] == "file"
    assert sent < 1000, f"the server read {sent} of 5000 chunks before refusing"
    assert stored(app) == seeded


async def test_declared_length_over_the_limit_is_refused_before_reading(app, client, auth) -> None:  # noqa: ANN001
    app.state.settings.max_upload_bytes = 1000
    resp = await client.post(
        "/api/v1/datasets", content=b"x" * 2_000_000,
        headers={**auth, "Content-Type": "multipart/form-data; boundary=b", "Content-Length": "2000000"},
    )
    assert resp.status_code == 413


async def test_not_multipart(client, auth) -> None:  # noqa: ANN001
    resp = await client.post("/api/v1/datasets", json={"text": "x"}, headers=auth)
    assert resp.status_code == 415 and "multipart/form-data" in resp.json()["detail"]


async def test_missing_file_part(client, auth) -> None:  # noqa: ANN001
    resp = await client.post("/api/v1/datasets", data={"name": "x"}, files={"other": ("a.csv", b"text\nx\n")}, headers=auth)
    assert resp.status_code == 422 and "'file'" in resp.json()["detail"]


async def test_html_in_a_document_is_escaped_on_the_dataset_page(client, auth, api_key) -> None:  # noqa: ANN001
    payload = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    body = json.dumps({"id": "<b>id</b>", "text": payload, "labels": ["<i>lab</i>"]}).encode() + b"\n"
    resp = await upload(client, auth, "xss.jsonl", body, name="<svg onload=alert(1)>")
    assert resp.status_code == 201
    ds_id = resp.json()["id"]
    page = await client.get(f"/datasets/{ds_id}", headers=auth)
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "<img src=x" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text
    assert "&lt;b&gt;id&lt;/b&gt;" in page.text and "&lt;i&gt;lab&lt;/i&gt;" in page.text
    assert "<svg onload" not in page.text
    listing = await client.get("/datasets", headers=auth)
    assert "<svg onload" not in listing.text and "&lt;svg onload=alert(1)&gt;" in listing.text
