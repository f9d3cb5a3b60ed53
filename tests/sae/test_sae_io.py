"""cfg.json + sae.safetensors: our files in sparsify's layout, and sparsify's files imported."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from artifacts import ArtifactStore
from contracts.sae import SaeConfig
from services.sae.encoding import encode_all, encode_vectors
from services.sae.io import import_sae, load_sae, save_sae
from services.sae.model import TopKSae


def test_save_load_round_trip(tmp_path):
    store = ArtifactStore(str(tmp_path))
    sae = TopKSae(6, 24, 3, seed=5)
    saved = save_sae(store, "runs/1", sae, SaeConfig(expansion_factor=4, k=3))
    cfg = json.loads(store.read_bytes(saved.cfg.uri))
    assert {k: cfg[k] for k in ("d_in", "k", "num_latents", "activation")} == {
        "d_in": 6, "k": 3, "num_latents": 24, "activation": "topk"}
    loaded = load_sae(store, store.uri("runs/1"))
    for (name, p), (_, q) in zip(sae.state_dict().items(), loaded.state_dict().items()):
        torch.testing.assert_close(p, q, msg=name)


def test_import_a_sparsify_folder(tmp_path):
    """A folder as sparsify's `save_to_disk` writes it (keys and cfg fields), made by hand."""
    d, n, k = 5, 20, 4
    g = torch.Generator().manual_seed(0)
    tensors = {"encoder.weight": torch.randn(n, d, generator=g), "encoder.bias": torch.randn(n, generator=g),
               "W_dec": torch.randn(n, d, generator=g), "b_dec": torch.randn(d, generator=g)}
    folder = tmp_path / "layers.3"
    folder.mkdir()
    save_file(tensors, str(folder / "sae.safetensors"))
    (folder / "cfg.json").write_text(json.dumps({
        "activation": "topk", "expansion_factor": 4, "normalize_decoder": True, "num_latents": 0,
        "k": k, "multi_topk": False, "skip_connection": False, "transcode": False, "d_in": d}))
    store = ArtifactStore(str(tmp_path / "store"))
    import_sae(store, folder, "imported/1")
    sae = load_sae(store, "imported/1")
    x = torch.randn(7, d, generator=g)
    pre = torch.relu((x - tensors["b_dec"]) @ tensors["encoder.weight"].T + tensors["encoder.bias"])
    ref = pre.topk(k, dim=1)
    acts, idx = sae.encode(x)
    h = torch.zeros(7, n).scatter(1, idx, acts)
    torch.testing.assert_close(h, torch.zeros(7, n).scatter(1, ref.indices, ref.values))
    torch.testing.assert_close(sae.decode(acts, idx), h @ tensors["W_dec"] + tensors["b_dec"])


def test_import_rejects_a_transcoder(tmp_path):
    folder = tmp_path / "tc"
    folder.mkdir()
    save_file({"encoder.weight": torch.zeros(4, 2), "encoder.bias": torch.zeros(4),
               "W_dec": torch.zeros(4, 2), "b_dec": torch.zeros(2)}, str(folder / "sae.safetensors"))
    (folder / "cfg.json").write_text(json.dumps({"k": 1, "d_in": 2, "transcode": True}))
    with pytest.raises(ValueError, match="transcode"):
        import_sae(ArtifactStore(str(tmp_path / "s")), folder, "x")


def test_encode_all_and_query_vectors_agree():
    sae = TopKSae(4, 16, 3, seed=1)
    x = np.random.default_rng(0).standard_normal((9, 4)).astype(np.float32)
    codes = encode_all(sae, x, batch_size=4)
    assert codes.shape == (9, 16) and (np.diff(codes.indptr) <= 3).all()
    q = encode_vectors(sae, x[2:3])[0]
    row = codes[2].toarray().ravel()
    assert {f.index: pytest.approx(f.activation) for f in q} == {
        int(i): pytest.approx(float(row[i])) for i in np.flatnonzero(row)}
    assert [f.activation for f in q] == sorted((f.activation for f in q), reverse=True)
