"""Upload inputs that once cost seconds or a 500 are bounded and refused with a 4xx naming the limit:
a CSV header line too long to sniff, a `mapping` nested thousands deep, a form with too many parts
or an oversized text field. Nothing is stored by a refused upload."""

from __future__ import annotations

import httpx
import pytest

from gateway.api.v1.datasets import MAX_MAPPING_DEPTH
from gateway.domain.datasets.csv_reader import MAX_HEADER_BYTES
from gateway.uploads import MAX_FIELD_BYTES, MAX_PARTS
from tests.gateway.test_datasets_api import stored, upload

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]


async def test_csv_header_over_the_cap_is_refused(app, client: httpx.AsyncClient, auth) -> None:  # noqa: ANN001
    long_name = "c" * MAX_HEADER_BYTES
    resp = await upload(client, auth, "wide.csv", f"text,{long_name}\nuna nota,x\n".encode())
    assert resp.status_code == 422, resp.text
    assert "header" in resp.json()["detail"] and "64 kB" in resp.json()["detail"]
    assert resp.json()["locator"] == "line 1"
    # A header full of the quote patterns csv.Sniffer's regex backtracks on, under the cap: the
    # delimiter is still found (',') and the upload answers with the header's real problem.
    odd = await upload(client, auth, "odd.csv", (',"' * 4000 + "\n").encode())
    assert odd.status_code == 422, odd.text
    semi = await upload(client, auth, "semi.csv", b"id;text;note, free\n1;una nota;x\n")
    assert semi.status_code == 201, semi.text
    assert stored(app)[0] == 1


async def test_deeply_nested_mapping_is_a_422_naming_mapping(app, client, auth) -> None:  # noqa: ANN001
    too_deep = "[" * (MAX_MAPPING_DEPTH + 1) + "]" * (MAX_MAPPING_DEPTH + 1)
    for mapping in ("[" * 30_000 + "]" * 30_000, '{"text": ' + too_deep + "}",
                    '{"text": "note", "labels": [' + ", ".join(['"x"'] * 3000) + "]}"):
        resp = await upload(client, auth, "a.csv", b"note\nuna nota\n", mapping=mapping)
        assert resp.status_code == 422, resp.text
        assert resp.json()["field"] == "mapping" and "limit" in resp.json()["detail"]
    # brackets inside a name are not nesting
    ok = await upload(client, auth, "a.csv", b"[[[[[note]]]]]\nuna nota\n", mapping='{"text": "[[[[[note]]]]]"}')
    assert ok.status_code == 201, ok.text


async def test_form_parts_are_bounded(app, client, auth) -> None:  # noqa: ANN001
    fields = {f"extra{i}": "x" for i in range(MAX_PARTS)}
    resp = await upload(client, auth, "a.csv", b"text\nuna nota\n", **fields)
    assert resp.status_code == 413, resp.text
    assert resp.json()["field"] == "form" and f"{MAX_PARTS} parts" in resp.json()["detail"]

    big = await upload(client, auth, "a.csv", b"text\nuna nota\n", description="d" * (MAX_FIELD_BYTES + 1))
    assert big.status_code == 413, big.text
    assert big.json()["field"] == "description" and f"{MAX_FIELD_BYTES:,}-byte limit" in big.json()["detail"]
    assert stored(app) == (0, 0, 0)
