"""The gateway: `create_app` builds the public API, the dashboard and their shared state."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import DataError, OperationalError
from starlette.middleware.gzip import GZipMiddleware
from starlette.middleware.sessions import SessionMiddleware

from artifacts import ArtifactStore
from contracts.catalog import Health
from gateway import __version__
from gateway.api.v1 import router as api_router
from gateway.api.v1.search import add_error_handlers as add_search_error_handlers
from gateway.config import GatewaySettings, get_settings, make_private
from gateway.dashboard import router as dashboard_router
from gateway.dashboard.api_docs import documented_openapi
from gateway.dashboard.views import login_page_response
from gateway.db import session_factory
from gateway.deps import CurrentKey, NotAuthenticated
from gateway.domain.auth.accounts import AccountError
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.datasets.parsing import DatasetInputError
from gateway.domain.jobs.handlers import HANDLERS
from gateway.domain.jobs.runner import ArqRunner, InProcessRunner, JobDeps
from gateway.domain.runs.errors import RunInputError
from gateway.logging import configure_logging
from gateway.migrate import upgrade
from gateway.services import ServiceClients, ServiceError, ServiceUnavailable
from gateway.uploads import UploadError

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).resolve().parent.parent / "web" / "static"
GZIP_MIN_BYTES = 1024  # smaller responses go as they are: the header and the CPU would outweigh the saving


def _tagged_union_error(error: dict) -> tuple[str, str]:
    """(field, message) of a validation error; a body of several kinds told apart by one field
    (`mode` of a search) is named by that field, not by pydantic's "Unable to extract tag using
    discriminator"."""
    where = ".".join(str(p) for p in error["loc"])
    ctx = error.get("ctx") or {}
    if error.get("type") in ("union_tag_not_found", "union_tag_invalid") and "discriminator" in ctx:
        field = ".".join(p for p in (where, str(ctx["discriminator"]).strip("'\"")) if p)
        if error["type"] == "union_tag_invalid":
            return field, f"{ctx.get('tag')!r} is not one of {ctx.get('expected_tags')}"
        return field, "required: it names the kind of request (see the schema at /api/v1/openapi.json)"
    return where, error["msg"]


