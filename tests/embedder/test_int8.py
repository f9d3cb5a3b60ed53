"""The int8 CPU path: int8 Linear layers against fp32, per-row activation scales (a row's output
depends on that row alone), vectors close to fp32's, and the precision a run records."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

from artifacts import ArtifactStore
from contracts.embed import EmbeddingRunSpec, EmbedJobPayload
from services.embedder import models as models_module
from services.embedder.config import EmbedderSettings
from services.embedder.encoder import embed_texts
from services.embedder.errors import EmbedderInputError, RunSpecMismatchError
from services.embedder.int8 import (FFN_BLOCK_ROWS, RowBlocks, RowScaledInt8Linear, quantize_if_close, quantize_linears,
                                    restore)
from services.embedder.models import LoadedModel, ModelCache, select_precision
from services.embedder.runs import run_embedding
from tests.conftest import MACHINERY_ENCODER

TEXTS = ["Sospetta bronchiolite, esclusa polmonite.", "No EDEMA.", "Torace: MV fisiologico.",
         "Bambino di 3 anni con febbre da due giorni, tosse secca e rinorrea; obiettività toracica nella norma.",
         "Extremities reveal no peripheral cyanosis or edema."]


@pytest.mark.parametrize(("n_in", "n_out", "rows"), [(1, 1, 1), (7, 13, 5), (384, 1536, 33), (1536, 384, 2)])
def test_int8_linear_against_fp32_and_row_by_row(n_in: int, n_out: int, rows: int) -> None:
    torch.manual_seed(n_in + n_out)
    linear = torch.nn.Linear(n_in, n_out)
    x = torch.randn(3, rows, n_in) * torch.rand(3, rows, 1) * 10  # rows of very different ranges
    q = RowScaledInt8Linear(linear)
    with torch.inference_mode():
        ref, out = linear(x), q(x)
        alone = torch.stack([torch.stack([q(x[i, j : j + 1])[0] for j in range(rows)]) for i in range(3)])
    assert out.shape == ref.shape
    scale = x.abs().amax(-1, keepdim=True) * linear.weight.abs().sum(1) / 64  # 7-bit activations, 8-bit weights
    assert ((out - ref).abs() <= scale + 1e-6).all()
    torch.testing.assert_close(alone, out, rtol=0, atol=0)  # each row's output is its own


@pytest.fixture(scope="module")
def int8_lm() -> LoadedModel:
    """torch's int8 layers (the engine of a model CTranslate2 cannot take; test_ct2.py tests CTranslate2)."""
    return ModelCache(device="cpu", precision="fp32", default_model=MACHINERY_ENCODER, int8_engine="torch").get(
        None, precision="int8")


def test_int8_vectors_close_to_fp32_and_independent_of_the_batch(lm: LoadedModel, int8_lm: LoadedModel) -> None:
    assert int8_lm.precision == "int8" and lm.precision == "fp32" and int8_lm.dtype == torch.float32
    assert int8_lm.engine == "torch"
    fp32, int8 = embed_texts(lm, TEXTS).vectors, embed_texts(int8_lm, TEXTS).vectors
    cosine = (fp32 * int8).sum(1)  # both unit norm
    assert cosine.min() >= 0.98, cosine  # MiniLM asked for int8 explicitly; e5-small keeps >= 0.995
    alone = np.stack([embed_texts(int8_lm, [t]).vectors[0] for t in TEXTS])
    torch.testing.assert_close(torch.from_numpy(alone), torch.from_numpy(int8), rtol=0, atol=0)


def test_feed_forwards_in_row_blocks_give_the_same_numbers(int8_lm: LoadedModel) -> None:
    model = int8_lm.model
    layers = [m for m in model.modules() if isinstance(getattr(m, "feed_forward_chunk", None), RowBlocks)]
    assert len(layers) == model.config.num_hidden_layers  # quantising blocked every layer's feed-forward
    batch = int8_lm.tokenizer(TEXTS, padding=True, return_tensors="pt", return_token_type_ids=False)
    with torch.inference_mode():
        blocked = model(**batch).last_hidden_state  # [5, L, d]: fewer rows than one block, run whole
        for layer in layers:
            layer.feed_forward_chunk.rows = 7  # 5 x L rows in blocks of 7, the last one short
        in_sevens = model(**batch).last_hidden_state
        for layer in layers:
            layer.feed_forward_chunk.rows = 1 << 30
        whole = model(**batch).last_hidden_state
        for layer in layers:
            layer.feed_forward_chunk.rows = FFN_BLOCK_ROWS  # the shared fixture's model as it was
    assert batch["input_ids"].numel() % 7 and batch["input_ids"].numel() > 7
    torch.testing.assert_close(in_sevens, whole, rtol=0, atol=0)
    torch.testing.assert_close(blocked, whole, rtol=0, atol=0)


