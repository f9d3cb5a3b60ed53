"""The GPU path: the embedder and the SAE trainer on device "cuda" in half precision. Skipped where
torch sees no CUDA device (CI, the CPU machines); run it on a GPU machine with
`pytest tests/test_cuda.py`. Timings of the GPU path belong to bench/ (gpu.json), not here."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

TEXTS = ["Bronchiolite confermata con sibili e rientramenti.", "Febbre alta da tre giorni, tosse secca. " * 60,
         "Visita di controllo: nulla da segnalare."]


def test_embedder_on_cuda_in_half_precision_matches_fp32_on_cpu() -> None:
    """'auto' precision on CUDA is bf16 (or fp16); the vectors keep the fp32 CPU ones' direction, and
    the long text is still chunk-and-averaged (no token dropped)."""
    from services.embedder.encoder import embed_texts
    from services.embedder.models import load_model, select_device, select_dtype

    cuda = select_device("cuda")
    half = select_dtype("auto", cuda)
    assert half in (torch.bfloat16, torch.float16)
    on_gpu = embed_texts(load_model("default", device=cuda, dtype=half), TEXTS)
    on_cpu = embed_texts(load_model("default", device=torch.device("cpu"), dtype=torch.float32), TEXTS)
    assert on_gpu.vectors.dtype == np.float32 and on_gpu.vectors.shape == on_cpu.vectors.shape
    cosine = (on_gpu.vectors * on_cpu.vectors).sum(1)  # unit rows
    assert cosine.min() > 0.99, cosine
    assert on_gpu.n_chunks.tolist() == on_cpu.n_chunks.tolist() and on_gpu.n_chunks[1] > 1
    assert on_gpu.n_tokens.tolist() == on_cpu.n_tokens.tolist()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sae_trainer_on_cuda_under_autocast_learns_as_in_fp32(dtype: torch.dtype) -> None:
    """The trainer's steps on CUDA under autocast: finite losses, parameters kept fp32 on the GPU, and
    the FVU curve ending where the fp32 run's does; the held-out metrics computed there."""
    from contracts.sae import SaeConfig
    from services.sae.trainer import SaeTrainer, holdout_metrics, resolve_device

    if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4096, 64)) @ rng.standard_normal((64, 64))).astype(np.float32)  # [N, d]
    cfg = SaeConfig(expansion_factor=8, k=8, batch_size=256, max_steps=200, device="cuda")
    curves = {}
    for half in (False, True):
        trainer = SaeTrainer(torch.from_numpy(x), cfg, resolve_device("cuda"))
        with torch.autocast(device_type="cuda", dtype=dtype, enabled=half):
            curves[half] = [trainer.train_step()["fvu"] for _ in range(cfg.max_steps)]
        assert all(p.device.type == "cuda" and p.dtype == torch.float32 for p in trainer.sae.parameters())
    assert np.isfinite(curves[True]).all()
    end = {half: float(np.mean(c[-20:])) for half, c in curves.items()}
    assert end[True] < curves[True][0] and abs(end[True] - end[False]) < 0.02, end
    metrics = holdout_metrics(trainer.sae, x[:512], dead_fraction=0.0)
    assert 0 <= metrics.fvu < 1


def test_sae_dense_products_on_cuda_match_the_sparse_ones() -> None:
    """On CUDA the SAE's sparse products run as dense matmuls by default (services/sae/model.py,
    `dense_products`); outputs and gradients equal embedding_bag's, AuxK latents included."""
    from services.sae.model import TopKSae

    dense = TopKSae(64, 512, 8, seed=0, device="cuda")
    sparse = TopKSae(64, 512, 8, seed=0, device="cuda")
    sparse.load_state_dict(dense.state_dict())
    sparse.dense = False
    assert dense._dense(256) and not sparse._dense(256)
    x = torch.randn(256, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    dead = torch.zeros(512, dtype=torch.bool, device="cuda")
    dead[::3] = True
    outs = [sae(x, dead_mask=dead, k_aux=16) for sae in (dense, sparse)]
    for out in outs:
        (out.fvu + 0.5 * out.auxk_loss).backward()
    close = {"rtol": 1e-4, "atol": 1e-5}  # the same sums in another order
    assert outs[0].auxk_loss > 0
    torch.testing.assert_close(outs[0].sae_out, outs[1].sae_out, **close)
    torch.testing.assert_close(outs[0].auxk_loss, outs[1].auxk_loss, **close)
    for (name, p), (_, q) in zip(dense.named_parameters(), sparse.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name, **close)


def test_an_embedding_run_on_cuda_stores_what_the_cpu_run_stores(tmp_path) -> None:
    """The embedding job itself (services/embedder/runs.py: shards, segments, each distinct segment once,
    documents as the mean of their segments) on device 'cuda' at 'auto' precision, against the same run
    on the CPU in fp32: the same rows, positions, spans and token counts, vectors in the same direction."""
    from artifacts import ArtifactStore
    from contracts.embed import EmbeddingRunSpec, EmbedJobPayload
    from services.embedder.config import EmbedderSettings
    from services.embedder.models import ModelCache
    from services.embedder.runs import run_embedding
    from tests.embedder.conftest import stored_array, write_snapshot

    notes = [*TEXTS, "Torace: MV fisiologico. Sospetta bronchiolite, esclusa polmonite. Torace: MV fisiologico."]
    store = ArtifactStore(str(tmp_path))
    snapshot = write_snapshot(store, "datasets/1/snapshot.parquet", notes)

    def run(run_id: int, device: str, precision: str, **spec: object) -> tuple[dict, object]:
        settings = EmbedderSettings(device=device, precision=precision, threads=1, progress_interval_s=0.0)
        payload = EmbedJobPayload(run_id=run_id, snapshot_uri=snapshot.uri, artifact_prefix=f"embedding-runs/{run_id}",
                                  spec=EmbeddingRunSpec(shard_size=2, segments=True, **spec))
        result = run_embedding(payload, store, settings=settings, models=ModelCache.from_settings(settings))
        return {"documents": stored_array(store, result.shards).astype(np.float32),
                "segments": stored_array(store, result.segments, "vectors").astype(np.float32),
                "position": stored_array(store, result.segments, "position"),
                "char_start": stored_array(store, result.segments, "char_start")}, result

    for document_vectors in ("encoded", "segments"):
        gpu, on_gpu = run(1 if document_vectors == "encoded" else 3, "cuda", "auto", document_vectors=document_vectors)
        cpu, on_cpu = run(2 if document_vectors == "encoded" else 4, "cpu", "fp32", document_vectors=document_vectors)
        assert on_gpu.n_tokens == on_cpu.n_tokens and on_gpu.n_segments == on_cpu.n_segments
        assert on_gpu.n_segments_embedded == on_cpu.n_segments_embedded < on_gpu.n_segments  # "Torace: …" once
        for key in ("position", "char_start"):
            assert np.array_equal(gpu[key], cpu[key]), key
        for key in ("documents", "segments"):
            cosine = (gpu[key] * cpu[key]).sum(1) / np.linalg.norm(gpu[key], axis=1) / np.linalg.norm(cpu[key], axis=1)
            assert cosine.min() > 0.99, (document_vectors, key, cosine)
