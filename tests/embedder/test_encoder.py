"""The batched encoder against a naive reference: one forward pass per chunk, one document at a time."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from services.embedder.encoder import embed_texts, tokenize_texts
from services.embedder.models import LoadedModel
from tests.conftest import MACHINERY_ENCODER

WORDS = ["the", "child", "had", "a", "fever", "and", "cough", "so", "she", "was", "seen", "in", "our", "clinic", "today", "by", "two", "nurses"]


def text_of_tokens(lm: LoadedModel, n: int, seed: int = 0) -> str:
    """A text that tokenizes to exactly n tokens (these words are one token each)."""
    text = " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n))
    assert len(lm.tokenizer(text, add_special_tokens=False)["input_ids"]) == n
    return text


def naive_embedding(lm: LoadedModel, text: str, pooling: str, normalize: bool) -> torch.Tensor:
    """float32 [d]: chunk-and-average the slow, obvious way."""
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    n, w = len(ids), lm.window
    k = max(1, math.ceil(n / w))
    chunk_vectors = []
    for j in range(k):
        piece = ids[(j * n) // k : ((j + 1) * n) // k]
        full = list(lm.prefix_ids) + piece + list(lm.suffix_ids)
        assert len(full) <= lm.max_length
        with torch.inference_mode():
            hidden = lm.model(input_ids=torch.tensor([full])).last_hidden_state[0]  # [L, d]
        if pooling == "cls":
            chunk_vectors.append(hidden[0])
        elif pooling == "mean_content" and piece:
            chunk_vectors.append(hidden[len(lm.prefix_ids) : len(lm.prefix_ids) + len(piece)].mean(0))
        else:
            chunk_vectors.append(hidden.mean(0))
        if lm.st is not None and lm.st.normalize:  # the model's Normalize module, per chunk
            chunk_vectors[-1] = torch.nn.functional.normalize(chunk_vectors[-1], dim=0)
    vector = torch.stack(chunk_vectors).mean(0)
    return torch.nn.functional.normalize(vector, dim=0) if normalize else vector


@pytest.fixture(scope="module")
def small(lm: LoadedModel) -> LoadedModel:
    """L_max = 18, so W_eff = 16: chunking shows on short texts."""
    return lm.with_max_length(18)


@pytest.mark.parametrize("pooling", ["mean", "mean_content", "cls"])
def test_batched_matches_naive_reference(small: LoadedModel, pooling: str) -> None:
    w = small.window
    sizes = [1, w - 1, w, w + 1, 2 * w + 1, 5 * w + 3, 3]  # shorter, equal, one over, many times
    texts = [text_of_tokens(small, n, seed=i) for i, n in enumerate(sizes)] + [""]
    raw = embed_texts(small, texts, pooling=pooling, normalize=False, batch_tokens=90)
    unit = embed_texts(small, texts, pooling=pooling, normalize=True, batch_tokens=90)
    expected = torch.stack([naive_embedding(small, t, pooling, normalize=False) for t in texts])
    torch.testing.assert_close(torch.from_numpy(raw.vectors), expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(
        torch.from_numpy(unit.vectors), torch.nn.functional.normalize(expected, dim=1), rtol=1e-4, atol=1e-5
    )
    assert raw.n_chunks.tolist() == [1, 1, 1, 2, 3, 6, 1, 1]
    assert raw.n_tokens.tolist() == [n + 2 * k for n, k in zip(sizes + [0], raw.n_chunks.tolist())]


def test_long_document_every_token_in_exactly_one_chunk(small: LoadedModel) -> None:
    text = text_of_tokens(small, 16 * 9 + 5)
    other = text_of_tokens(small, 20, seed=3)
    out = embed_texts(small, [other, text, other])
    tokens = tokenize_texts(small, [text]).ids
    mine = out.chunks.doc == 1
    covered = np.zeros(len(tokens), dtype=np.int64)
    for s, e in zip(out.chunks.token_start[mine], out.chunks.token_end[mine]):
        covered[s:e] += 1
    assert (covered == 1).all()
    assert mine.sum() == math.ceil(len(tokens) / small.window)
    # character spans cover the text's words in order, for highlighting
    spans = [text[s:e] for s, e in zip(out.chunks.char_start[mine], out.chunks.char_end[mine])]
    assert " ".join(spans) == text


def test_results_independent_of_batching(small: LoadedModel) -> None:
    texts = [text_of_tokens(small, n, seed=n) for n in (5, 40, 17, 3, 90)]
    a = embed_texts(small, texts, batch_tokens=18).vectors
    b = embed_texts(small, texts, batch_tokens=4096).vectors
    c = embed_texts(small, texts[::-1], batch_tokens=4096).vectors[::-1]
    torch.testing.assert_close(torch.from_numpy(a), torch.from_numpy(b), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(np.ascontiguousarray(c)), torch.from_numpy(b), rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_short_document_matches_sentence_transformers(lm: LoadedModel) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(lm.path, device="cpu")
    texts = ["Bronchiolitis confirmed in a 3-month-old infant.", "hello world",
             "Suspected pneumonia; chest X-ray ordered, oxygen saturation 91% on room air."]
    ours = embed_texts(lm, texts).vectors
    theirs = st.encode(texts, convert_to_numpy=True)
    cosine = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosine.min() >= 0.9999, cosine


@pytest.fixture(scope="module")
def bf16(lm: LoadedModel) -> LoadedModel:
    """The machinery tests' model in bf16, the precision 'auto' picks on CPUs with native bf16."""
    from services.embedder.models import load_model

    return load_model(lm.name, device=torch.device("cpu"), dtype=torch.bfloat16, default_model=MACHINERY_ENCODER)


