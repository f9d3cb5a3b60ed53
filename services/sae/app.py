"""SAE service HTTP app: `GET /health`, `POST /encode`, `POST /codes`. HTTP only: parse, call the core, answer."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Request

from artifacts import ArtifactStore
from contracts.packed import PackedArray
from contracts.sae import CodesRequest, CodesResponse, EncodeRequest, EncodeResponse
from contracts.service_security import NO_DOCS, authorized
from services.sae.config import SaeSettings, get_settings
from services.sae.encoding import encode_all, encode_vectors
from services.sae.io import load_sae
from services.sae.model import TopKSae


class SaeCache:
    """The last `size` SAEs used, by folder URI (loading one costs a read of n × d × 2 floats)."""

    def __init__(self, store: ArtifactStore, size: int) -> None:
        self.store, self.size = store, size
        self._saes: OrderedDict[str, TopKSae] = OrderedDict()

    def get(self, uri: str) -> TopKSae:
        if uri not in self._saes:
            self._saes[uri] = load_sae(self.store, uri)
            while len(self._saes) > self.size:
                self._saes.popitem(last=False)
        self._saes.move_to_end(uri)
        return self._saes[uri]


def create_app(settings: SaeSettings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(title="Prisma SAE service", version="0.1.0", **NO_DOCS)
    app.state.settings = settings
    app.state.saes = SaeCache(ArtifactStore(settings.artifact_root), settings.cached_saes)

    def require_token(request: Request) -> None:
        token = settings.service_token.get_secret_value() if settings.service_token else None
        if not authorized(request.headers.get("authorization"), token, request.scope.get("server")):
            raise HTTPException(401, "missing or wrong service token", headers={"WWW-Authenticate": "Bearer"})

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/encode", response_model=EncodeResponse, dependencies=[Depends(require_token)])
    def encode(body: EncodeRequest, request: Request) -> EncodeResponse:
        if len(body.vectors) > settings.max_vectors:
            raise HTTPException(422, f"vectors: at most {settings.max_vectors} per request")
        sae = _sae(request, body.sae_uri)
        vectors = np.asarray(body.vectors, dtype=np.float32) if _rectangular(body.vectors) else None
        if vectors is None or vectors.shape[1] != sae.d or not np.isfinite(vectors).all():
            raise HTTPException(422, f"vectors: need finite vectors of dimension {sae.d}")
        return EncodeResponse(features=encode_vectors(sae, vectors))

    @app.post("/codes", response_model=CodesResponse, dependencies=[Depends(require_token)])
    def codes(body: CodesRequest, request: Request) -> CodesResponse:
        if body.vectors.shape[0] > settings.max_code_vectors:
            raise HTTPException(422, f"vectors: at most {settings.max_code_vectors} per request")
        sae = _sae(request, body.sae_uri)
        vectors = body.vectors.array()
        if vectors.ndim != 2 or vectors.shape[1] != sae.d or not np.isfinite(vectors).all():
            raise HTTPException(422, f"vectors: need finite vectors of dimension {sae.d}")
        found = encode_all(sae, vectors.astype(np.float32))  # what a run's pipeline calls on its vectors
        return CodesResponse(n_features=sae.num_latents, indptr=PackedArray.of(found.indptr.astype(np.int64)),
                             indices=PackedArray.of(found.indices.astype(np.int32)),
                             data=PackedArray.of(found.data.astype(np.float32)))

    return app


def _sae(request: Request, uri: str) -> TopKSae:
    try:
        return request.app.state.saes.get(uri)
    except ValueError as exc:
        raise HTTPException(422, f"sae_uri: {exc}") from exc
    except FileNotFoundError as exc:
        raise HTTPException(404, f"sae_uri: no SAE at {uri}") from exc


def _rectangular(rows: list[list[float]]) -> bool:
    return len({len(r) for r in rows}) == 1 and len(rows[0]) > 0
