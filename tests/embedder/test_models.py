"""Model resolution and L_max: the model's own configuration, overridable, unknown names refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from services.embedder.errors import EmbedderInputError, UnknownModelError
from services.embedder.models import LoadedModel, load_model, resolve_model_path, select_dtype


def test_default_model_reads_sentence_bert_config(lm: LoadedModel) -> None:
    assert (lm.max_length, lm.n_special, lm.window, lm.dim) == (256, 2, 254, 384)
    assert (lm.prefix_ids, lm.suffix_ids) == ((101,), (102,))  # [CLS], [SEP]
    assert lm.capacity == 512


def test_without_sentence_bert_config_the_tokenizer_limit_capped_by_positions(lm: LoadedModel, tmp_path) -> None:
    copy = tmp_path / "minilm-plain"
    copy.mkdir()
    for item in Path(lm.path).iterdir():
        if item.name != "sentence_bert_config.json":
            os.symlink(item, copy / item.name)
    plain = load_model(str(copy), device=torch.device("cpu"))
    assert plain.max_length == 512  # tokenizer 512, max_position_embeddings 512
    assert plain.path == str(copy.resolve())


def test_max_length_override(lm: LoadedModel) -> None:
    assert lm.with_max_length(18).window == 16
    assert lm.with_max_length(None) is lm
    with pytest.raises(EmbedderInputError, match="max_length 513"):
        lm.with_max_length(513)
    with pytest.raises(EmbedderInputError, match="max_length 2"):
        lm.with_max_length(2)


@pytest.mark.parametrize("name", ["/no/such/dir", "./relative/missing", "org/not-cached-model", "bad name!"])
def test_unknown_model_names_it(name: str, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UnknownModelError, match=repr(name)[1:-1]):
        resolve_model_path(name)


def test_directory_without_config_is_refused(tmp_path) -> None:
    with pytest.raises(UnknownModelError, match="no config.json"):
        resolve_model_path(str(tmp_path))


def test_auto_precision() -> None:
    assert select_dtype("fp32", torch.device("cpu")) == torch.float32
    assert select_dtype("auto", torch.device("cpu")) in (torch.float32, torch.bfloat16)
