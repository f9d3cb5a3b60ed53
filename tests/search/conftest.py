"""A searchable SAE run without training one: a real upload, then the run's rows and its codes
artifact written the way the SAE job records them (codes CSC npz, features, interpretations,
families), on SQLite and on PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.db import session_scope
from gateway.domain.features import repo as feature_repo
from gateway.domain.features.models import Interpretation
from gateway.search.space import clear_cache
from tests.factories import add_coded_sae_run

N_DOCS, N_FEATURES = 60, 16
LABELS = {0: "bronchiolitis", 1: "suspected bronchiolitis", 2: "acute otitis media", 3: "fever",
          5: "wheezing and cough"}


@dataclass
class Seeded:
    run_id: int
    codes: sp.csc_matrix  # float32 [docs, features]
    family_id: int


def seeded_codes(seed: int = 0) -> sp.csc_matrix:
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((N_DOCS, N_FEATURES)) < 0.25, rng.integers(1, 9, (N_DOCS, N_FEATURES)) / 8, 0)
    return sp.csc_matrix(dense.astype(np.float32))


def add_interpretation(session, *, run_id: int, index: int, label: str, description: str | None = None,
                       reliable: bool = True, threshold: float | None = None) -> None:  # noqa: ANN001
    feat, _ = feature_repo.get_feature(session, sae_run_id=run_id, index=index)
    interp = Interpretation(feature_id=feat.id, backend="keywords", label=label, description=description,
                            score=0.9 if reliable else 0.5, reliable=reliable, threshold=threshold, evidence={})
    session.add(interp)
    session.flush()
    feature_repo.set_best_interpretation(session, feature=feat)


@pytest.fixture
async def seeded(app, client, auth) -> Seeded:  # noqa: ANN001
    clear_cache()
    rows = "\n".join(f"d{i},note number {i} about a child,{'bronchiolitis' if i % 3 == 0 else 'other'}"
                     for i in range(N_DOCS))
    resp = await client.post("/api/v1/datasets", files={"file": ("s.csv", f"id,text,labels\n{rows}\n".encode())},
                             headers=auth)
    assert resp.status_code == 201, resp.text
    codes = seeded_codes()
    with session_scope(app.state.factory) as session:
        run = add_coded_sae_run(session, app.state.store, dataset_id=resp.json()["id"], codes=codes)
        for index, label in LABELS.items():
            add_interpretation(session, run_id=run.id, index=index, label=label,
                               description=f"notes that mention {label}", reliable=index != 3)
        feature_repo.replace_families(session, sae_run_id=run.id, families=[
            {"iteration": 0, "root_index": 0, "members": [(0, None, 0), (1, 0, 1), (5, 0, 1)]}])
        family_id = feature_repo.list_families(session, sae_run_id=run.id)[0].id
        run_id = run.id
    return Seeded(run_id=run_id, codes=codes, family_id=family_id)
