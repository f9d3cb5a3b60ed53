"""The HTMX dashboard (HTML pages and fragments)."""

from fastapi import APIRouter

from gateway.dashboard.pages import public, router as private

router = APIRouter()
router.include_router(public)
router.include_router(private)

__all__ = ["router"]
