"""SAE service settings: one pydantic-settings class (env prefix `PRISMA_SAE_`), cached by `get_settings`."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class SaeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PRISMA_SAE_", extra="ignore", populate_by_name=True)

    service_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("PRISMA_SAE_SERVICE_TOKEN", "PRISMA_SERVICE_TOKEN", "service_token"),
        description="If set, every route but /health requires `Authorization: Bearer <token>`.",
    )
    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        validation_alias=AliasChoices("REDIS_URL", "PRISMA_REDIS_URL", "redis_url"),
        description="Redis of the arq queues (worker only).",
    )
    artifact_root: str = Field(
        default="data/artifacts",
        validation_alias=AliasChoices("PRISMA_SAE_ARTIFACT_ROOT", "ARTIFACT_ROOT", "PRISMA_ARTIFACT_ROOT",
                                      "artifact_root"),
        description="fsspec URI (or local directory) of the artifact store, the same as the gateway's.",
    )
    max_vectors: int = Field(default=1024, ge=1, description="Vectors per POST /encode request.")
    cached_saes: int = Field(
        default=4, ge=1,
        description="SAEs kept loaded by the HTTP app (n × d × 2 floats each: 9 MB for MiniLM × 8).",
    )
    job_timeout_s: int = Field(
        default=6 * 3600, ge=60, description="arq job timeout; training 200k documents takes minutes on a GPU.",
    )
    progress_ttl_s: int = Field(default=7 * 24 * 3600, ge=60, description="Lifetime of progress keys in Redis.")
    threads: int | None = Field(default=None, ge=1, description="torch intra-op threads; None: torch's default.")

    @model_validator(mode="after")
    def _resolve_root(self) -> SaeSettings:
        if "://" not in self.artifact_root:
            self.artifact_root = Path(self.artifact_root).expanduser().resolve().as_uri()
        return self


@lru_cache
def get_settings() -> SaeSettings:
    """The process's settings, read from the environment once (tests pass their own instead)."""
    return SaeSettings()
