"""The feature rows the gateway stores from an SAE run's stats.npz hold what the statistics computed, feature by
feature: the figures and neighbours a feature's page and API show."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from artifacts.store import ArtifactStore
from contracts.sae import StatsConfig
from gateway.domain.runs.sae import feature_rows
from services.sae.pipeline import compute_stats


def test_feature_rows_hold_each_features_statistics_and_neighbours(tmp_path) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    n_docs, n, k = 300, 48, 4
    cols = np.stack([rng.choice(n - 8, k, replace=False) for _ in range(n_docs)])  # the last 8 never fire
    codes = sp.csr_matrix((rng.exponential(1.0, n_docs * k).astype(np.float32), cols.ravel(),
                           np.arange(0, n_docs * k + 1, k)), shape=(n_docs, n))
    w_dec = rng.normal(size=(n, 16)).astype(np.float32)
    w_dec /= np.linalg.norm(w_dec, axis=1, keepdims=True)
    store = ArtifactStore(str(tmp_path))
    cfg = StatsConfig(histogram_bins=5, top_m=6)
    stats = compute_stats(store, "sae-runs/1", codes, w_dec, cfg)

    rows = feature_rows(store, stats.stats.uri, 7)
    assert [r["index"] for r in rows] == list(range(n)) and {r["sae_run_id"] for r in rows} == {7}
    fires = np.diff(codes.tocsc().indptr)
    dense = codes.toarray()
    decoder_cos = w_dec @ w_dec.T
    for i, row in enumerate(rows):
        assert row["density"] == fires[i] / n_docs and sum(row["histogram"]["counts"]) == fires[i]
        if fires[i]:
            active = dense[:, i][dense[:, i] > 0]
            assert np.isclose(row["mean_activation"], active.mean()) and row["max_activation"] == active.max()
        else:  # a feature that never fires: no co-occurring neighbour, zero figures
            assert row["neighbours"]["cooccurring"] == [] and row["max_activation"] == 0
        for j, value in row["neighbours"]["cooccurring"]:  # P(j fires | i fires), largest first
            both = int(((dense[:, i] > 0) & (dense[:, j] > 0)).sum())
            assert j != i and abs(value - both / fires[i]) < 1e-3
        shown = row["neighbours"]["decoder"]
        assert len(shown) == cfg.top_m and all(j != i for j, _ in shown)
        assert [j for j, _ in shown] == [int(j) for j in np.argsort(-np.where(np.arange(n) == i, -2, decoder_cos[i]),
                                                                    kind="stable")[:cfg.top_m]]
        assert all(abs(v - decoder_cos[i, j]) < 1e-4 for j, v in shown)
