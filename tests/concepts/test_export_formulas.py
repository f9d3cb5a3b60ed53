"""The CSV export never hands a spreadsheet a formula: a text cell starting with = + - @ tab or CR
is written with a leading ' (OWASP's CSV injection rule), numbers and JSON are left alone."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.domain.concepts.export import safe_cell
from gateway.search.space import clear_cache
from tests.concepts.conftest import write_run
from tests.gateway.polling import wait_done

pytestmark = pytest.mark.anyio
# (external id, labels) as uploaded; each starts with a character a spreadsheet evaluates
HOSTILE = [('=HYPERLINK("http://evil.test","x")', "=1+1"), ("+41", "+cmd"), ("-2", "-3+4"),
           ("@SUM(A1)", "@risk"), ("plain", "safe|=also")]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_export_escapes_formula_cells(app, client, auth) -> None:  # noqa: ANN001
    clear_cache()
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "text", "labels"])
    writer.writerows([ident, f"note {i}", labels] for i, (ident, labels) in enumerate(HOSTILE))
    resp = await client.post("/api/v1/datasets", headers=auth, files={"file": ("f.csv", out.getvalue().encode())})
    assert resp.status_code == 201, resp.text
    codes = sp.csr_matrix(np.array([[1.0 + i, 0.5, 0, 0] for i in range(len(HOSTILE))], dtype=np.float32))  # 4: LABELS
    run_id = write_run(app, resp.json()["id"], codes)
    created = await client.post("/api/v1/concepts", headers=auth, json={
        "sae_run_id": run_id, "name": "all", "kind": "expression", "expression": "F0 > 0"})
    assert created.status_code == 201, created.text
    concept_id = created.json()["id"]
    job = (await client.post(f"/api/v1/concepts/{concept_id}/apply", headers=auth)).json()
    assert (await wait_done(client, auth, f"/api/v1/jobs/{job['id']}", timeout=60))["status"] == "succeeded"

    exported = await client.get(f"/api/v1/concepts/{concept_id}/export.csv", headers=auth)
    assert exported.status_code == 200
    rows = {r["external_id"]: r for r in csv.DictReader(io.StringIO(exported.text))}
    expected_ids = {safe_cell(ident) for ident, _ in HOSTILE}
    assert set(rows) == expected_ids == {"'" + i for i, _ in HOSTILE[:4]} | {"plain"}
    assert rows["'+41"]["labels"] == "'+cmd" and rows["'@SUM(A1)"]["labels"] == "'@risk"
    assert rows["plain"]["labels"] == "safe|=also"  # only a cell's first character makes a formula
    assert all(not r[col].startswith(("=", "+", "-", "@", "\t", "\r"))
               for r in rows.values() for col in ("external_id", "labels", "matching_features"))
    assert all(float(r["score"]) > 0 and r["metadata"].startswith("{") for r in rows.values())
    assert [safe_cell(c) for c in ("\tx", "\rx", "a=b", "")] == ["'\tx", "'\rx", "a=b", ""]
