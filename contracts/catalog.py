"""Wire schemas of the gateway's catalogue: datasets, documents, users, projects, API keys, audit events."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

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
    project_id: int = Field(description="The project the dataset (and everything derived from it) belongs to.")
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


Role = Literal["admin", "editor", "labeller", "viewer"]
AccountName = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")


class UserCreate(BaseModel):
    name: str = AccountName
    role: Role = Field(description="viewer: reads; editor: also creates and runs; admin: also manages users, "
                       "projects, keys and the audit log.")


class UserOut(BaseModel):
    id: int
    name: str
    role: Role
    created_at: datetime
    projects: list[str] = Field(description="Names of the projects the user is a member of.")


class ProjectCreate(BaseModel):
    name: str = AccountName


class ProjectOut(BaseModel):
    id: int
    name: str
    created_at: datetime
    members: list[str] = Field(description="Names of the member users.")


class MemberAdd(BaseModel):
    user: str = Field(min_length=1, max_length=100, description="The user's name.")


class Me(BaseModel):
    """The caller: its key, user, role, and the projects it sees."""

    key_name: str
    user: str | None
    role: Role
    read_only: bool
    projects: list[ProjectOut]


class ApiKeyCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100, description="Who or what uses the key.")
    user: str | None = Field(default=None, max_length=100,
                             description="The user the key belongs to (its role and projects); default: the caller's.")
    read_only: bool = Field(default=False, description="Reads only, whatever the user's role.")
    expires_at: datetime | None = Field(default=None, description="Refused from then on (401); none: never. "
                                        "Without a time zone: UTC.")


class ApiKeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    prefix: str
    user_id: int
    read_only: bool
    expires_at: datetime | None
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
