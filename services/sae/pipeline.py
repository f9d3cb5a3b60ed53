"""The `sae_train` job without the queue: train (resumably), encode, count, group.

Artifacts of a run, all under `payload.artifact_prefix`:
`cfg.json`, `sae.safetensors`, `codes.{csr,csc}.npz`, `stats.npz`, `cooccurrence.npz`,
`activation_similarity.npz`, `heatmaps.json`, `families.json`, `loss_curve.json`,
`result.json` (written last: a retried job that finds it returns it), `checkpoint/`; with
segments (`SaeConfig.document_codes = "max_over_segments"`) also `segment_codes.csr.npz` and
`segments.npz`, and the document codes are the row-wise max of the segment codes.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from contracts.jobs import Progress
from contracts.sae import (FamiliesConfig, FeatureFamily, SaeArtifacts, SaeTrainPayload,
                           SaeTrainResult, StatsConfig)
from services.sae.encoding import encode_all, save_codes, save_sparse
from services.sae.families import build_families
from services.sae.heatmaps import build_heatmaps
from services.sae.io import SavedSae, load_checkpoint, load_sae, save_checkpoint, save_sae
from services.sae.model import TopKSae
from services.sae.segments import Segments, load_segments, pooled_codes, save_segment_codes, training_vectors
from services.sae.stats import c_norm, decoder_neighbours, feature_summary, pairwise
from services.sae.trainer import (SaeTrainer, TrainingStopped, decimate, holdout_metrics,
                                  holdout_split, load_embeddings, resolve_device)

ProgressFn = Callable[[Progress], None]
StopFn = Callable[[], bool]


class StatsArtifacts(NamedTuple):
    stats: ArtifactInfo
    cooccurrence: ArtifactInfo
    activation_similarity: ArtifactInfo
    heatmaps: ArtifactInfo
    counts: np.ndarray
    """[n] int64 documents per feature, for build_families."""
    cooc: sp.csr_matrix
    """The stored (pruned) C, for build_families."""


def compute_stats(store: ArtifactStore, prefix: str, codes: sp.csr_matrix, w_dec: np.ndarray,
                  cfg: StatsConfig, tau: float = 0.1) -> StatsArtifacts:
    """Per-feature statistics, C, D, neighbours and heatmaps of codes [N, n] → artifacts."""
    summary = feature_summary(codes, cfg.histogram_bins)
    pairs = pairwise(codes, summary.counts, cfg)
    dec = decoder_neighbours(w_dec, cfg.top_m)
    buf = io.BytesIO()
    np.savez(buf, **summary._asdict(), cooc_top_indices=pairs.cooc_top_indices,
             cooc_top_values=pairs.cooc_top_values, decoder_top_indices=dec.indices,
             decoder_top_values=dec.values)
    stats = store.write_bytes(f"{prefix}/stats.npz", buf.getvalue(), kind="sae-stats")
    cooc = save_sparse(store, f"{prefix}/cooccurrence.npz", pairs.cooccurrence, "sae-cooccurrence")
    sim = save_sparse(store, f"{prefix}/activation_similarity.npz", pairs.activation_similarity,
                      "sae-activation-similarity")
    maps = build_heatmaps(summary.counts, c_norm(pairs.cooccurrence, summary.counts, cfg.eps),
                          w_dec, cfg.heatmap_size, tau)
    heat = store.write_bytes(f"{prefix}/heatmaps.json", json.dumps(maps).encode(), kind="sae-heatmaps")
    return StatsArtifacts(stats, cooc, sim, heat, summary.counts, pairs.cooccurrence)


def write_families(store: ArtifactStore, prefix: str, cooc: sp.spmatrix, counts: np.ndarray,
                   cfg: FamiliesConfig) -> tuple[ArtifactInfo, list[FeatureFamily]]:
    """build_families, stored as `<prefix>/families.json` (a JSON list, each with its iteration)."""
    families = build_families(cooc, counts, cfg)
    data = json.dumps([f.model_dump(mode="json") for f in families]).encode()
    return store.write_bytes(f"{prefix}/families.json", data, kind="sae-families"), families


def _run_steps(trainer: SaeTrainer, store: ArtifactStore, prefix: str,
               on_progress: ProgressFn | None, should_stop: StopFn | None) -> tuple[int, float]:
    """Train to the last step, checkpointing; returns (steps run now, seconds)."""
    every = trainer.cfg.checkpoint_every_steps
    start_step, t0, last_report = trainer.step, time.perf_counter(), 0.0
    while trainer.step < trainer.total_steps:
        trainer.train_step()
        if trainer.step % every == 0 or trainer.step == trainer.total_steps:
            save_checkpoint(store, prefix, trainer.step, *trainer.state())
        elapsed = time.perf_counter() - t0
        if on_progress and (elapsed - last_report >= 1.0 or trainer.step == trainer.total_steps):
            last_report = elapsed
            rate = (trainer.step - start_step) / max(elapsed, 1e-9)
            on_progress(Progress(done=trainer.step, total=trainer.total_steps, unit="steps", rate=rate,
                                 eta_seconds=(trainer.total_steps - trainer.step) / max(rate, 1e-9),
                                 message=f"fvu {trainer.curve[-1]['fvu']:.4f}"))
        if should_stop is not None and should_stop() and trainer.step < trainer.total_steps:
            save_checkpoint(store, prefix, trainer.step, *trainer.state())
            raise TrainingStopped(f"stopped at step {trainer.step}")
    return trainer.step - start_step, time.perf_counter() - t0


def train_sae(payload: SaeTrainPayload, store: ArtifactStore, *, on_progress: ProgressFn | None = None,
              should_stop: StopFn | None = None) -> SaeTrainResult:
    """Train, encode every document, compute statistics and families; resumes from checkpoints."""
    prefix = payload.artifact_prefix
    if store.exists(f"{prefix}/result.json"):
        return SaeTrainResult.model_validate_json(store.read_bytes(f"{prefix}/result.json"))
    x = load_embeddings(store, payload.embeddings)  # [N, d]
    cfg = payload.config.validate_for_dim(x.shape[1])
    seg = load_segments(store, payload.segments, x.shape[0]) if cfg.uses_segments else None
    torch.manual_seed(cfg.seed)
    train_rows, hold_rows = holdout_split(x.shape[0], cfg.holdout_fraction, cfg.seed)
    x_train, x_hold = training_vectors(x, seg, cfg.train_on, train_rows, hold_rows)
    trainer = SaeTrainer(torch.from_numpy(x_train), cfg, resolve_device(cfg.device))
    del x_train
    checkpoint = load_checkpoint(store, prefix)
    if checkpoint is not None:
        trainer.load_state(*checkpoint)
    resumed_from = trainer.step
    steps, seconds = _run_steps(trainer, store, prefix, on_progress, should_stop)
    saved = save_sae(store, prefix, trainer.sae, cfg)
    curve = store.write_bytes(f"{prefix}/loss_curve.json", json.dumps(trainer.curve).encode(),
                              kind="sae-loss-curve")
    result = analyse(trainer.sae, saved, x, x_hold, payload, store, curve, seg)
    result = result.model_copy(update={
        "loss_curve": decimate(trainer.curve), "steps_done": trainer.step, "resumed_from_step": resumed_from,
        "seconds": seconds, "samples_per_s": steps * trainer.batch_size / max(seconds, 1e-9),
        "precision": trainer.precision,
    })
    store.write_bytes(f"{prefix}/result.json", result.model_dump_json().encode(), kind="sae-result")
    return result


def analyse(sae: TopKSae, saved: SavedSae, x: np.ndarray, x_hold: np.ndarray, payload: SaeTrainPayload,
            store: ArtifactStore, curve: ArtifactInfo, seg: Segments | None = None) -> SaeTrainResult:
    """Encode every document [N, d] (or its segments, max-pooled), score on the held-out vectors
    x_hold, compute statistics and families."""
    prefix = payload.artifact_prefix
    seg_files: dict[str, ArtifactInfo] = {}
    if payload.config.document_codes == "max_over_segments" and seg is not None:
        pooled = pooled_codes(sae, seg, x.shape[0])
        codes = pooled.documents
        seg_files["segment_codes"], seg_files["segments"] = save_segment_codes(store, prefix, seg, pooled.segments)
    else:
        codes = encode_all(sae, x)
    dead_fraction = float(np.mean(np.diff(codes.tocsc().indptr) == 0))
    metrics = holdout_metrics(sae, x_hold, dead_fraction)
    codes_csr, codes_csc = save_codes(store, prefix, codes)
    w_dec = sae.W_dec.detach().cpu().numpy()
    st = compute_stats(store, prefix, codes, w_dec, payload.stats, payload.families.tau)
    fam_info, families = write_families(store, prefix, st.cooc, st.counts, payload.families)
    return SaeTrainResult(
        run_id=payload.run_id, d=sae.d, num_latents=sae.num_latents, num_documents=x.shape[0],
        metrics=metrics, loss_curve=[],
        artifacts=SaeArtifacts(cfg=saved.cfg, weights=saved.weights, codes_csr=codes_csr,
                               codes_csc=codes_csc, stats=st.stats, cooccurrence=st.cooccurrence,
                               activation_similarity=st.activation_similarity, heatmaps=st.heatmaps,
                               families=fam_info, loss_curve=curve, **seg_files),
        steps_done=0, resumed_from_step=0, seconds=0.0, samples_per_s=0.0, num_families=len(families),
        segment_words=0 if seg is None or seg.words is None else len(seg.words),
    )


def analyse_imported_sae(payload: SaeTrainPayload, source_prefix: str, store: ArtifactStore) -> SaeTrainResult:
    """An SAE trained elsewhere (sparsify's cfg.json + sae.safetensors under `source_prefix`):
    checked, saved under the run's prefix, then analysed like a trained one (no training)."""
    prefix = payload.artifact_prefix
    if store.exists(f"{prefix}/result.json"):
        return SaeTrainResult.model_validate_json(store.read_bytes(f"{prefix}/result.json"))
    x = load_embeddings(store, payload.embeddings)  # [N, d]
    seg = load_segments(store, payload.segments, x.shape[0]) if payload.config.uses_segments else None
    sae = load_sae(store, source_prefix)
    if sae.d != x.shape[1]:
        raise ValueError(f"the SAE reads d = {sae.d} but the embeddings have d = {x.shape[1]}")
    saved = save_sae(store, prefix, sae, None)
    train_rows, hold_rows = holdout_split(x.shape[0], payload.config.holdout_fraction, payload.config.seed)
    _, x_hold = training_vectors(x, seg, payload.config.train_on, train_rows, hold_rows)
    curve = store.write_bytes(f"{prefix}/loss_curve.json", b"[]", kind="sae-loss-curve")
    result = analyse(sae, saved, x, x_hold, payload, store, curve, seg)
    store.write_bytes(f"{prefix}/result.json", result.model_dump_json().encode(), kind="sae-result")
    return result
