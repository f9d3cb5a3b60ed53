"""Sentence-transformers directories (Pooling, Dense, Normalize) embedded as sentence-transformers would."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from services.embedder.encoder import embed_texts
from services.embedder.models import default_model_path, load_model

st = pytest.importorskip("sentence_transformers")

TEXTS = ["The child had a fever.", "Two nurses saw her in the clinic today.", "Cough and cold."]


def _build(tmp_path, name: str, pooling: str, dense: bool):
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers import models

    torch.manual_seed(0)
    modules = [models.Transformer(str(default_model_path())), models.Pooling(384, pooling_mode=pooling)]
    if dense:
        modules.append(models.Dense(384, 64, activation_function=torch.nn.Tanh()))
    modules.append(models.Normalize())
    model = SentenceTransformer(modules=modules, device="cpu")
    out = tmp_path / name
    model.save(str(out))
    return SentenceTransformer(str(out), device="cpu"), out


@pytest.fixture(scope="module")
def st_dirs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("st")
    return {"cls_dense": _build(tmp, "cls_dense", "cls", True), "mean": _build(tmp, "mean", "mean", False)}


@pytest.mark.parametrize("kind,dim", [("cls_dense", 64), ("mean", 384)])
def test_short_texts_match_sentence_transformers(st_dirs, kind: str, dim: int) -> None:
    model, path = st_dirs[kind]
    lm = load_model(str(path), device=torch.device("cpu"))
    assert lm.dim == dim and lm.max_length == model.max_seq_length
    ours = embed_texts(lm, TEXTS).vectors
    theirs = model.encode(TEXTS, convert_to_numpy=True)
    assert ours.shape == theirs.shape == (3, dim)
    cos = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert (cos >= 0.9999).all(), cos


def test_long_text_is_average_of_st_chunk_vectors(st_dirs) -> None:
    model, path = st_dirs["cls_dense"]
    lm = load_model(str(path), device=torch.device("cpu"), max_length=18)  # 16 content tokens a chunk
    text = " ".join(["the child had a fever and cough so she was seen in our clinic today"] * 3)
    out = embed_texts(lm, [text])
    assert out.n_chunks[0] >= 3
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    chunk_vecs = []
    with torch.inference_mode():
        for s, e in zip(out.chunks.token_start, out.chunks.token_end):
            full = torch.tensor([list(lm.prefix_ids) + ids[s:e] + list(lm.suffix_ids)])
            feats = {"input_ids": full, "attention_mask": torch.ones_like(full),
                     "token_type_ids": torch.zeros_like(full)}
            chunk_vecs.append(model(feats)["sentence_embedding"][0])  # st's own modules, in order
    expected = torch.nn.functional.normalize(torch.stack(chunk_vecs).mean(0), dim=0).numpy()
    np.testing.assert_allclose(out.vectors[0], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.chunks.vectors, torch.stack(chunk_vecs).numpy(), rtol=1e-4, atol=1e-5)


def test_explicit_pooling_overrides_model_pooling(st_dirs) -> None:
    _, path = st_dirs["cls_dense"]
    lm = load_model(str(path), device=torch.device("cpu"))
    own = embed_texts(lm, TEXTS[:1]).vectors
    cls = embed_texts(lm, TEXTS[:1], pooling="cls").vectors  # the model's own mode is cls: same
    mean_content = embed_texts(lm, TEXTS[:1], pooling="mean_content").vectors
    np.testing.assert_allclose(own, cls, rtol=1e-5, atol=1e-6)
    assert mean_content.shape == own.shape and not np.allclose(mean_content, own)
