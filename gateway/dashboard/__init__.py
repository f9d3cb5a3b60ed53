"""The HTMX dashboard (HTML pages and fragments)."""

from fastapi import APIRouter

from gateway.dashboard.audit_pages import router as audit_pages
from gateway.dashboard.concept_pages import router as concept_pages
from gateway.dashboard.feature_examples import router as feature_examples
from gateway.dashboard.pages import public, router as private
from gateway.dashboard.sae_pages import router as sae_pages
from gateway.dashboard.search_pages import router as search_pages

router = APIRouter()
router.include_router(public)
router.include_router(private)
router.include_router(sae_pages)
router.include_router(feature_examples)
router.include_router(search_pages)
router.include_router(concept_pages)
router.include_router(audit_pages)

__all__ = ["router"]
