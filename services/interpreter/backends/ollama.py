"""The `ollama` back-end: a model served by Ollama, through the official `ollama` client.

Structured outputs: `format` carries the JSON schema, which Ollama turns into a grammar.
"""

from __future__ import annotations

from typing import Any

import httpx
import ollama

from services.interpreter.backends.base import BackendOutputError, BackendTimeout, BackendUnavailable
from services.interpreter.backends.chat import ChatBackend


class OllamaBackend(ChatBackend):
    name = "ollama"

    def __init__(self, *, host: str, model: str, timeout_s: float = 120.0, **kwargs: Any) -> None:
        super().__init__(model=model, **kwargs)
        self.host = host
        self.client = ollama.AsyncClient(host=host, timeout=timeout_s)

    async def _chat(self, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float,
                    max_tokens: int) -> str:
        try:
            response = await self.client.chat(model=self.model, messages=messages, format=schema,
                                              options={"temperature": temperature, "num_predict": max_tokens})
        except httpx.TimeoutException as exc:
            raise BackendTimeout(f"ollama {self.model}: timed out ({type(exc).__name__})") from None
        except ConnectionError as exc:
            raise BackendUnavailable(f"ollama at {self.host}: {exc}") from None
        except ollama.ResponseError as exc:
            error = BackendUnavailable(f"ollama {self.model}: HTTP {exc.status_code}: {exc.error}")
            error.retryable = exc.status_code >= 500 or exc.status_code == 429
            raise error from None
        content = response.message.content if response.message else None
        if not content:
            raise BackendOutputError(f"ollama {self.model}: empty answer (done_reason {response.done_reason})")
        return content
