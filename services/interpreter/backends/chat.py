"""What the language-model back-ends share: prompts, JSON-schema-constrained chat, parsing.

A subclass implements only `_chat(messages, schema, temperature, max_tokens) -> str`, the raw
JSON text of one answer, raising `BackendTimeout` / `BackendUnavailable` / `BackendOutputError`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from services.interpreter.backends.base import (
    DESCRIPTION_CHARS,
    DETECT_SCHEMA,
    Backend,
    FamilyNamer,
    FamilyRequest,
    NamingRequest,
    NamingResult,
    naming_schema,
    parse_candidates,
    parse_detection,
    with_retries,
)
from services.interpreter.prompts import (
    detect_messages,
    family_messages,
    load_prompt,
    naming_messages,
)

NAMING_PROMPT = 2
"""Version of the naming prompt: v2 asks for noun phrases in the corpus's language, keywords as evidence;
v3 says the same in a third of the tokens (for small local models, whose time goes on every token)."""


class ChatBackend(Backend, FamilyNamer):
    """A back-end that answers prompts with a chat model, each answer retried on failure."""

    #: excerpts a side and characters an excerpt in the naming prompt (small models: fewer).
    max_docs: int = 12
    max_chars: int = 600
    detect_chars: int = 1200
    naming_prompt: int = NAMING_PROMPT
    description_chars: int = DESCRIPTION_CHARS

    def __init__(self, *, model: str, retries: int = 3, backoff_s: float = 1.0, max_tokens: int = 256,
                 naming_prompt: int | None = None, max_docs: int | None = None, max_chars: int | None = None,
                 description_chars: int | None = None) -> None:
        self.model, self.retries, self.backoff_s, self.max_tokens = model, retries, backoff_s, max_tokens
        for name, value in (("naming_prompt", naming_prompt), ("max_docs", max_docs), ("max_chars", max_chars),
                            ("description_chars", description_chars)):
            if value is not None:  # else the class's default
                setattr(self, name, value)

    @abstractmethod
    async def _chat(self, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float,
                    max_tokens: int) -> str:
        """One chat completion constrained to `schema`; the answer's text."""

    async def name_feature(self, request: NamingRequest) -> NamingResult:
        prompt = load_prompt("name_feature", self.naming_prompt)
        messages = naming_messages(prompt, activating=list(request.activating),
                                   non_activating=list(request.non_activating), hints=list(request.hints),
                                   n=request.candidates, max_docs=self.max_docs, max_chars=self.max_chars,
                                   language=request.language)
        shown = [*request.activating, *request.non_activating]  # a copy of any excerpt is flagged

        async def attempt(i: int) -> NamingResult:
            # a retry after a useless answer samples hotter, so it does not repeat itself
            text = await self._chat(messages, naming_schema(request.candidates, self.description_chars),
                                    request.temperature + 0.3 * i, self.max_tokens)
            return NamingResult(parse_candidates(text, shown, request.candidates), self.model, prompt.version)

        return await with_retries(attempt, retries=self.retries, backoff_s=self.backoff_s)

    async def detect(self, label: str, description: str | None, texts: Sequence[str]) -> list[bool]:
        prompt = load_prompt("detect")
        out = []
        for text in texts:
            messages = detect_messages(prompt, label=label, description=description, document=text,
                                       max_chars=self.detect_chars)

            async def attempt(i: int, messages: list[dict[str, str]] = messages) -> bool:
                return parse_detection(await self._chat(messages, DETECT_SCHEMA, 0.2 * i, 16))

            out.append(await with_retries(attempt, retries=self.retries, backoff_s=self.backoff_s))
        return out

    async def name_family(self, request: FamilyRequest) -> NamingResult:
        prompt = load_prompt("name_family")
        messages = family_messages(prompt, parent=request.parent, children=list(request.children),
                                   n=request.candidates)

        async def attempt(i: int) -> NamingResult:
            text = await self._chat(messages, naming_schema(request.candidates),
                                    request.temperature + 0.3 * i, self.max_tokens)
            return NamingResult(parse_candidates(text, [], request.candidates), self.model, prompt.version)

        return await with_retries(attempt, retries=self.retries, backoff_s=self.backoff_s)
