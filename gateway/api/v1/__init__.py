"""The public JSON API, version 1."""

from fastapi import APIRouter

from gateway.api.v1 import datasets, jobs, keys

router = APIRouter(prefix="/api/v1")
for module in (datasets, jobs, keys):
    router.include_router(module.router)
