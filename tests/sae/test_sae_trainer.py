"""Trainer: config validation, the dead-latent counter, data order, checkpoints round trip."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from artifacts import ArtifactStore
from contracts.sae import SaeConfig, SaeSweepPayload
from sae_fixtures import tiny_payload
from services.sae.pipeline import train_sae
from services.sae.trainer import SaeTrainer, geometric_median, holdout_split, lr_at, resolve_precision


@pytest.mark.parametrize("field,value", [
    ("k", 0), ("expansion_factor", 0), ("aux_alpha", -1.0), ("batch_size", 0), ("holdout_fraction", 0.0),
    ("lr", 0.0), ("device", "tpu"), ("b_dec_init", "median"),
])
def test_invalid_config_names_the_field(field, value):
    with pytest.raises(ValidationError) as err:
        SaeConfig(**{field: value})
    assert err.value.errors()[0]["loc"] == (field,)


def test_k_above_n_names_k():
    with pytest.raises(ValidationError) as err:
        SaeConfig(expansion_factor=2, k=17).validate_for_dim(8)
    assert err.value.errors()[0]["loc"] == ("k",)
    assert SaeConfig(expansion_factor=2, k=16).validate_for_dim(8).k == 16


def test_defaults_resolve_from_d():
    cfg = SaeConfig()
    assert cfg.resolved_k_aux(384) == 192
    assert cfg.batch_size == 256
    assert cfg.resolved_lr(384) == pytest.approx(2e-4 / (3072 / 2**14) ** 0.5)  # sparsify's rule
    assert SaeConfig(batch_size=512).resolved_lr(384) == pytest.approx(2 * 2e-4 / (3072 / 2**14) ** 0.5)  # twice
    assert SaeConfig(batch_size=64).resolved_lr(384) == SaeConfig(batch_size=256).resolved_lr(384)  # not below
    assert SaeConfig(batch_size=2048, expansion_factor=32).resolved_lr(384) == pytest.approx(
        8 * 2e-4 / (12288 / 2**14) ** 0.5)
    assert SaeConfig(batch_size=2048, lr=1e-3).resolved_lr(384) == 1e-3  # an explicit rate is taken as given
    rule = SaeConfig(batch_size=256).resolved_lr(8)
    wide = SaeConfig(batch_size=512)
    assert SaeTrainer(torch.randn(100, 8), wide, torch.device("cpu")).lr == pytest.approx(rule)  # 100 rows: the rule
    assert SaeTrainer(torch.randn(400, 8), wide, torch.device("cpu")).lr == pytest.approx(rule * 400 / 256)
    assert cfg.aux_alpha == 1 / 32


def test_dead_counter_counts_samples():
    x = torch.randn(40, 6)
    cfg = SaeConfig(expansion_factor=4, k=2, batch_size=8, max_steps=5, dead_after_samples=16)
    tr = SaeTrainer(x, cfg, torch.device("cpu"))
    fired_ever = torch.zeros(24, dtype=torch.bool)
    for step in range(1, 6):
        before = tr.since_fired.clone()
        rows = tr.batch_rows(tr.step)
        with torch.no_grad():
            acts, idx = tr.sae.encode(tr.x[rows])
        fired = torch.zeros(24, dtype=torch.bool)
        fired[idx[acts > 0]] = True
        point = tr.train_step()
        torch.testing.assert_close(tr.since_fired, torch.where(fired, 0, before + 8))
        fired_ever |= fired
        assert point["dead_fraction"] == pytest.approx(float((tr.since_fired >= 16).float().mean()))
    assert (tr.since_fired[~fired_ever] == 40).all()


def test_each_epoch_visits_every_row_once():
    tr = SaeTrainer(torch.randn(30, 4), SaeConfig(batch_size=10, epochs=2), torch.device("cpu"))
    assert tr.total_steps == 6
    first = torch.cat([tr.batch_rows(s) for s in range(3)])
    second = torch.cat([tr.batch_rows(s) for s in range(3, 6)])
    assert sorted(first.tolist()) == list(range(30)) == sorted(second.tolist())
    assert first.tolist() != second.tolist()


def test_the_default_schedule_stops_at_max_samples():
    """Epochs over a small corpus; a bounded number of samples over a large one (the last partial batch dropped)."""
    x = torch.randn(100, 4)
    assert SaeTrainer(x, SaeConfig(batch_size=10, epochs=50), torch.device("cpu")).total_steps == 500
    bounded = SaeTrainer(x, SaeConfig(batch_size=10, epochs=50, max_samples=1234), torch.device("cpu"))
    assert bounded.total_steps == 123 and bounded.total_steps * 10 <= 1234
    assert SaeTrainer(x, SaeConfig(batch_size=10, epochs=50, max_samples=None), torch.device("cpu")).total_steps == 500
    assert SaeTrainer(x, SaeConfig(batch_size=10, max_steps=7, max_samples=10), torch.device("cpu")).total_steps == 7
    assert SaeTrainer(x, SaeConfig(batch_size=10, max_samples=3), torch.device("cpu")).total_steps == 1
    assert SaeConfig().max_samples == 4_000_000  # about 50 epochs of 80,000 clauses


def test_helpers():
    tr, ho = holdout_split(100, 0.1, seed=3)
    assert len(ho) == 10 and len(set(tr) | set(ho)) == 100
    pts = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [100.0, 100.0]])
    gm = geometric_median(pts)
    assert gm.norm() < 1.0  # robust to the outlier, unlike the mean
    assert lr_at(0, 100, 1.0, 10) == pytest.approx(0.1)
    assert lr_at(10, 100, 1.0, 10) == pytest.approx(1.0)
    assert lr_at(100, 100, 1.0, 10) == 0.0


def test_stop_then_resume_equals_uninterrupted(tmp_path):
    ref = train_sae(tiny_payload(ArtifactStore(str(tmp_path / "a"))), ArtifactStore(str(tmp_path / "a")))
    store = ArtifactStore(str(tmp_path / "b"))
    payload = tiny_payload(store)
    calls = iter(range(1000))
    with pytest.raises(Exception, match="stopped at step 25"):
        train_sae(payload, store, should_stop=lambda: next(calls) == 24)
    resumed = train_sae(payload, store)
    assert resumed.resumed_from_step == 25
    assert [p.model_dump() for p in resumed.loss_curve] == [p.model_dump() for p in ref.loss_curve]
    assert resumed.metrics == ref.metrics
    assert train_sae(payload, store) == resumed  # a finished run is returned, not redone


def test_training_learns_and_writes_artifacts(tmp_path):
    store = ArtifactStore(str(tmp_path))
    res = train_sae(tiny_payload(store, max_steps=200, k=4), store)
    assert res.loss_curve[-1].fvu < res.loss_curve[0].fvu
    assert res.metrics.l0 <= 4
    for info in res.artifacts.model_dump(exclude_none=True).values():
        assert store.exists(info["uri"])


def test_sweep_expands_to_one_payload_per_config():
    sweep = SaeSweepPayload(run_ids=[1, 2], embeddings=[{"uri": "file:///e.npy", "size": 1, "sha256": "0" * 64}],
                            artifact_prefix="sweep", configs=[SaeConfig(k=8), SaeConfig(k=16)])
    assert [(p.artifact_prefix, p.config.k) for p in sweep.payloads()] == [("sweep/1", 8), ("sweep/2", 16)]
    with pytest.raises(ValidationError):
        SaeSweepPayload(run_ids=[1], embeddings=sweep.embeddings, artifact_prefix="s", configs=[])


def test_bf16_precision_runs_the_encoder_matmul_in_bf16_and_learns_as_fp32():
    """precision='bf16': the encoder's matmul under autocast (what a CPU with native bf16 and a GPU run by
    default), the weights, the sparse decode and backward in fp32; the FVU curve differs from fp32's (bf16 did
    run) but ends where fp32's does, and the result records what ran."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = torch.from_numpy((rng.standard_normal((1024, 16)) @ rng.standard_normal((16, 16))).astype(np.float32))
    curves, ends = [], []
    for precision in ("fp32", "bf16"):
        cfg = SaeConfig(expansion_factor=4, k=4, batch_size=128, max_steps=60, precision=precision)
        trainer = SaeTrainer(x, cfg, torch.device("cpu"))
        assert trainer.precision == precision
        curve = [trainer.train_step()["fvu"] for _ in range(cfg.max_steps)]
        assert np.isfinite(curve).all() and all(p.dtype == torch.float32 for p in trainer.sae.parameters())
        curves.append(curve)
        ends.append(float(np.mean(curve[-10:])))
        assert ends[-1] < curve[0]
    assert curves[0] != curves[1]
    assert abs(ends[1] - ends[0]) < 0.02, ends


@pytest.mark.parametrize("flag,auto", [("0", "fp32"), ("1", "bf16")])
def test_auto_precision_follows_the_cpus_native_bf16(monkeypatch, tmp_path, flag, auto):
    monkeypatch.setenv("PRISMA_CPU_NATIVE_BF16", flag)  # what 'auto' picks on a CPU without (0) or with (1) it
    cpu = torch.device("cpu")
    assert resolve_precision("auto", cpu) == auto
    assert resolve_precision("fp32", cpu) == "fp32" and resolve_precision("bf16", cpu) == "bf16"
    store = ArtifactStore(str(tmp_path))
    assert train_sae(tiny_payload(store, max_steps=5), store).precision == auto


def test_precision_is_checked():
    with pytest.raises(ValidationError) as err:
        SaeConfig(precision="fp16")
    assert err.value.errors()[0]["loc"] == ("precision",)
