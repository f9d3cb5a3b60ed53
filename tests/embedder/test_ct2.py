"""The CTranslate2 int8 engine: e5-small converted once into the model cache, its vectors close to fp32's
and independent of the batch, the conversion reused, and a model it cannot take run by torch's int8."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from services.embedder import ct2
from services.embedder.encoder import embed_texts
from services.embedder.int8 import RowScaledInt8Linear
from services.embedder.models import LoadedModel, ModelCache, int8_encoder

TEXTS = ["Sospetta bronchiolite, esclusa polmonite.", "Bronchiolite confermata.", "No EDEMA.",
         "Torace: MV fisiologico.", "Extremities reveal no peripheral cyanosis or edema.",
         "Bambino di 3 anni con febbre da due giorni, tosse secca e rinorrea; obiettività toracica nella norma. " * 3]


@pytest.fixture(scope="module")
def e5_fp32() -> LoadedModel:
    return ModelCache(device="cpu", precision="fp32", default_model="default").get(None)


@pytest.fixture(scope="module")
def e5_ct2() -> LoadedModel:
    return ModelCache(device="cpu", precision="int8", default_model="default", threads=1).get(None)


def test_e5_int8_runs_on_ctranslate2_close_to_fp32(e5_fp32: LoadedModel, e5_ct2: LoadedModel) -> None:
    assert e5_ct2.precision == "int8" and e5_ct2.engine == "ctranslate2" and isinstance(e5_ct2.model, ct2.Ct2Encoder)
    assert e5_fp32.engine == "torch" and e5_ct2.dim == e5_fp32.dim == 384
    fp32, int8 = embed_texts(e5_fp32, TEXTS).vectors, embed_texts(e5_ct2, TEXTS).vectors
    cosine = (fp32 * int8).sum(1)  # unit vectors
    assert cosine.min() >= 0.99, cosine  # the quality bar of #29 (bench/results/embed.json: 0.998 at the 5th percentile)
    assert not np.allclose(fp32, int8, atol=1e-6)  # it is another engine, not fp32 again


def test_a_text_gets_the_same_vector_alone_or_in_any_batch(e5_ct2: LoadedModel) -> None:
    """What embedding each distinct segment once, and a query meeting its stored document, rely on."""
    together = embed_texts(e5_ct2, TEXTS)
    alone = np.stack([embed_texts(e5_ct2, [t]).vectors[0] for t in TEXTS])
    reversed_ = embed_texts(e5_ct2, TEXTS[::-1]).vectors[::-1]
    np.testing.assert_array_equal(alone, together.vectors)
    np.testing.assert_array_equal(reversed_, together.vectors)
    small_batches = embed_texts(e5_ct2, TEXTS, batch_tokens=64)  # other batch shapes, other padding
    np.testing.assert_array_equal(small_batches.chunks.vectors, together.chunks.vectors)


def test_padding_positions_come_back_zero(e5_ct2: LoadedModel) -> None:
    batch = e5_ct2.tokenizer(TEXTS[:3], padding=True, return_tensors="pt", return_token_type_ids=False)
    hidden = e5_ct2.model(**batch).last_hidden_state  # [3, L, 384]
    pad = batch["attention_mask"] == 0
    assert pad.any() and (hidden[pad] == 0).all() and (hidden[~pad].abs().sum(-1) > 0).all()


def test_the_conversion_is_made_once_and_redone_when_the_model_changes(
        tmp_path: Path, e5_ct2: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    source = Path(e5_ct2.path)
    cache = Path(e5_ct2.model.directory).parents[1]  # <model cache>/ctranslate2/<dir>
    assert ct2.converted_dir(source, cache) == e5_ct2.model.directory
    monkeypatch.setattr(ct2, "convert", lambda *a: pytest.fail("converted again"))
    assert ct2.converted_dir(source, cache) == e5_ct2.model.directory  # found, not converted again
    copy = tmp_path / "model"
    copy.mkdir()
    for f in ("config.json", "tokenizer.json"):
        (copy / f).write_bytes((source / f).read_bytes())
    key = ct2.cache_key(copy)
    os.utime(copy / "config.json", ns=(1, 1))
    assert ct2.cache_key(copy) != key  # a changed file: another directory


def tiny_roberta(path: Path) -> transformers.RobertaModel:
    torch.manual_seed(0)
    config = transformers.RobertaConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=32, vocab_size=40, max_position_embeddings=20)
    model = transformers.RobertaModel(config).eval()
    model.save_pretrained(path)
    return model


def test_a_model_ctranslate2_does_not_take_runs_on_torchs_int8(tmp_path: Path) -> None:
    model = tiny_roberta(tmp_path / "roberta")
    with pytest.raises(ct2.Unconvertible, match="roberta"):
        ct2.load_ct2(tmp_path / "roberta", model.config, tmp_path / "cache", threads=1)
    out, engine = int8_encoder(model, tmp_path / "roberta", None, engine="ctranslate2", only_if_close=False,
                               threads=1)
    assert engine == "torch" and out is model and any(isinstance(m, RowScaledInt8Linear) for m in model.modules())
    assert not (tmp_path / "cache").exists()  # nothing half-converted left behind


def test_an_unknown_engine_is_refused_by_name(tmp_path: Path) -> None:
    from services.embedder.errors import EmbedderInputError

    with pytest.raises(EmbedderInputError, match="int8 engine 'onnx'"):
        int8_encoder(tiny_roberta(tmp_path / "r"), tmp_path / "r", None, engine="onnx", only_if_close=False, threads=1)


def test_batches_run_side_by_side_and_a_vector_does_not_depend_on_the_threads(e5_ct2: LoadedModel) -> None:
    two = ModelCache(device="cpu", precision="int8", default_model="default", threads=2).get(None)
    assert two.model.parallel_batches == 2 and e5_ct2.model.parallel_batches == 1
    texts = TEXTS * 4  # with 64 tokens a batch: a dozen batches, two at a time on `two`
    seen: list[int] = []
    side_by_side = embed_texts(two, texts, batch_tokens=64, on_tokens=lambda done, total: seen.append(done))
    one_by_one = embed_texts(e5_ct2, texts, batch_tokens=64)
    np.testing.assert_array_equal(side_by_side.chunks.vectors, one_by_one.chunks.vectors)
    np.testing.assert_array_equal(side_by_side.vectors, one_by_one.vectors)
    assert len(seen) > 4 and seen == sorted(seen) and seen[-1] == int(side_by_side.n_tokens.sum())


def test_loading_the_engine_leaves_torch_its_threads() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        ModelCache(device="cpu", precision="int8", default_model="default", threads=2).get(None)
        assert torch.get_num_threads() == 2  # CTranslate2's one thread per batch is its own, not torch's
    finally:
        torch.set_num_threads(before)


def test_a_later_load_on_this_cpu_needs_no_transformers_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """'auto' checks int8 against fp32 on the probe clauses once per conversion and CPU, and records it; later
    loads read the converted encoder alone, with the same vectors. A verdict under the bar, or another CPU's,
    is not trusted: the model is loaded and the probe run again."""
    from services.embedder import models

    monkeypatch.setenv("PRISMA_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PRISMA_CPU_NATIVE_BF16", "0")  # 'auto' as a CPU without bf16 runs it (int8)
    loads: list[str] = []
    real = models.AutoModel.from_pretrained
    monkeypatch.setattr(models.AutoModel, "from_pretrained",
                        lambda path, **kw: (loads.append(str(path)), real(path, **kw))[1])

    def load(precision: str = "auto") -> LoadedModel:
        return ModelCache(device="cpu", precision=precision, threads=1).get("all-MiniLM-L6-v2")

    first = load()
    assert (first.engine, first.int8, len(loads)) == ("ctranslate2", True, 1)
    recorded = ct2.recorded_closeness(first.model.directory, models.probe_key(models.cpu_signature()))
    assert recorded is not None and 0.99 <= recorded <= 1.0
    later = load()
    assert (later.engine, later.int8, len(loads)) == ("ctranslate2", True, 1)  # no model loaded this time
    np.testing.assert_array_equal(embed_texts(later, TEXTS).vectors, embed_texts(first, TEXTS).vectors)
    assert load("int8").engine == "ctranslate2" and len(loads) == 1  # int8 asked for: no probe to run

    ct2.record_closeness(first.model.directory, models.probe_key(models.cpu_signature()), 0.5)
    assert load().int8 and len(loads) == 2  # under the bar: checked again, and found close
    assert ct2.recorded_closeness(first.model.directory, models.probe_key(models.cpu_signature())) == recorded
    monkeypatch.setattr(models, "cpu_signature", lambda: "another CPU")
    assert load().int8 and len(loads) == 3


def test_a_model_cache_it_cannot_write_keeps_no_verdict_and_raises_nothing(tmp_path: Path) -> None:
    """A read-only model cache (an image's): the verdict is not kept, and nothing fails."""
    directory = tmp_path / "converted"
    directory.mkdir()
    directory.chmod(0o500)
    try:
        if os.access(directory, os.W_OK):  # root writes anyway: make the target a directory instead
            directory.chmod(0o700)
            (directory / ct2.CLOSENESS_FILE).mkdir()
        ct2.record_closeness(directory, "key", 0.995)
        assert ct2.recorded_closeness(directory, "key") is None
    finally:
        directory.chmod(0o700)
