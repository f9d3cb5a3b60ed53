"""The embedder's HTTP API: GET /health, POST /embed, POST /passages, GET /models/default. HTTP only."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from contracts.embed import EmbedRequest, EmbedResponse, ModelInfo, PassageRequest, PassageResponse
from contracts.service_security import NO_DOCS, authorized
from services.embedder.config import EmbedderSettings, get_settings
from services.embedder.encoder import configure_threads
from services.embedder.errors import EmbedderInputError, ModelFileError, RequestTooLargeError, UnknownModelError
from services.embedder.models import ModelCache
from services.embedder.passages import embed_passages
from services.embedder.queries import embed_query, model_info

def require_token(request: Request) -> None:
    """With a service token configured, only callers that present it get through (401 otherwise);
    without one, only callers on loopback."""
    token = request.app.state.settings.service_token
    secret = token.get_secret_value() if token is not None else None
    if not authorized(request.headers.get("authorization"), secret, request.scope.get("server")):
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
                  description="Text -> vectors with chunk-and-average (no token dropped).", **NO_DOCS)
    app.state.settings = settings
    app.state.models = models or ModelCache.shared(settings)
    configure_threads(settings.threads)
    protected = [Depends(require_token)]

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/embed", response_model=EmbedResponse, dependencies=protected)
    def embed(body: EmbedRequest, models: ModelsDep, cfg: SettingsDep) -> EmbedResponse:
        return embed_query(models, body, cfg)

    @app.post("/passages", response_model=PassageResponse, dependencies=protected)
    def passages(body: PassageRequest, models: ModelsDep, cfg: SettingsDep) -> PassageResponse:
        return embed_passages(models, body, cfg)

    @app.get("/models/default", response_model=ModelInfo, dependencies=protected)
    def default_model(models: ModelsDep) -> ModelInfo:
        return model_info(models.get(None))

    _install_error_handlers(app)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    # a shipped model's file broken on this machine is the service's fault, named: 503, not 500
    statuses = ((RequestTooLargeError, 413), (UnknownModelError, 422), (EmbedderInputError, 422),
                (ModelFileError, 503))
    for exc_type, status in statuses:
        def handler(_: Request, exc: Exception, status: int = status) -> JSONResponse:
            field = {"field": "model"} if isinstance(exc, UnknownModelError) else {}
            return JSONResponse(status_code=status, content={"detail": str(exc), **field})

        app.add_exception_handler(exc_type, handler)
