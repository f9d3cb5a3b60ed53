"""The HTMX dashboard (HTML pages and fragments)."""

from gateway.dashboard.pages import router

__all__ = ["router"]
