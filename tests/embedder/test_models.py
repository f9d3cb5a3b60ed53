"""Model resolution and L_max: the model's own configuration, overridable, unknown names refused."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch

from services.embedder.errors import EmbedderInputError, UnknownModelError
from services.embedder.models import LoadedModel, ModelCache, load_model, resolve_model_path, select_dtype
from tests.conftest import MACHINERY_ENCODER


def test_default_model_reads_sentence_bert_config(lm: LoadedModel) -> None:
    assert (lm.max_length, lm.n_special, lm.window, lm.dim) == (256, 2, 254, 384)
    assert (lm.prefix_ids, lm.suffix_ids) == ((101,), (102,))  # [CLS], [SEP]
    assert lm.capacity == 512


def test_without_sentence_bert_config_the_tokenizer_limit_capped_by_positions(lm: LoadedModel, tmp_path,
                                                                             monkeypatch) -> None:
    copy = tmp_path / "minilm-plain"
    copy.mkdir()
    for item in Path(lm.path).iterdir():
        if item.name != "sentence_bert_config.json":
            os.symlink(item, copy / item.name)
    monkeypatch.setenv("PRISMA_MODELS", f"minilm-plain={copy}")
    plain = load_model("minilm-plain", device=torch.device("cpu"))
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


def test_directory_without_config_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PRISMA_MODELS", json.dumps({"empty": str(tmp_path)}))
    with pytest.raises(UnknownModelError, match="no config.json"):
        resolve_model_path("empty")


def test_a_path_is_refused_like_any_unknown_name(lm: LoadedModel, tmp_path) -> None:
    """A request names a model of the allowlist; a path is refused with the same sentence whether it
    exists (the default model's own directory) or not, and the sentence lists the allowed names."""
    errors = {}
    for label, name in [("exists", lm.path), ("missing", str(tmp_path / "nothing-here"))]:
        with pytest.raises(UnknownModelError) as info:
            resolve_model_path(name)
        errors[label] = re.sub(r"'[^']*'", "NAME", str(info.value), count=1)  # the name, shortened when long
    assert errors["exists"] == errors["missing"]
    assert "not an allowed model" in errors["exists"] and "default, multilingual-e5-small, all-MiniLM-L6-v2" in errors["exists"]
    assert "smollm2" not in errors["exists"]  # a GGUF model is not an embedding model


def test_models_are_named_by_the_allowlist_and_the_cache_is_bounded(lm: LoadedModel, tmp_path, monkeypatch) -> None:
    copy = tmp_path / "minilm-copy"
    copy.mkdir()
    for item in Path(lm.path).iterdir():
        os.symlink(item, copy / item.name)
    monkeypatch.setenv("PRISMA_MODELS", json.dumps({"minilm-copy": str(copy)}))
    cache = ModelCache(device="cpu", precision="fp32", max_models=1, default_model=MACHINERY_ENCODER)
    first = cache.get("default")
    second = cache.get("minilm-copy")
    assert second.path == str(copy.resolve()) and first.path != second.path
    assert len(cache._models) == 1  # the least recently used went
    assert cache.get("minilm-copy").model is second.model  # still the loaded one


def test_auto_precision() -> None:
    assert select_dtype("fp32", torch.device("cpu")) == torch.float32
    assert select_dtype("auto", torch.device("cpu")) in (torch.float32, torch.bfloat16)
