"""Sentence-transformers directories (Pooling, Dense, Normalize, max_seq_length, do_lower_case)
embedded as sentence-transformers would. Every directory is built here from the packaged MiniLM
(nothing is downloaded): two saved by sentence-transformers itself (its 6.x format), the others
written by hand in the older format most published models still have (pooling booleans,
`max_seq_length` and `do_lower_case` in sentence_bert_config.json), with the model's files
linked. sentence-transformers loads each one as the reference."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from services.embedder.encoder import embed_texts
from services.embedder.errors import EmbedderInputError
from services.embedder.models import default_model_path, load_model

# Imported by the tests that use it, not here: every pytest-xdist worker collects every module, and importing
# sentence-transformers costs each of them about 3 s of CPU.
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                                 reason="needs sentence-transformers, the reference")]

TEXTS = ["The child had a fever.", "Two nurses saw her in the clinic today.", "Cough and cold."]
CPU = torch.device("cpu")
MODE_KEYS = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens", "mean": "pooling_mode_mean_tokens",
             "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens", "weightedmean": "pooling_mode_weightedmean_tokens",
             "lasttoken": "pooling_mode_lasttoken"}


def _build(tmp_path, name: str, pooling: str, dense: bool):
    """A directory saved by sentence-transformers itself."""
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


def hand_built(root: Path, modes: tuple[str, ...], *, dense_in: int | None = None, normalize: bool = False,
               st_config: dict | None = None, cased_tokenizer: bool = False) -> Path:
    """The older on-disk format: MiniLM's files linked, modules.json, 1_Pooling with booleans, an
    optional Dense (in -> 32, Tanh, seeded weights in model.safetensors) and Normalize."""
    from safetensors.torch import save_file

    minilm = default_model_path()
    root.mkdir()
    own = {"modules.json", "sentence_bert_config.json", "1_Pooling"}
    if cased_tokenizer:
        own |= {"tokenizer.json", "tokenizer_config.json"}
    for item in minilm.iterdir():
        if item.name not in own:
            os.symlink(item, root / item.name)
    if cased_tokenizer:  # MiniLM's tokenizer lower-cases by itself: undo that, so do_lower_case shows
        tok = json.loads((minilm / "tokenizer.json").read_text())
        tok["normalizer"]["lowercase"] = False
        (root / "tokenizer.json").write_text(json.dumps(tok))
        cfg = json.loads((minilm / "tokenizer_config.json").read_text())
        cfg["do_lower_case"] = False
        (root / "tokenizer_config.json").write_text(json.dumps(cfg))
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 384, **{key: mode in modes for mode, key in MODE_KEYS.items()}}))
    if dense_in is not None:
        modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
        (root / "2_Dense").mkdir()
        (root / "2_Dense" / "config.json").write_text(json.dumps(
            {"in_features": dense_in, "out_features": 32, "bias": True,
             "activation_function": "torch.nn.modules.activation.Tanh"}))
        gen = torch.Generator().manual_seed(0)
        save_file({"linear.weight": torch.randn(32, dense_in, generator=gen) * 0.05,
                   "linear.bias": torch.randn(32, generator=gen) * 0.05}, str(root / "2_Dense" / "model.safetensors"))
    if normalize:
        modules.append({"idx": len(modules), "name": str(len(modules)), "path": f"{len(modules)}_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "sentence_bert_config.json").write_text(json.dumps(st_config or {"max_seq_length": 256,
                                                                             "do_lower_case": False}))
    return root


def load_dir(path: Path, **kw):
    """Prisma's load of `path`, named in the administrator's list (requests never give paths)."""
    with mock.patch.dict(os.environ, {"PRISMA_MODELS": json.dumps({path.name: str(path)})}):
        return load_model(path.name, device=CPU, **kw)


def reference(path: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device="cpu")


@pytest.fixture(scope="module")
def st_dirs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("st")
    return {"cls_dense": _build(tmp, "cls_dense", "cls", True), "mean": _build(tmp, "mean", "mean", False)}


@pytest.mark.parametrize("kind,dim", [("cls_dense", 64), ("mean", 384)])
def test_short_texts_match_sentence_transformers(st_dirs, kind: str, dim: int) -> None:
    model, path = st_dirs[kind]
    lm = load_dir(path)
    assert lm.dim == dim and lm.max_length == model.max_seq_length
    ours = embed_texts(lm, TEXTS).vectors
    theirs = model.encode(TEXTS, convert_to_numpy=True)
    assert ours.shape == theirs.shape == (3, dim)
    cos = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert (cos >= 0.9999).all(), cos


@pytest.mark.parametrize("modes", [("cls",), ("max",), ("mean",), ("mean_sqrt_len",), ("weightedmean",),
                                   ("lasttoken",), ("cls", "max", "mean")], ids="+".join)
def test_each_pooling_mode_gives_sentence_transformers_vectors(tmp_path, modes: tuple[str, ...]) -> None:
    """No Normalize module: with the run's final normalisation off, a one-chunk text's vector is
    the Pooling output itself, magnitude included (several modes: concatenated in ST's order)."""
    path = hand_built(tmp_path / "m", modes)
    lm = load_dir(path)
    assert lm.dim == 384 * len(modes)
    ours = embed_texts(lm, TEXTS, normalize=False).vectors
    theirs = reference(path).encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert not np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-3)  # no Normalize, none added


