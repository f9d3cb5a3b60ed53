"""The public JSON API, version 1. Authentication is a router-level dependency, so it runs
before any other (a missing key is a 401 even where the resource would be a 404)."""

from fastapi import APIRouter, Depends

from gateway.api.v1 import concepts, datasets, jobs, keys, runs, sae, search
from gateway.deps import require_api_key

router = APIRouter(prefix="/api/v1", dependencies=[Depends(require_api_key)])
for module in (datasets, runs, sae, search, concepts, jobs, keys):
    router.include_router(module.router)
