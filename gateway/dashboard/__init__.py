"""The HTMX dashboard (HTML pages and fragments)."""

from fastapi import APIRouter, Depends

from gateway.dashboard.api_docs import assets as api_docs_assets, router as api_docs
from gateway.dashboard.audit_pages import router as audit_pages
from gateway.dashboard.concept_form import router as concept_form
from gateway.dashboard.concept_pages import router as concept_pages
from gateway.dashboard.document_page import router as document_page
from gateway.dashboard.extend_pages import router as extend_pages
from gateway.dashboard.feature_examples import router as feature_examples
from gateway.dashboard.label_pages import router as label_pages
from gateway.dashboard.label_start import router as label_start
from gateway.dashboard.pages import public, router as private
from gateway.dashboard.paste_pages import router as paste_pages
from gateway.dashboard.sae_pages import router as sae_pages
from gateway.dashboard.search_pages import router as search_pages
from gateway.dashboard.views import dashboard_access

router = APIRouter()
router.include_router(public)
router.include_router(api_docs_assets)
# The form before the concept pages: /concepts/new is not /concepts/{concept_id}.
for pages in (private, sae_pages, feature_examples, search_pages, document_page, concept_form, concept_pages,
              label_pages, label_start, paste_pages, extend_pages, audit_pages, api_docs):
    router.include_router(pages, dependencies=[Depends(dashboard_access)])  # role and project, as the API

__all__ = ["router"]
