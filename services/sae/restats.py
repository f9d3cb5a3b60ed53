"""A run's feature statistics computed again over all its codes (after notes were appended and encoded by the
trained SAE): the same `compute_stats` the pipeline runs, the SAE unchanged, families and names not redone.
`restats.json` is written last: a retried job that finds it returns it."""

from __future__ import annotations

from artifacts import ArtifactStore
from contracts.append import SaeRestatsPayload, SaeRestatsResult
from services.sae.encoding import load_sparse
from services.sae.io import load_sae
from services.sae.pipeline import compute_stats


def restats(payload: SaeRestatsPayload, store: ArtifactStore) -> SaeRestatsResult:
    done = f"{payload.artifact_prefix}/restats.json"
    if store.exists(done):
        return SaeRestatsResult.model_validate_json(store.read_bytes(done))
    codes = load_sparse(store, payload.codes_csr.uri).tocsr()  # [N, n]
    w_dec = load_sae(store, payload.sae_uri).W_dec.detach().cpu().numpy()
    st = compute_stats(store, payload.artifact_prefix, codes, w_dec, payload.stats, payload.tau)
    result = SaeRestatsResult(stats=st.stats, cooccurrence=st.cooccurrence,
                              activation_similarity=st.activation_similarity, heatmaps=st.heatmaps)
    store.write_bytes(done, result.model_dump_json().encode(), kind="sae-result")
    return result
