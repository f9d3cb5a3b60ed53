"""What the three services' settings share: one base class, and the two fields whose environment
names carry the service's own prefix as well as the shared one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def service_token_field(prefix: str, *, note: str = "") -> Any:
    """`<prefix>SERVICE_TOKEN`, else `PRISMA_SERVICE_TOKEN`; `note` ends its description."""
    return Field(
        default=None,
        validation_alias=AliasChoices(f"{prefix}SERVICE_TOKEN", "PRISMA_SERVICE_TOKEN", "service_token"),
        description="If set, every route but /health requires `Authorization: Bearer <token>`"
        + (f"; {note}." if note else "."),
    )


def artifact_root_field(prefix: str) -> Any:
    """`<prefix>ARTIFACT_ROOT`, else `ARTIFACT_ROOT`, else `PRISMA_ARTIFACT_ROOT`."""
    return Field(
        default="data/artifacts",
        validation_alias=AliasChoices(f"{prefix}ARTIFACT_ROOT", "ARTIFACT_ROOT", "PRISMA_ARTIFACT_ROOT", "artifact_root"),
        description="fsspec URI (or local directory) of the artifact store, the same as the gateway's.",
    )


class ServiceSettings(BaseSettings):
    """A service's settings (each subclass sets its `env_prefix` and declares `service_token` and
    `artifact_root` with the fields above); validated at start-up, the artifact root made a URI."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    service_token: SecretStr | None
    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        validation_alias=AliasChoices("REDIS_URL", "PRISMA_REDIS_URL", "redis_url"),
        description="Redis of the arq queues (worker only).",
    )
    artifact_root: str

    @model_validator(mode="after")
    def _resolve_root(self) -> ServiceSettings:
        if "://" not in self.artifact_root:
            self.artifact_root = Path(self.artifact_root).expanduser().resolve().as_uri()
        return self
