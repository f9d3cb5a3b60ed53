"""A naming job on a worker of its own embeds its labels as the SAE run's embedding run meets a query (the
run's model and its query prompt), not as the interpreter happens to be configured: the embedder service over
real HTTP (uvicorn on loopback), as in the distributed deployment."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from contracts.interpret import CorpusRef, InterpretRunPayload, LabelEmbedding
from contracts.model_allowlist import DEFAULT_ENCODER
from services.embedder.app import create_app
from services.embedder.config import EmbedderSettings
from services.interpreter.config import InterpreterSettings
from services.interpreter.worker import label_embedder, shutdown, startup
from tests.conftest import MACHINERY_ENCODER
from tests.live import serve_in_thread

LABELS = ["bronchiolite confermata", "sospetta polmonite"]


@pytest.fixture(scope="module")
def embedder_url() -> Iterator[str]:
    settings = EmbedderSettings(device="cpu", precision="fp32", threads=1, default_model=MACHINERY_ENCODER)
    with serve_in_thread(create_app(settings), "the embedder") as url:
        yield url


def job(label_embedding: LabelEmbedding | None) -> InterpretRunPayload:
    ref = CorpusRef(snapshot_uri="file:///nowhere.parquet", embeddings=["file:///nowhere.npy"],
                    codes_csc_uri="file:///nowhere.npz")
    return InterpretRunPayload(run_id=1, corpus=ref, artifact_prefix="interp/x", label_embedding=label_embedding)


def embed_directly(url: str, **fields: object) -> np.ndarray:
    with httpx.Client(timeout=120) as client:
        body = client.post(f"{url}/embed", json={"texts": LABELS, **fields}).json()
    return np.asarray(body["vectors"], dtype=np.float32)


def test_the_jobs_label_embedding_wins_over_the_configured_model(embedder_url: str) -> None:
    ctx: dict = {"settings": InterpreterSettings(embedder_url=embedder_url, embed_model=MACHINERY_ENCODER)}
    asyncio.run(startup(ctx))
    configured = label_embedder(ctx, job(None))(LABELS)  # no label_embedding: as configured (MiniLM)
    np.testing.assert_allclose(configured, embed_directly(embedder_url, model=MACHINERY_ENCODER), atol=1e-6)

    e5_query = LabelEmbedding(model=DEFAULT_ENCODER, prompt_name="query")
    vectors = label_embedder(ctx, job(e5_query))(LABELS)
    np.testing.assert_allclose(vectors, embed_directly(embedder_url, model=DEFAULT_ENCODER, prompt_name="query"),
                               atol=1e-6)
    as_passages = embed_directly(embedder_url, model=DEFAULT_ENCODER)  # what "default" sent before: passages
    assert (vectors * as_passages).sum(1).max() < 0.999  # the query prompt changed the vectors
    assert (vectors * configured).sum(1).max() < 0.5  # another model's space altogether
    assert label_embedder(ctx, job(e5_query)) is label_embedder(ctx, job(e5_query))  # one client per spec
    asyncio.run(shutdown(ctx))


def test_embedded_mode_keeps_the_in_process_embedder() -> None:
    def in_process(texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 3), dtype=np.float32)

    ctx: dict = {"settings": InterpreterSettings(), "embed_texts": in_process}
    asyncio.run(startup(ctx))
    assert label_embedder(ctx, job(LabelEmbedding(model=DEFAULT_ENCODER, prompt_name="query"))) is in_process