def test_dense_on_concatenated_modes_and_normalize_per_chunk(tmp_path) -> None:
    """Pooling (cls + max) -> Dense 768 -> 32 (Tanh) -> Normalize: the dimension is the Dense's,
    each chunk vector is unit length (Normalize runs per chunk), the several-chunk document's
    unnormalised average is not."""
    path = hand_built(tmp_path / "d", ("cls", "max"), dense_in=768, normalize=True)
    lm = load_dir(path)
    assert lm.dim == 32
    theirs = reference(path).encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(embed_texts(lm, TEXTS, normalize=False).vectors, theirs, rtol=1e-4, atol=1e-5)
    long = " ".join(["the child had a fever and cough so she was seen in our clinic today"] * 30)
    out = embed_texts(lm.with_max_length(40), [long], normalize=False)
    assert out.n_chunks[0] > 3
    np.testing.assert_allclose(np.linalg.norm(out.chunks.vectors, axis=1), 1.0, atol=1e-5)
    assert np.linalg.norm(out.vectors[0]) < 0.999


def test_pooling_that_does_not_fit_the_dense_is_refused_naming_it(tmp_path) -> None:
    lm = load_dir(hand_built(tmp_path / "d", ("cls", "max"), dense_in=768))
    with pytest.raises(EmbedderInputError, match="pooling 'cls' gives 384 dimensions but the model's Dense takes 768"):
        embed_texts(lm, TEXTS, pooling="cls")


def test_unsupported_module_is_refused_naming_it(tmp_path) -> None:
    path = hand_built(tmp_path / "u", ("mean",))
    modules = json.loads((path / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_LayerNorm", "type": "sentence_transformers.models.LayerNorm"})
    (path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(EmbedderInputError, match="sentence_transformers.models.LayerNorm"):
        load_dir(path)


def test_max_seq_length_and_do_lower_case(tmp_path) -> None:
    """sentence_bert_config.json's max_seq_length is the window (a longer text is chunked where
    sentence-transformers would truncate); do_lower_case lower-cases before a tokenizer that does
    not, as sentence-transformers does, and the chunk's character span is on the original text."""
    cased = load_dir(hand_built(tmp_path / "c", ("mean",), cased_tokenizer=True))
    path = hand_built(tmp_path / "l", ("mean",), cased_tokenizer=True,
                      st_config={"max_seq_length": 20, "do_lower_case": True})
    lowered = load_dir(path)
    model = reference(path)
    assert lowered.max_length == model.max_seq_length == 20
    shout = "FEVER AND COUGH IN A CHILD"
    a, b = embed_texts(cased, [shout, shout.lower()]).vectors
    assert float(a @ b) < 0.99  # without do_lower_case the capitals are other tokens
    out = embed_texts(lowered, [shout, shout.lower()], normalize=False)
    np.testing.assert_allclose(out.vectors[0], out.vectors[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.vectors[0], model.encode([shout], convert_to_numpy=True)[0], rtol=1e-4, atol=1e-5)
    assert (out.chunks.char_start[0], out.chunks.char_end[0]) == (0, len(shout))
    long = " ".join(["Fever and cough in a child seen today"] * 4)  # 32 tokens: two chunks of 16
    chunked = embed_texts(lowered, [long])
    assert chunked.n_chunks[0] == 2
    assert long[chunked.chunks.char_start[1]:chunked.chunks.char_end[1]].startswith("Fever")


def test_long_text_is_average_of_st_chunk_vectors(st_dirs) -> None:
    model, path = st_dirs["cls_dense"]
    lm = load_dir(path, max_length=18)  # 16 content tokens a chunk
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
    lm = load_dir(path)
    own = embed_texts(lm, TEXTS[:1]).vectors
    cls = embed_texts(lm, TEXTS[:1], pooling="cls").vectors  # the model's own mode is cls: same
    mean_content = embed_texts(lm, TEXTS[:1], pooling="mean_content").vectors
    np.testing.assert_allclose(own, cls, rtol=1e-5, atol=1e-6)
    assert mean_content.shape == own.shape and not np.allclose(mean_content, own)
