"""SAE service settings: one pydantic-settings class (env prefix `PRISMA_SAE_`), cached by `get_settings`."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from services.settings import ServiceSettings, artifact_root_field, service_token_field


class SaeSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="PRISMA_SAE_")

    service_token: SecretStr | None = service_token_field("PRISMA_SAE_")
    artifact_root: str = artifact_root_field("PRISMA_SAE_")
    max_vectors: int = Field(default=1024, ge=1, description="Vectors per POST /encode request.")
    max_code_vectors: int = Field(default=65536, ge=1, description="Vectors per POST /codes request (packed: "
                                  "a batch of notes' clauses, 100 MB of float32 at d = 384).")
    cached_saes: int = Field(
        default=4, ge=1,
        description="SAEs kept loaded by the HTTP app (n × d × 2 floats each: 9 MB for MiniLM × 8).",
    )
    job_timeout_s: int = Field(
        default=6 * 3600, ge=60, description="arq job timeout; training 200k documents takes minutes on a GPU.",
    )
    progress_ttl_s: int = Field(default=7 * 24 * 3600, ge=60, description="Lifetime of progress keys in Redis.")
    threads: int | None = Field(default=None, ge=1, description="torch intra-op threads; None: torch's default.")


@lru_cache
def get_settings() -> SaeSettings:
    """The process's settings, read from the environment once (tests pass their own instead)."""
    return SaeSettings()
