"""Gateway settings: one pydantic-settings class, validated at start-up, cached by `get_settings`.

With neither `DATABASE_URL` nor `REDIS_URL` set, Prisma runs in *embedded mode*: SQLite
under the data directory, jobs in-process, services through in-process ASGI transports.
"""

from __future__ import annotations

import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MB = 1024 * 1024
PRIVATE_UMASK = 0o077  # files owner-only: clinical text in the database, uploads and snapshots


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PRISMA_", extra="ignore", populate_by_name=True)

    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "PRISMA_DATABASE_URL"),
        description="SQLAlchemy URL, e.g. postgresql+psycopg://postgres@127.0.0.1/test. "
        "Unset (with REDIS_URL unset): embedded mode, SQLite under the data dir.",
    )
    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "PRISMA_REDIS_URL"),
        description="Redis for the arq queues, e.g. redis://127.0.0.1:6379/0. Unset: jobs run in-process.",
    )
    data_dir: Path = Field(
        default=Path("data"),
        validation_alias=AliasChoices("PRISMA_DATA_DIR", "data_dir"),
        description="Where embedded mode keeps its SQLite file, artifacts, uploads and secret key.",
    )
    artifact_root: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ARTIFACT_ROOT", "PRISMA_ARTIFACT_ROOT"),
        description="fsspec URI of the artifact store (file:///..., s3://bucket/prefix). "
        "Default: file://<data dir>/artifacts.",
    )
    embedder_url: str | None = Field(default=None, description="Base URL of the embedder service; unset: in-process.")
    sae_url: str | None = Field(default=None, description="Base URL of the SAE service; unset: in-process.")
    interpreter_url: str | None = Field(default=None, description="Base URL of the interpreter service; unset: in-process.")
    naming_backend: Literal["keywords", "llamacpp", "ollama"] = Field(
        default="keywords",
        description="Back-end of a naming job whose request names none (the dashboard's and `prisma demo`'s too); "
        "the keywords back-end stays every language model's fallback. compose.yaml: ollama.",
    )
    service_token: str | None = Field(default=None, description="Bearer token the gateway sends to the services.")
    secret_key: str | None = Field(
        default=None,
        description="Signs session cookies and CSRF tokens. Default: generated once into <data dir>/secret_key.",
    )
    max_document_bytes: int = Field(default=10 * MB, gt=0, description="Largest document accepted, in UTF-8 bytes.")
    max_upload_bytes: int = Field(default=2048 * MB, gt=0, description="Largest upload accepted, in bytes; enforced while streaming.")
    import_batch_size: int = Field(default=2000, gt=0, description="Documents inserted per database round trip on import.")
    session_max_age_s: int = Field(default=12 * 3600, gt=0, description="Dashboard session lifetime, seconds.")
    log_level: str = Field(default="INFO", description="Root log level. Document text is never logged above DEBUG.")
    log_json: bool = Field(default=True, description="One JSON object per log line (False: human-readable).")
    cookie_secure: bool | None = Field(
        default=None,
        description="Mark the session cookie Secure. Unset: Secure except on plain http to a loopback host "
        "(localhost, 127.0.0.1, ::1), where a browser has no https; true: always; false: never (plain http "
        "on a trusted network, where a Secure cookie would not be sent back and login could not work).",
    )
    max_concurrent_requests: int = Field(
        default=24, ge=1,
        description="Requests the gateway works on at once; more wait their turn. At most half the database "
        "pool (a request may hold two connections).",
    )
    job_lease_s: float = Field(
        default=30.0, gt=0,
        description="Seconds a worker holds a queued job without renewing it (`prisma worker`): a worker "
        "that dies loses its jobs to another worker after this long (arq's own hold is the job timeout).",
    )
    search_flat_max_docs: int = Field(
        default=1_000_000, ge=0,
        description="Text search uses an exact FAISS IndexFlatIP up to this many documents per embedding run, "
        "the approximate `search_large_index` above (the brief: flat under a million documents).",
    )
    search_large_index: Literal["hnsw", "ivf"] = Field(
        default="hnsw", description="Approximate FAISS index for runs above `search_flat_max_docs`: hnsw or ivf.",
    )
    search_segments_max: int = Field(
        default=500_000, ge=0,
        description="Text search over a run with segments ranks each document by its own vector and its best "
        "segment's (exact, the distinct segment vectors held in memory as float32: 384 dimensions cost 1.5 KB "
        "a segment) up to this many distinct segments per run; above, by the documents' FAISS index alone.",
    )
    auto_migrate: bool | None = Field(
        default=None,
        description="Run `alembic upgrade head` when the app starts. Default: on in embedded mode, "
        "off otherwise (run `prisma db upgrade` once per deployment).",
    )

    @model_validator(mode="after")
    def _resolve_paths(self) -> GatewaySettings:
        self.data_dir = self.data_dir.expanduser().resolve()
        if self.artifact_root is None:
            self.artifact_root = (self.data_dir / "artifacts").as_uri()
        return self

    @property
    def embedded(self) -> bool:
        """True when no external database or Redis is configured."""
        return not self.database_url and not self.redis_url

    @property
    def sqlalchemy_url(self) -> str:
        if self.database_url:
            url = self.database_url
            if url.startswith("postgresql://") or url.startswith("postgres://"):
                url = "postgresql+psycopg://" + url.split("://", 1)[1]
            return url
        return f"sqlite:///{self.data_dir / 'prisma.db'}"

    @property
    def uploads_dir(self) -> Path:
        return self.data_dir / "uploads"

    def resolved_secret_key(self) -> str:
        """The configured key, else one generated once and kept in the data dir (mode 0600)."""
        if self.secret_key:
            return self.secret_key
        path = self.data_dir / "secret_key"
        if not path.exists():
            # Written aside, then linked into place: link fails when the file exists, so processes
            # starting together (gateway --workers) all end up with the first one's key.
            self.data_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".secret_key.{os.getpid()}.{secrets.token_hex(4)}")
            tmp.write_text(secrets.token_urlsafe(48))
            tmp.chmod(0o600)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        return path.read_text().strip()


def make_private(data_dir: Path) -> None:
    """Owner-only from here on: the process's files (umask 077) and the data dir itself (0700).

    Every Prisma process (gateway, workers, services: one user in the image) reads and writes
    the same files, so nothing is lost for them; other users of the machine see nothing."""
    os.umask(PRIVATE_UMASK)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if data_dir.stat().st_uid == os.getuid() and data_dir.stat().st_mode & PRIVATE_UMASK:
        data_dir.chmod(0o700)  # created by an older version, or by hand


@lru_cache
def get_settings() -> GatewaySettings:
    return GatewaySettings()