def create_app(settings: GatewaySettings | None = None, *, configure_logs: bool = True) -> FastAPI:
    settings = settings or get_settings()
    if configure_logs:
        configure_logging(settings.log_level, json_lines=settings.log_json)
    make_private(settings.data_dir)  # before the SQLite file, uploads or artifacts are created
    if settings.auto_migrate if settings.auto_migrate is not None else settings.embedded:
        upgrade(settings.sqlalchemy_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # noqa: ANN202
        yield
        await app.state.runner.close()
        await app.state.services.aclose()

    app = FastAPI(
        title="Prisma",
        version=__version__,
        description="Interpretable text embeddings: sparse features, named, scored, searchable.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's docs page loads Swagger UI from a CDN; the dashboard's /api-docs serves its own
        redoc_url=None,
        openapi_url=None,  # served below, behind authentication
    )
    _init_state(app, settings)
    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.resolved_secret_key(),
        session_cookie="prisma_session",
        max_age=settings.session_max_age_s,
        same_site="strict",
        https_only=settings.cookie_secure is True,
    )
    from gateway.middleware import ConcurrencyLimitMiddleware, RequestIdMiddleware, SecurityHeadersMiddleware

    app.add_middleware(SecurityHeadersMiddleware, cookie_name="prisma_session", cookie_secure=settings.cookie_secure)

    # gzip where the client asks (every browser, httpx): the SAE run page's heatmaps are 2.5 MB of SVG, about
    # 0.2 MB compressed. A compressed response that holds a secret beside attacker-chosen text is what BREACH
    # reads; that needs the victim's browser to send the request cross-site with its cookie, which SameSite=strict
    # refuses (and API keys travel in a header, never in a body).
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES, compresslevel=5)
    app.add_middleware(ConcurrencyLimitMiddleware, limit=settings.max_concurrent_requests)
    app.add_middleware(RequestIdMiddleware)
    _add_error_handlers(app)

    @app.get("/health", response_model=Health, tags=["health"])
    def health() -> Health:
        """Liveness, without authentication."""
        return Health(status="ok", mode="embedded" if settings.embedded else "distributed", version=__version__)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/datasets", status_code=303)

    app.openapi = lambda: documented_openapi(app)  # type: ignore[method-assign]  # with its bearer scheme

    @app.get("/api/v1/openapi.json", include_in_schema=False)
    def openapi_schema(_: CurrentKey) -> JSONResponse:
        return JSONResponse(app.openapi())

    app.include_router(api_router)
    app.include_router(dashboard_router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


def _init_state(app: FastAPI, settings: GatewaySettings) -> None:
    app.state.settings = settings
    app.state.factory = session_factory(settings.sqlalchemy_url)
    app.state.store = ArtifactStore(settings.artifact_root)
    app.state.services = ServiceClients(settings)
    deps = JobDeps(settings, app.state.factory, app.state.store, app.state.services)
    if settings.redis_url:
        app.state.runner = ArqRunner(settings.redis_url)
    else:
        runner = InProcessRunner(deps, HANDLERS)
        resumed = runner.resume_unfinished()
        if resumed:
            log.info("resumed unfinished jobs", extra={"count": resumed})
        app.state.runner = runner


INT32_MAX = 2**31 - 1  # PostgreSQL INTEGER, the type of every id column


def _out_of_range_param(request: Request) -> str | None:
    """The first path or query parameter holding an integer past INT32_MAX, if any."""
    for name, value in [*request.path_params.items(), *request.query_params.items()]:
        try:
            if abs(int(value)) > INT32_MAX:
                return name
        except (TypeError, ValueError):
            continue
    return None


def _error(status_code: int, detail: str, *, field: str | None = None, locator: str | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail, "field": field, "locator": locator}, status_code=status_code)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(DatasetInputError)
    async def dataset_input(_: Request, exc: DatasetInputError) -> JSONResponse:
        return _error(422, exc.message, field=exc.field, locator=exc.locator)

    @app.exception_handler(RunInputError)
    async def run_input(_: Request, exc: RunInputError) -> JSONResponse:
        return _error(exc.status_code, exc.message, field=exc.field, locator=exc.locator)

    @app.exception_handler(ConceptInputError)
    async def concept_input(_: Request, exc: ConceptInputError) -> JSONResponse:
        where = exc.extra.get("line")
        locator = f"line {where}, column {exc.extra.get('column')}" if where is not None else None
        return JSONResponse({"detail": exc.message, "field": exc.field, "locator": locator, **exc.extra},
                            status_code=exc.status_code)

    @app.exception_handler(AccountError)
    async def account_error(_: Request, exc: AccountError) -> JSONResponse:
        return _error(exc.status_code, exc.message, field=exc.field)

    @app.exception_handler(UploadError)
    async def upload_error(_: Request, exc: UploadError) -> JSONResponse:
        return _error(exc.status_code, exc.message, field=exc.field)

    @app.exception_handler(ServiceUnavailable)
    async def service_down(_: Request, exc: ServiceUnavailable) -> JSONResponse:
        return _error(503, str(exc), field=exc.service)

    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return _error(exc.status_code if exc.status_code < 500 else 502, detail, field=exc.service)

    @app.exception_handler(OverflowError)
    @app.exception_handler(DataError)
    async def number_out_of_range(request: Request, exc: Exception) -> JSONResponse:
        # An id past the database's integer range (SQLite raises OverflowError, PostgreSQL
        # "integer out of range"): the client's mistake, named where we can see it.
        if isinstance(exc, DataError) and "out of range" not in str(exc.orig):
            raise exc
        field = _out_of_range_param(request)
        return _error(422, f"{field or 'body'}: a number is out of range (at most {INT32_MAX})", field=field)

    @app.exception_handler(RedisConnectionError)
    @app.exception_handler(RedisTimeoutError)
    async def queue_down(_: Request, exc: Exception) -> JSONResponse:
        log.error("queue unavailable", extra={"error": type(exc).__name__})
        return _error(503, "the job queue (Redis) is unavailable; retry shortly", field="queue")

    @app.exception_handler(OperationalError)
    async def database_down(_: Request, exc: OperationalError) -> JSONResponse:
        log.error("database unavailable", extra={"error": type(exc.orig).__name__ if exc.orig else "?"})
        return _error(503, "the database is unavailable; retry shortly", field="database")

    add_search_error_handlers(app)

    @app.exception_handler(NotAuthenticated)
    async def not_authenticated(request: Request, _: NotAuthenticated):  # noqa: ANN202
        return login_page_response(request, status_code=401)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        where, message = _tagged_union_error(first)
        return JSONResponse(
            {"detail": [{k: e[k] for k in ("loc", "msg", "type") if k in e} for e in errors],
             "field": where, "locator": None, "message": f"{where}: {message}"},
            status_code=422,
        )
