"""The embedder's HTTP API through an in-process ASGI transport."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from pydantic import SecretStr

from services.embedder.app import create_app
from services.embedder.config import EmbedderSettings
from services.embedder.encoder import embed_texts
from services.embedder.models import LoadedModel, ModelCache

pytestmark = pytest.mark.anyio


def client(settings: EmbedderSettings, models: ModelCache) -> httpx.AsyncClient:
    app = create_app(settings, models=models)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://embedder")


async def test_embed_returns_model_vectors(settings, models, lm: LoadedModel) -> None:
    texts = ["Bronchiolitis confirmed.", "fever " * 300]  # the second is chunked (> 254 tokens)
    async with client(settings, models) as c:
        r = await c.post("/embed", json={"texts": texts})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "default" and body["dim"] == 384
    assert body["n_chunks"] == [1, 2]
    assert body["n_tokens"][1] == 300 + 2 * 2
    np.testing.assert_allclose(np.array(body["vectors"]), embed_texts(lm, texts).vectors, rtol=1e-4, atol=1e-5)
    assert np.allclose(np.linalg.norm(body["vectors"], axis=1), 1.0, atol=1e-5)


async def test_embed_options_cls_unnormalised(settings, models) -> None:
    """MiniLM's own modules.json ends in Normalize, which applies to every chunk as in
    sentence-transformers; `normalize: false` skips only the final normalisation of a document's
    chunk average, so a one-chunk text stays unit length and a several-chunk one does not."""
    long = " ".join(f"word{i}" for i in range(200))  # several chunks, each of other words
    async with client(settings, models) as c:
        r = await c.post("/embed", json={"texts": ["fever", long], "pooling": "cls", "normalize": False})
        mean = await c.post("/embed", json={"texts": ["fever"]})
    assert r.status_code == 200 and mean.status_code == 200
    short, several = (np.asarray(v) for v in r.json()["vectors"])
    assert abs(np.linalg.norm(short) - 1.0) < 1e-4 and np.linalg.norm(several) < 0.999
    assert float(short @ np.asarray(mean.json()["vectors"][0])) < 0.9999  # cls is not the mean


async def test_text_over_the_limit_is_413_naming_it(settings, models) -> None:
    async with client(settings, models) as c:
        r = await c.post("/embed", json={"texts": ["ok", "x" * 2500]})
    assert r.status_code == 413
    assert r.json()["detail"] == "text 1 has 2500 characters; the limit is 2000 per text"


async def test_too_many_texts_is_413(settings, models) -> None:
    async with client(settings, models) as c:
        r = await c.post("/embed", json={"texts": ["a"] * 9})
    assert r.status_code == 413
    assert "9 texts" in r.json()["detail"] and "limit is 8" in r.json()["detail"]


async def test_a_model_outside_the_allowlist_is_422_naming_the_field(settings, models) -> None:
    async with client(settings, models) as c:
        r = await c.post("/embed", json={"texts": ["a"], "model": "/srv/models/nope"})
    assert r.status_code == 422 and r.json()["field"] == "model"
    assert "/srv/models/nope" in r.json()["detail"] and "all-MiniLM-L6-v2" in r.json()["detail"]


@pytest.mark.parametrize("body", [{"texts": []}, {"texts": ["a"], "pooling": "max"}, {"text": "a"}])
async def test_malformed_request_is_422(settings, models, body) -> None:
    async with client(settings, models) as c:
        r = await c.post("/embed", json=body)
    assert r.status_code == 422


async def test_default_model_info(settings, models) -> None:
    async with client(settings, models) as c:
        r = await c.get("/models/default")
        assert (await c.get("/openapi.json")).status_code == 404  # the schema is not served
    assert r.status_code == 200
    info = r.json()
    assert (info["name"], info["dim"], info["max_length"], info["n_special"]) == ("default", 384, 256, 2)
    assert info["path"].endswith("model") and info["precision"] == "fp32"
    assert "/embed" in create_app(settings, models=models).openapi()["paths"]


async def test_service_token_required_except_health(settings, models) -> None:
    secured = settings.model_copy(update={"service_token": SecretStr("s3cret")})
    async with client(secured, models) as c:
        assert (await c.get("/health")).status_code == 200
        assert (await c.post("/embed", json={"texts": ["a"]})).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert (await c.get("/models/default", headers=wrong)).status_code == 401
        ok = await c.post("/embed", json={"texts": ["a"]}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


async def test_concurrent_queries_are_embedded_together(settings, models, lm: LoadedModel, monkeypatch) -> None:  # noqa: ANN001
    """Requests waiting for the model are embedded in one forward call (up to max_texts texts),
    and each gets exactly the vectors it would get alone."""
    import asyncio

    from services.embedder import queries

    calls: list[int] = []

    def counting(lm_, texts, **kw):  # noqa: ANN001, ANN003, ANN202 - counts the real function's calls
        calls.append(len(texts))
        return embed_texts(lm_, texts, **kw)

    monkeypatch.setattr(queries, "embed_texts", counting)
    texts = [f"patient {i}: wheezing and fever for {i + 1} days" for i in range(12)]
    alone = embed_texts(lm, texts).vectors
    async with client(settings, models) as c:
        with lm.lock:  # the model is busy: the twelve requests queue behind it
            sent = [asyncio.create_task(c.post("/embed", json={"texts": [t]})) for t in texts]
            for _ in range(500):
                await asyncio.sleep(0.01)
                if sum(len(q) for q in queries._coalescer.queued.values()) == len(texts):
                    break
            assert sum(len(q) for q in queries._coalescer.queued.values()) == len(texts)
        answers = await asyncio.gather(*sent)
    assert all(r.status_code == 200 for r in answers)
    got = np.array([r.json()["vectors"][0] for r in answers])
    np.testing.assert_allclose(got, alone, rtol=1e-4, atol=1e-5)
    assert sorted(calls) == [4, 8]  # two calls, the first as large as max_texts allows
    assert not queries._coalescer.queued