ALONE_AND_BATCHED = """
import os, sys
import numpy as np, torch
from services.embedder.encoder import embed_texts  # services/__init__.py sets MKL_CBWR first
from services.embedder.models import load_model
from tests.embedder.test_encoder import text_of_tokens
torch.set_num_threads(1)
lm = load_model(sys.argv[1], device=torch.device("cpu"), dtype=torch.float32)
target = text_of_tokens(lm, 37, seed=1)
others = [text_of_tokens(lm, n, seed=n) for n in (3, 38, 45, 60, 120, 250, 300)]
alone = embed_texts(lm, [target]).vectors[0]
print(sum(not np.array_equal(embed_texts(lm, [*others, target, *others[::-1]], batch_tokens=b).vectors[len(others)],
                             alone) for b in (64, 512, 8192)), os.environ.get("MKL_CBWR"))
"""


def test_bit_for_bit_holds_where_mkl_runs_avx2() -> None:
    """On AVX2 MKL blocks a product by its shape: without strict reproducibility (services/__init__.py) a text
    alone and the same text in a batch differed by 1e-7 in fp32, one thread. Run here as an AVX2-only CPU runs
    it (MKL and torch's kernels capped), in a fresh process: MKL reads its settings at its first product."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    env |= {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", ALONE_AND_BATCHED, MACHINERY_ENCODER], env=env, capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "AUTO,STRICT"], done.stdout


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_text_alone_gets_bit_for_bit_its_vector_in_any_batch(lm: LoadedModel, bf16: LoadedModel,
                                                            precision: str) -> None:
    """A search query is embedded alone; the document it should find was embedded among others.
    Under bf16 the attention result for a text's tokens depends on how far it is padded (by about
    1e-3 on the unit vector, enough to reorder an SAE's near-tied features), so a text's padding
    must depend on its own length only: then its vector is the same alone and in any batch."""
    model = lm if precision == "fp32" else bf16
    target = text_of_tokens(model, 37, seed=1)
    others = [text_of_tokens(model, n, seed=n) for n in (3, 38, 45, 60, 120, 250, 300)]  # 300: two chunks
    alone = embed_texts(model, [target]).vectors[0]
    for batch_tokens in (64, 512, 8192):
        together = embed_texts(model, [*others, target, *others[::-1]], batch_tokens=batch_tokens)
        np.testing.assert_array_equal(together.vectors[len(others)], alone)
    two_chunks = embed_texts(model, [others[-1]]).vectors[0]
    np.testing.assert_array_equal(embed_texts(model, [target, *others]).vectors[-1], two_chunks)


def test_in_order_keeps_the_order_starts_a_bounded_few_ahead_and_stops_at_an_error() -> None:
    import random
    import time

    from services.embedder.encoder import in_order

    started: list[int] = []

    def run(i: int) -> int:
        started.append(i)
        time.sleep(random.Random(i).random() / 200)  # finishing out of order
        if i == 7:
            raise ValueError(i)
        return i * i

    results = in_order(run, range(100), workers=3)
    assert [next(results) for _ in range(7)] == [i * i for i in range(7)]
    with pytest.raises(ValueError):
        next(results)
    assert max(started) < 7 + 2 * 3  # the other batches were never started
    assert list(in_order(lambda i: -i, range(5), workers=1)) == [0, -1, -2, -3, -4]
