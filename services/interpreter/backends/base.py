"""The one async interface every naming back-end implements, its typed results and errors.

A back-end answers two questions: `name_feature` (candidate labels from evidence) and
`detect` (does a label apply to each of these documents). Failures are typed exceptions
(`BackendTimeout`, `BackendOutputError`, `BackendUnavailable`), retried with exponential
backoff by `with_retries`; nothing that looks like a label is ever made up on failure.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from contracts.interpret import BackendName

T = TypeVar("T")


class BackendError(Exception):
    """A back-end could not answer. `retryable` says whether asking again may help."""

    retryable = True


class BackendTimeout(BackendError):
    """The call did not finish within the configured time."""


class BackendOutputError(BackendError):
    """The model answered something that is not the JSON asked for (or only copies of documents)."""


class BackendUnavailable(BackendError):
    """The server or model cannot be reached or loaded."""


class BackendUnsupported(BackendError):
    """The back-end cannot do this at all (e.g. detection without a language model)."""

    retryable = False


class LabelCandidate(BaseModel):
    label: str = Field(min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=2000)


@dataclass(frozen=True)
class NamingRequest:
    """What a back-end names a feature from. Texts are excerpts; ids are dataset positions."""

    feature: int
    activating: Sequence[str]
    """Excerpts of activating documents, strongest first."""
    non_activating: Sequence[str]
    """Non-activating documents (random and hard negatives, interleaved)."""
    activating_ids: Sequence[int] = ()
    non_activating_ids: Sequence[int] = ()
    hard_negative_ids: Sequence[int] = ()
    """Non-activating documents nearest the activating ones: what tells this feature from its topic."""
    hints: Sequence[str] = ()
    """Top contrastive keywords, offered to language models."""
    candidates: int = 3
    temperature: float = 0.3


@dataclass(frozen=True)
class NamingResult:
    candidates: list[LabelCandidate]
    model: str | None
    prompt_version: str | None
    extra: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """One naming back-end. Implementations are safe to share across tasks of one event loop."""

    name: BackendName
    model: str | None = None

    @abstractmethod
    async def name_feature(self, request: NamingRequest) -> NamingResult:
        """Candidate labels, best first; raises BackendError on failure."""

    async def detect(self, label: str, description: str | None, texts: Sequence[str]) -> list[bool]:
        """For each text, whether the label applies; raises BackendError on failure."""
        raise BackendUnsupported(f"the {self.name} back-end cannot judge documents")


async def with_retries(call: Callable[[int], Awaitable[T]], *, retries: int, backoff_s: float,
                       rng: random.Random | None = None) -> T:
    """`call(attempt)` until it succeeds; retryable BackendErrors wait backoff·2^attempt (±25 %)."""
    rng = rng or random.Random()
    for attempt in range(retries + 1):
        try:
            return await call(attempt)
        except BackendError as exc:
            if not exc.retryable or attempt == retries:
                raise
            await asyncio.sleep(backoff_s * 2 ** attempt * rng.uniform(0.75, 1.25))
    raise AssertionError("unreachable")


# -- parsing model output ---------------------------------------------------------------------
def naming_schema(n: int) -> dict[str, Any]:
    """JSON schema of a naming answer: exactly n candidates with a short label each."""
    item = {
        "type": "object",
        "properties": {"label": {"type": "string", "maxLength": 60},
                       "description": {"type": "string", "maxLength": 300}},
        "required": ["label", "description"],
    }
    return {"type": "object", "properties": {"candidates": {"type": "array", "items": item,
                                                             "minItems": 1, "maxItems": n}},
            "required": ["candidates"]}


DETECT_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"applies": {"type": "boolean"}}, "required": ["applies"],
}


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c))


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", _fold(text))


def copies_document(label: str, documents: Sequence[str], ngram: int = 4, max_words: int = 8) -> bool:
    """A label of more than `max_words` words, or one sharing `ngram` consecutive words with a document."""
    words = _words(label)
    if len(words) > max_words:
        return True
    if len(words) < ngram:
        return False
    grams = {tuple(words[i:i + ngram]) for i in range(len(words) - ngram + 1)}
    for doc in documents:
        dw = _words(doc)
        if any(tuple(dw[i:i + ngram]) in grams for i in range(len(dw) - ngram + 1)):
            return True
    return False


#: Words of our prompts that a small model echoes as a "label".
PROMPT_ECHOES = frozenset({"activating", "non activating", "nonactivating", "label", "description", "feature",
                           "concept", "candidates", "document", "documents", "none"})


def echoes_prompt(label: str) -> bool:
    """A label with fewer than 3 letters, or only a word of the prompt (e.g. 'ACTIVATING')."""
    words = _words(label)
    return sum(len(w) for w in words) < 3 or " ".join(words) in PROMPT_ECHOES


def parse_candidates(content: str, documents: Sequence[str], n: int) -> list[LabelCandidate]:
    """A naming answer's JSON → its candidates, copies of documents and duplicates dropped.

    Raises BackendOutputError when the text is not the JSON asked for or nothing usable is left.
    """
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        raise BackendOutputError(f"not JSON: {exc.msg} at {exc.pos}") from None
    items = data.get("candidates") if isinstance(data, dict) else None
    if isinstance(data, dict) and items is None and "label" in data:
        items = [data]
    if not isinstance(items, list):
        raise BackendOutputError("no 'candidates' list in the answer")
    out: list[LabelCandidate] = []
    seen: set[str] = set()
    for item in items[: max(n, 1)]:
        try:
            cand = LabelCandidate.model_validate(item)
        except ValidationError:
            continue
        cand.label = " ".join(cand.label.split()).strip(" .:;,\"'")
        key = _fold(cand.label)
        if not cand.label or key in seen or echoes_prompt(cand.label) or copies_document(cand.label, documents):
            continue
        seen.add(key)
        out.append(cand)
    if not out:
        raise BackendOutputError("no usable candidate (empty, malformed or copied from a document)")
    return out


def parse_detection(content: str) -> bool:
    """`{"applies": true}` → True; anything else raises BackendOutputError."""
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        raise BackendOutputError(f"not JSON: {exc.msg}") from None
    value = data.get("applies") if isinstance(data, dict) else None
    if not isinstance(value, bool):
        raise BackendOutputError("no boolean 'applies' in the answer")
    return value


@dataclass(frozen=True)
class FamilyRequest:
    parent: str
    """The parent feature's label."""
    children: Sequence[str]
    """The children's labels."""
    candidates: int = 3
    temperature: float = 0.3


class FamilyNamer(ABC):
    @abstractmethod
    async def name_family(self, request: FamilyRequest) -> NamingResult:
        """Candidate labels for a family from its members' labels."""
