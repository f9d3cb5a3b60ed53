"""Language-model back-ends behind one async interface (`base.Backend`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.interpret import BackendOptions
from contracts.model_allowlist import LLAMACPP_PACKAGE, allowed_models, resolve_allowed

if TYPE_CHECKING:
    from services.interpreter.backends.base import Backend
    from services.interpreter.config import InterpreterSettings


def llamacpp_model(requested: str | None, configured: str | None) -> str | None:
    """The GGUF file of the llamacpp back-end: a requested model must be an allowed name (never a
    path: ModelNotAllowed lists the names); the configured one may be a name or a file; None: the
    shipped SmolLM2."""
    if requested is not None:
        reference = resolve_allowed(requested, kind="gguf")
    else:
        reference = allowed_models("gguf").get(configured or "", configured)
    return None if reference in (None, LLAMACPP_PACKAGE) else reference


def build_backend(options: BackendOptions, settings: InterpreterSettings) -> Backend:
    """The back-end `options` names, configured from the service settings (clients are cheap;
    the llama.cpp model is loaded once per process on first use)."""
    common = dict(retries=settings.max_retries, backoff_s=settings.backoff_s, max_tokens=settings.max_tokens)
    if options.backend == "ollama":
        from services.interpreter.backends.ollama import OllamaBackend

        return OllamaBackend(host=settings.ollama_host, model=options.model or settings.ollama_model,
                             timeout_s=settings.request_timeout_s, **common)
    if options.backend == "llamacpp":
        from services.interpreter.backends.llamacpp import LlamaCppBackend

        return LlamaCppBackend(model_path=llamacpp_model(options.model, settings.llamacpp_model_path),
                               n_ctx=settings.llamacpp_ctx, threads=settings.llamacpp_threads,
                               max_models=settings.llamacpp_cached_models,
                               timeout_s=settings.request_timeout_s, **common)
    from services.interpreter.phrases import PhraseBackend

    return PhraseBackend()
