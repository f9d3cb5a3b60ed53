"""Label embeddings through the embedder service's `POST /embed` (the contracts' EmbedRequest)."""

from __future__ import annotations

import httpx
import numpy as np

from contracts.embed import EmbedRequest, EmbedResponse
from services.interpreter.scoring import EmbedFn


class EmbedderError(RuntimeError):
    """The embedder service failed or answered something else than an EmbedResponse."""


def http_embedder(base_url: str, *, model: str = "default", token: str | None = None, pooling: str = "mean",
                  normalize: bool = True, prompt_name: str | None = None, timeout_s: float = 60.0,
                  batch: int = 256) -> EmbedFn:
    """An EmbedFn that calls the embedder over HTTP, `batch` texts a request (with the model, pooling and
    prompt given: a run's query embedding); vectors unit-norm unless `normalize` is False."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)

    def embed(texts: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), batch):
            body = EmbedRequest(texts=texts[i:i + batch], model=model, pooling=pooling, normalize=normalize,
                                prompt_name=prompt_name).model_dump(mode="json")
            try:
                response = client.post("/embed", json=body)
                response.raise_for_status()
            except httpx.HTTPError as exc:
                raise EmbedderError(f"embedder at {base_url}: {exc}") from exc
            out.append(np.asarray(EmbedResponse.model_validate(response.json()).vectors, np.float32))
        return np.concatenate(out)

    embed.close = client.close  # type: ignore[attr-defined]  # the worker's shutdown closes its connections
    return embed


def async_http_embedder(client: httpx.AsyncClient, *, model: str = "default", pooling: str = "mean",
                        normalize: bool = True, prompt_name: str | None = None, batch: int = 256) -> EmbedFn:
    """An async EmbedFn over `client` (base URL and token already set): real HTTP to the embedder
    service, or in embedded mode the gateway's in-process ASGI transport of the embedder app."""

    async def embed(texts: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), batch):
            body = EmbedRequest(texts=texts[i:i + batch], model=model, pooling=pooling, normalize=normalize,
                                prompt_name=prompt_name)
            try:
                response = await client.post("/embed", json=body.model_dump(mode="json"))
                response.raise_for_status()
            except httpx.HTTPError as exc:
                raise EmbedderError(f"embedder at {client.base_url}: {exc}") from exc
            out.append(np.asarray(EmbedResponse.model_validate(response.json()).vectors, np.float32))
        return np.concatenate(out)

    return embed
