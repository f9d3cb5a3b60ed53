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
    copies_input: bool = False
    """The label holds a verbatim run of COPY_WORDS words of one excerpt it was named from."""


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
    near_miss_ids: Sequence[int] = ()
    """Near misses never held out: the feature's weakest activations and segments of features that co-fire with it."""
    hints: Sequence[str] = ()
    """Top contrastive keywords, offered to language models."""
    candidates: int = 3
    temperature: float = 0.3
    language: str = "English"
    """The language names are written in: the corpus's (naming.corpus_language)."""


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
LABEL_CHARS = 60
"""A name's length in characters (the JSON schema's maxLength: the grammar stops a copied sentence)."""
DESCRIPTION_CHARS = 240


def naming_schema(n: int, description_chars: int = DESCRIPTION_CHARS) -> dict[str, Any]:
    """JSON schema of a naming answer: 1 to n candidates, each a short label and a one-sentence description
    of at most `description_chars`.

    llama.cpp and Ollama turn it into a grammar, so the lengths bound what the model can write (and so
    how many tokens it generates: most of a small model's naming time)."""
    item = {
        "type": "object",
        "properties": {"label": {"type": "string", "minLength": 3, "maxLength": LABEL_CHARS},
                       "description": {"type": "string", "maxLength": description_chars}},
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


LABEL_WORDS = 8
"""Words of a label at most: a longer one is a sentence, not a name (dropped)."""
COPY_WORDS = 6
"""A run of this many words of one excerpt, verbatim in a label, makes the label a copy (`copies_input`)."""


def too_long(label: str, max_words: int = LABEL_WORDS) -> bool:
    return len(_words(label)) > max_words


def copies_input(label: str, excerpts: Sequence[str], min_words: int = COPY_WORDS) -> bool:
    """Whether `label` holds `min_words` consecutive words (case and accents folded, punctuation
    ignored) that also stand consecutively in one of `excerpts`."""
    words = _words(label)
    if len(words) < min_words:
        return False
    grams = {tuple(words[i:i + min_words]) for i in range(len(words) - min_words + 1)}
    for text in excerpts:
        dw = _words(text)
        if any(tuple(dw[i:i + min_words]) in grams for i in range(len(dw) - min_words + 1)):
            return True
    return False


#: Words of our prompts (v1 to v3) that a small model echoes as a "label".
PROMPT_WORDS = frozenset({"activating", "non", "nonactivating", "label", "labels", "description", "feature",
                          "concept", "candidate", "candidates", "document", "documents", "none", "firing", "other",
                          "keywords", "excerpt", "excerpts"})
#: A list number or a heading of the prompt that a small model writes before its label ('FIRING: 1. …').
_ECHOED_PREFIX = re.compile(r"^(?:(?:firing|other|keywords|activating|non-activating)\s*:\s*|\d+\s*[.)]\s*)+",
                            re.IGNORECASE)


def echoes_prompt(label: str) -> bool:
    """A label with fewer than 3 letters, or only words of the prompt and numbers (e.g. 'FIRING', 'Candidate 2')."""
    words = [w for w in _words(label) if not w.isdigit()]
    return sum(len(w) for w in words) < 3 or all(w in PROMPT_WORDS for w in words)


def parse_candidates(content: str, documents: Sequence[str], n: int) -> list[LabelCandidate]:
    """A naming answer's JSON → its candidates: duplicates, echoes of the prompt and labels of more than
    LABEL_WORDS words dropped; copies of `documents` kept but flagged (`copies_input`), after the others.

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
        cand.label = _ECHOED_PREFIX.sub("", " ".join(cand.label.split())).strip(" .:;,\"'")
        key = _fold(cand.label)
        if not cand.label or key in seen or echoes_prompt(cand.label) or too_long(cand.label):
            continue
        seen.add(key)
        cand.copies_input = copies_input(cand.label, documents)
        out.append(cand)
    if not out:
        raise BackendOutputError("no usable candidate (empty, malformed, too long or an echo of the prompt)")
    return sorted(out, key=lambda c: c.copies_input)  # stable: the model's order otherwise


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
