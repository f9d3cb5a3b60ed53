"""Wire schemas of the gateway's catalogue: datasets, documents, API keys, audit events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class DatasetOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    description: str | None
    format: str = Field(description="csv | jsonl | zip")
    source_filename: str | None
    n_documents: int
    size_bytes: int = Field(description="Size of the upload, bytes.")
    text_bytes: int = Field(description="Sum of the documents' UTF-8 sizes, bytes.")
    column_mapping: dict[str, Any]
    label_counts: dict[str, int] = Field(description="Documents per label.")
    snapshot_uri: str | None = Field(default=None, description="The immutable Parquet snapshot the services read.")
    created_at: datetime


class DatasetPage(BaseModel):
    items: list[DatasetOut]
    total: int
    limit: int
    offset: int


class DocumentOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    position: int = Field(description="0-based order in the upload.")
    external_id: str | None
    text: str
    labels: list[str]
    metadata: dict[str, Any] = Field(validation_alias="meta")
    n_chars: int = Field(description="Length of the whole text, characters.")
    truncated: bool = Field(default=False, description="True in a listing when `text` holds only the first "
                            "`text_chars` characters; GET the document for the whole text.")


class DocumentPage(BaseModel):
    items: list[DocumentOut]
    total: int
    limit: int
    offset: int
    text_chars: int = Field(description="Longest text a listing returns, characters: longer ones are cut "
                            "(`truncated`), so that a page stays a few megabytes (documents reach 10 MB each).")


class ApiKeyCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100, description="Who or what uses the key.")


class ApiKeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyOut):
    key: str = Field(description="The key itself, shown this once; only its hash is stored.")


class AuditEventOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    at: datetime
    actor: str
    action: str
    target_type: str | None
    target_id: str | None
    request_id: str | None
    details: dict[str, Any]
    project_id: int | None = None


class AuditFilter(BaseModel):
    """Filters of the audit log (API and dashboard page); each optional."""

    actor: str | None = Field(default=None, max_length=100, description="The key's name, 'cli' or 'anonymous'.")
    action: str | None = Field(default=None, max_length=100,
                               description="An action ('documents.read'), or a prefix ending in '.' ('auth.').")
    since: datetime | None = Field(default=None, description="Events at or after this time (ISO 8601; naive is UTC).")
    until: datetime | None = Field(default=None, description="Events before this time.")


class ErrorOut(BaseModel):
    """Every 4xx/5xx the gateway raises itself: a sentence, and where the problem is."""

    detail: str | list[Any]
    field: str | None = Field(default=None, description="The form field, column or key at fault.")
    locator: str | None = Field(default=None, description="Where in the upload: 'line 12', 'notes/a.txt'.")


class Health(BaseModel):
    status: str
    mode: str = Field(description="embedded | distributed")
    version: str
