"""The embedding run that the gateway tests which train and name SAEs share (test_sae_runs,
test_sae_import, test_interpretations, and tests/search/test_text_search): one module, so that every test module of a process sees
the same COMPUTED (pytest imports a test module under its own name, apart from `tests.gateway.…`)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from tests.factories import npy
from tests.gateway.polling import wait_done
from tests.gateway.test_embedding_import import NOTES_SEED, upload_notes  # noqa: F401 - NOTES_SEED for users

N_NOTES = 100
SMALL = {"expansion_factor": 2, "k": 8, "max_steps": 60, "batch_size": 64, "checkpoint_every_steps": 20}
"""The SAE config these tests train with: small enough for two cores."""

COMPUTED: list[bytes] = []
"""This test process's first computed embedding run of the corpus, its document vectors exported (.npy,
position order). The fixture's later runs import them (POST /api/v1/embedding-runs/import), which stores
what the computed run stored (test_embedding_import shows it: the same shards, the same SAE), instead of
embedding the same 100 notes again (about 12 s each on two cores). The computed path has tests of its own."""


def export_vectors(store, run: dict) -> bytes:  # noqa: ANN001
    """A computed run's stored document vectors, as an import's .npy (position order)."""
    return npy(np.concatenate([np.load(io.BytesIO(store.read_bytes(s["uri"]))) for s in run["result"]["shards"]]))


@pytest.fixture
async def embedding_run(app, client, auth) -> dict:  # noqa: ANN001
    """A succeeded embedding run (the default model, whole notes) of N_NOTES notes: computed the first time in
    this process, imported from that run's vectors after (COMPUTED)."""
    ds = await upload_notes(client, auth, n=N_NOTES)  # generate_notes(n=N_NOTES, seed=NOTES_SEED)
    if COMPUTED:
        resp = await client.post("/api/v1/embedding-runs/import", headers=auth,
                                 files={"file": ("notes.npy", COMPUTED[0])},
                                 data={"dataset_id": str(ds), "normalize": "false",
                                       "query_model": "default"})
        assert resp.status_code == 201, resp.text
        return resp.json()
    run = await client.post("/api/v1/embedding-runs", json={"dataset_id": ds}, headers=auth)
    done = await wait_done(client, auth, f"/api/v1/embedding-runs/{run.json()['id']}", timeout=240)
    assert done["status"] == "succeeded", done
    COMPUTED.append(export_vectors(app.state.store, done))
    return done
