"""Embedded-mode wiring: the one module of the gateway that imports service code.

Everywhere else the gateway reaches a service through `contracts` and its clients (HTTP, or the
service's queue). In embedded mode (no service URLs, no Redis) the same clients go through each
service's real app in this process (`service_app`, over `httpx.ASGITransport`), and a gateway job
runs a service job by calling the service worker's own function (`run_worker_function`), started
once per process. The command line starts a service's app or worker in its own process through
here too (`prisma service`, `prisma worker`).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

SERVICE_NAMES = ("embedder", "sae", "interpreter")
WORKER_MODULES = {name: f"services.{name}.worker" for name in SERVICE_NAMES}

_worker_ctx: dict[str, dict[str, Any]] = {}
_worker_lock = asyncio.Lock()


def service_app(service: str, settings: Any = None, **peers: Any) -> Any:
    """The service's FastAPI app (`services.<service>.app.create_app`): with `settings` None, its own
    settings from the environment."""
    return importlib.import_module(f"services.{service}.app").create_app(settings, **peers)


def service_settings(service: str, **values: Any) -> Any:
    """The service's settings from the environment (its cached `get_settings()`), or, given `values`,
    a new instance of its settings class with them (the rest still from the environment)."""
    settings = importlib.import_module(f"services.{service}.config").get_settings()
    return type(settings)(**values) if values else settings


def worker_module(service: str) -> ModuleType:
    """The service's arq worker module (its `WorkerSettings`, `startup` and job functions)."""
    return importlib.import_module(WORKER_MODULES[service])


async def worker_ctx(service: str) -> dict[str, Any]:
    """The service worker's start-up, run once per process (models load once)."""
    async with _worker_lock:
        if service not in _worker_ctx:
            wctx: dict[str, Any] = {}
            await worker_module(service).startup(wctx)
            _worker_ctx[service] = wctx
    return _worker_ctx[service]


async def run_worker_function(service: str, function: str, payload: dict[str, Any],
                              job_ctx: dict[str, Any]) -> dict[str, Any]:
    """`function` of the service's worker on `payload`, in this process: its ctx is the worker's
    start-up ctx updated with `job_ctx` (the job's store, id, `report` and `should_stop`)."""
    base = await worker_ctx(service)
    return await getattr(worker_module(service), function)({**base, **job_ctx}, payload)


async def label_embedder(spec: dict[str, Any]) -> Callable[[list[str]], np.ndarray]:
    """Label texts embedded by the embedding run's own model (`spec`: model, pooling, normalize and,
    for a model with prompts, its query prompt), with the in-process embedder worker's models."""
    from services.embedder.encoder import embed_texts

    lm = (await worker_ctx("embedder"))["models"].get(spec["model"], prompt_name=spec.get("prompt_name"))
    return lambda texts: embed_texts(lm, texts, pooling=spec["pooling"], normalize=spec["normalize"]).vectors
