"""The embedder's HTTP API: GET /health, POST /embed, GET /models/default. HTTP only."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from contracts.embed import EmbedRequest, EmbedResponse, ModelInfo
from services.embedder.config import EmbedderSettings, get_settings
from services.embedder.encoder import configure_threads
from services.embedder.errors import EmbedderInputError, RequestTooLargeError, UnknownModelError
from services.embedder.models import ModelCache
from services.embedder.queries import embed_query, model_info

_bearer = HTTPBearer(auto_error=False)


def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """With a service token configured, only callers that present it get through (401 otherwise)."""
    token = request.app.state.settings.service_token
    if token is None:
        return
    given = credentials.credentials if credentials else ""
    if not secrets.compare_digest(given.encode(), token.get_secret_value().encode()):
        raise HTTPException(status_code=401, detail="missing or wrong bearer token",
                            headers={"WWW-Authenticate": "Bearer"})


def _settings(request: Request) -> EmbedderSettings:
    return request.app.state.settings


def _models(request: Request) -> ModelCache:
    return request.app.state.models


SettingsDep = Annotated[EmbedderSettings, Depends(_settings)]
ModelsDep = Annotated[ModelCache, Depends(_models)]


def create_app(settings: EmbedderSettings | None = None, *, models: ModelCache | None = None) -> FastAPI:
    """The embedder app; models load lazily, once, on first use (or come from `models`, shared)."""
    settings = settings or get_settings()
    app = FastAPI(title="Prisma embedder", version="0.1.0",
                  description="Text -> vectors with chunk-and-average (no token dropped).")
    app.state.settings = settings
    app.state.models = models or ModelCache(
        device=settings.device, precision=settings.precision, default_model=settings.default_model
    )
    configure_threads(settings.threads)
    protected = [Depends(require_token)]

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/embed", response_model=EmbedResponse, dependencies=protected)
    def embed(body: EmbedRequest, models: ModelsDep, cfg: SettingsDep) -> EmbedResponse:
        return embed_query(models, body, cfg)

    @app.get("/models/default", response_model=ModelInfo, dependencies=protected)
    def default_model(models: ModelsDep) -> ModelInfo:
        return model_info(models.get(None))

    _install_error_handlers(app)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    statuses = ((RequestTooLargeError, 413), (UnknownModelError, 404), (EmbedderInputError, 422))
    for exc_type, status in statuses:
        def handler(_: Request, exc: Exception, status: int = status) -> JSONResponse:
            return JSONResponse(status_code=status, content={"detail": str(exc)})

        app.add_exception_handler(exc_type, handler)
