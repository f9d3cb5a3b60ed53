"""POST /passages requests that arrive while the model is busy run in one batch, and each caller gets bit for bit
the vectors its texts get alone; a batch one request of which fails is computed again request by request."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from contracts.embed import EmbeddingRunSpec, PassageRequest
from contracts.packed import PackedArray
from services.embedder import passages
from services.embedder.batching import Batcher
from services.embedder.config import EmbedderSettings
from services.embedder.models import ModelCache
from tests.conftest import MACHINERY_ENCODER

NOTES = [["Bronchiolite confermata, RSV positivo. Non febbre."],
         ["Sospetta polmonite: da rivalutare.", "Tosse secca da tre giorni; sibili espiratori diffusi."],
         ["Otite media acuta destra, in terapia con amoxicillina."]]


def arrays(response) -> list[np.ndarray]:  # noqa: ANN001
    seg = response.segments
    return [PackedArray.model_validate(response.documents.model_dump()).array()] + [
        PackedArray.model_validate(getattr(seg, k).model_dump()).array() for k in ("doc", "start", "end", "vectors")]


@pytest.fixture(scope="module")
def models() -> ModelCache:
    return ModelCache(device="cpu", precision="fp32", default_model=MACHINERY_ENCODER, threads=1)


def test_requests_waiting_together_share_one_pass_and_get_their_own_vectors(models: ModelCache) -> None:
    settings = EmbedderSettings(threads=1, default_model=MACHINERY_ENCODER)
    spec = EmbeddingRunSpec(model=MACHINERY_ENCODER, segments=True)
    alone = [arrays(passages.embed_passages(models, PassageRequest(texts=t, spec=spec), settings)) for t in NOTES]
    lm = models.get(spec.model, max_length=spec.max_length, prompt_name=spec.prompt_name, precision=spec.precision)
    key = (id(lm.lock), spec.model_dump_json(), True)
    got: dict[int, list[np.ndarray]] = {}
    before = passages._batcher.batches

    def call(i: int) -> None:
        got[i] = arrays(passages.embed_passages(models, PassageRequest(texts=NOTES[i], spec=spec), settings))

    with lm.lock:  # the model busy: the three requests wait for it together
        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(NOTES))]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while passages._batcher.waiting(key) < len(NOTES) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert passages._batcher.waiting(key) == len(NOTES)
    for t in threads:
        t.join(60)
    assert passages._batcher.batches - before == 1, "one pass for the three"
    for i, want in enumerate(alone):
        assert len(got[i][0]) == len(NOTES[i]) and got[i][1].max() == len(NOTES[i]) - 1  # its own texts, counted from 0
        for a, b in zip(got[i], want):
            np.testing.assert_array_equal(a, b)


def test_a_failing_batch_is_retried_request_by_request() -> None:
    batcher: Batcher[list[str]] = Batcher(max_texts=10)
    lock, results, errors = threading.Lock(), {}, {}

    def compute(texts: list[str]) -> list[str]:
        if "bad" in texts and len(texts) > 1:
            raise ValueError("a batch holding a bad text")
        if texts == ["bad"]:
            raise ValueError("bad alone")
        return [t.upper() for t in texts]

    def call(name: str, texts: list[str]) -> None:
        try:
            results[name] = batcher.run(lock, "k", texts, compute, lambda out, sizes: [
                out[sum(sizes[:i]):sum(sizes[:i + 1])] for i in range(len(sizes))])
        except ValueError as exc:
            errors[name] = str(exc)

    with lock:
        threads = [threading.Thread(target=call, args=a) for a in (("a", ["x", "y"]), ("b", ["bad"]), ("c", ["z"]))]
        for t in threads:
            t.start()
        while batcher.waiting("k") < 3:
            time.sleep(0.01)
    for t in threads:
        t.join(10)
    assert results == {"a": ["X", "Y"], "c": ["Z"]} and errors == {"b": "bad alone"}