def test_restore_undoes_the_blocks_and_the_int8_layers() -> None:
    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=16, vocab_size=30)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 30, (3, 5))
    with torch.inference_mode():
        before = model(input_ids=ids).last_hidden_state
    swapped = quantize_linears(model)
    assert len(swapped[1]) == 2 and all(isinstance(layer.feed_forward_chunk, RowBlocks) for layer in swapped[1])
    restore(swapped)
    assert not any(isinstance(m, RowScaledInt8Linear) for m in model.modules())
    assert all("feed_forward_chunk" not in layer.__dict__ for layer in model.encoder.layer)
    with torch.inference_mode():
        torch.testing.assert_close(model(input_ids=ids).last_hidden_state, before, rtol=0, atol=0)


def test_auto_picks_int8_on_a_cpu_without_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setattr(models_module, "cpu_has_native_bf16", lambda: False)
    assert select_precision("auto", cpu) == "int8" and select_precision("fp32", cpu) == "fp32"
    monkeypatch.setattr(models_module, "cpu_has_native_bf16", lambda: True)
    assert select_precision("auto", cpu) == "bf16"
    with pytest.raises(EmbedderInputError, match="CPU only"):
        select_precision("int8", torch.device("cuda"))


def test_the_bf16_check_can_be_told_another_cpus_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setenv("PRISMA_CPU_NATIVE_BF16", "0")
    assert not models_module.cpu_has_native_bf16() and select_precision("auto", cpu) == "int8"
    monkeypatch.setenv("PRISMA_CPU_NATIVE_BF16", "1")
    assert models_module.cpu_has_native_bf16() and select_precision("auto", cpu) == "bf16"


def test_auto_keeps_int8_only_for_a_model_that_stays_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models_module, "cpu_has_native_bf16", lambda: False)
    cache = ModelCache(device="cpu", precision="auto", default_model=MACHINERY_ENCODER, int8_engine="torch")
    lm = cache.get(None)  # MiniLM's int8 clauses fall to cosine 0.989 at the 5th percentile: it stays fp32
    assert lm.precision == "fp32" and not any(isinstance(m, RowScaledInt8Linear) for m in lm.model.modules())
    assert cache.get(None, precision="int8").precision == "int8"  # asked for by name: int8 all the same
    assert quantize_if_close(lm.model, lm.tokenizer, min_cosine=0.98)
    assert any(isinstance(m, RowScaledInt8Linear) for m in lm.model.modules())


def test_auto_keeps_minilm_int8_on_ctranslate2(monkeypatch: pytest.MonkeyPatch) -> None:
    """CTranslate2's int8 keeps MiniLM's short clauses at cosine 0.994 (5th percentile), where torch's fell
    to 0.987: 'auto' keeps it int8 on that engine."""
    monkeypatch.setattr(models_module, "cpu_has_native_bf16", lambda: False)
    lm = ModelCache(device="cpu", precision="auto", default_model=MACHINERY_ENCODER, threads=1).get(None)
    assert (lm.precision, lm.engine) == ("int8", "ctranslate2")


def test_a_run_records_its_precision(store: ArtifactStore, snapshot, settings: EmbedderSettings,
                                     models: ModelCache) -> None:
    spec = EmbeddingRunSpec(max_length=18, shard_size=4, batch_tokens=120, precision="int8")
    payload = EmbedJobPayload(run_id=5, snapshot_uri=snapshot(TEXTS).uri, artifact_prefix="embedding-runs/5",
                              spec=spec)
    result = run_embedding(payload, store, settings=settings, models=models)
    assert result.precision == "int8" and result.engine == "ctranslate2"  # MiniLM is BERT: CTranslate2 takes it
    manifest = json.loads(store.read_bytes("embedding-runs/5/spec.json"))
    assert manifest["precision"] == "int8" and manifest["int8_engine"] == "ctranslate2"
    fp32 = payload.model_copy(update={"spec": spec.model_copy(update={"precision": "fp32"})})
    with pytest.raises(RunSpecMismatchError):  # shards of another precision are not resumed
        run_embedding(fp32, store, settings=settings, models=models)
    service = EmbedJobPayload(run_id=6, snapshot_uri=payload.snapshot_uri, artifact_prefix="embedding-runs/6",
                              spec=spec.model_copy(update={"precision": None}))
    assert run_embedding(service, store, settings=settings, models=models).precision == "fp32"  # the service's
