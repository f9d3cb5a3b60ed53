"""Language-model back-ends behind one async interface (`base.Backend`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.interpret import BackendOptions

if TYPE_CHECKING:
    from services.interpreter.backends.base import Backend
    from services.interpreter.config import InterpreterSettings


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

        return LlamaCppBackend(model_path=options.model or settings.llamacpp_model_path,
                               n_ctx=settings.llamacpp_ctx, threads=settings.llamacpp_threads,
                               timeout_s=settings.request_timeout_s, **common)
    from services.interpreter.backends.keywords import KeywordsBackend

    return KeywordsBackend()
