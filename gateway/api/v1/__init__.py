"""The public JSON API, version 1. Authentication, then authorisation (`gateway.authz`: role by route
and method, project by the object in the path), are router-level dependencies, so they run before
any other (a missing key is a 401 even where the resource would be a 404; a viewer's POST is a 403
before its body is validated)."""

from fastapi import APIRouter, Depends

from gateway.api.v1 import accounts, concepts, datasets, jobs, keys, labels, runs, sae, search
from gateway.authz import authorize_api
from gateway.deps import require_api_key

router = APIRouter(prefix="/api/v1", dependencies=[Depends(require_api_key), Depends(authorize_api)])
for module in (datasets, runs, sae, search, concepts, labels, jobs, keys, accounts):
    router.include_router(module.router)
