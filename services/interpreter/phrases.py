"""Phrase names: the 1-5 words, as written, that best tell a feature's strongest segments from its near misses.

A candidate phrase is any term of the corpus's TermIndex (a content or negation word, or 2-5 adjacent
words of one clause that start and end with one, function words inside kept: "pcr nei limiti",
"sospetta bronchiolite", "non evidenza di bronchiolite"). Its separation is

    sep(w) = recall among the strongest activating segments - the largest rate among the near misses
             (weak activations, segments of co-firing features) and the random/hard negatives,

so a phrase that is as common in the near misses as in the strongest segments separates nothing, however
frequent. Among phrases that separate about equally, the longer reads better: each extra word adds
PHRASE_BONUS. `name_holds` is the text judge of a name on one segment: every content or negation word of
the name occurs in it (case and accents folded, a word matched by its Snowball stem in the corpus's language,
so that "sospetta" holds on "sospetto" and "denies" on "denied", while "bronchiolite" does not hold on
"bronchite", as it did when words were compared by their first six characters); the precision curve of
calibration.py counts it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import snowballstemmer

from services.interpreter.backends.base import BackendOutputError, LabelCandidate, NamingRequest, NamingResult
from services.interpreter.backends.keywords import KeywordsBackend, TermIndex, content_words, fold, tokens

PHRASE_WORDS = 5
"""Longest phrase name, in words."""
PHRASE_BONUS = 0.02
"""Separation one more word is worth: "bronchiolite acuta" over "bronchiolite" when it separates nearly as well."""
STEMMERS = {"it": "italian", "en": "english"}
"""Snowball stemmer of each language names are written in (naming.corpus_language): Italian inflects the ending
(sospetta, sospetto, sospetti → sospett), English too (denies, denied → deni)."""
STEM = 6
"""Characters of a word compared in a language without a stemmer here."""


def phrase_ranking(index: TermIndex, top: Sequence[int], near: Sequence[int], others: Sequence[int], k: int,
                   min_support: int) -> list[tuple[str, float, float]]:
    """The k best (folded phrase, separation, recall among `top`) of `top` against `near` and `others` (positions in `index`),
    best first; only phrases found in at least `min_support` of `top`, with separation > 0."""
    if not len(top):
        return []
    y_top = index.counts(top)  # [V]
    recall = y_top / len(top)
    rates = [index.counts(ids) / len(ids) for ids in (near, others) if len(ids)]
    worst = np.max(rates, axis=0) if rates else np.zeros_like(recall)  # [V]
    sep = recall - worst + PHRASE_BONUS * (index.n_words - 1)
    sep = np.where((y_top >= min_support) & (index.n_words <= PHRASE_WORDS) & (recall > worst), sep, -np.inf)
    head = min(len(sep), 10 * k)
    if head == 0:
        return []
    cut = np.argpartition(-sep, head - 1)[:head] if head < len(sep) else np.arange(len(sep))
    cut = cut[np.lexsort((cut, -sep[cut]))]  # best first, ties by vocabulary order (deterministic)
    return [(str(index.vocab[i]), float(sep[i]), float(recall[i])) for i in cut if np.isfinite(sep[i])]


def distinct_phrases(ranked: Sequence[tuple[str, float, float]], k: int) -> list[str]:
    """The k best phrases of `ranked`, each adding a content word the ones before it lack (so the
    alternatives of "bronchiolite" are "bronchiolite acuta" or "diagnosi di bronchiolite", not "bronchiolite" again)."""
    chosen: list[str] = []
    seen: list[set[str]] = []
    for term, *_ in ranked:
        words = content_words(term)
        if any(words <= s for s in seen):
            continue
        chosen.append(term)
        seen.append(words)
        if len(chosen) == k:
            break
    return chosen


_LOCAL = threading.local()


def _stemmer(language: str) -> object | None:
    """This thread's Snowball stemmer for `language` (a stemmer keeps its word in its own state while it works:
    one instance per thread, as naming jobs may run side by side)."""
    name = STEMMERS.get(language)
    if name is None:
        return None
    stemmers = _LOCAL.__dict__.setdefault("stemmers", {})
    if name not in stemmers:
        stemmers[name] = snowballstemmer.stemmer(name)
    return stemmers[name]


@lru_cache(maxsize=200_000)
def stem(word: str, language: str) -> str:
    """The stem of a folded word in `language` (Snowball; its first STEM characters in another language)."""
    stemmer = _stemmer(language)
    return stemmer.stemWord(word) if stemmer is not None else word[:STEM]  # type: ignore[attr-defined]


def required_words(label: str, language: str) -> list[str]:
    """The stems of the folded content and negation words of a name."""
    return [stem(t[0], language) for t in tokens(label) if t[4]]


def word_stems(text: str, language: str) -> frozenset[str]:
    """The stems of the (folded) words of `text`."""
    return frozenset(stem(t[0], language) for t in tokens(text))


def name_holds(label: str, text: str | frozenset[str], language: str) -> bool:
    """Whether every content or negation word of `label` occurs in `text` (folded, by stem); `text` may be
    given as its word_stems already."""
    need = required_words(label, language)
    have = word_stems(text, language) if isinstance(text, str) else text
    return bool(need) and all(w in have for w in need)


def holds_mask(label: str, stems: Sequence[frozenset[str]], language: str) -> np.ndarray:
    """bool [len(stems)]: name_holds on each text, given by its word_stems."""
    need = required_words(label, language)
    return np.array([bool(need) and all(w in have for w in need) for have in stems], dtype=bool)


def is_phrase(label: str, evidence: Sequence[str]) -> bool:
    """A name of 2 or more words found verbatim (folded) in one of the evidence texts: what phrase_fraction counts."""
    words = label.split()
    if len(words) < 2 or "," in label:
        return False
    needle = " ".join(fold(label).split())
    return any(needle in " ".join(fold(t).split()) for t in evidence)


class PhraseBackend(KeywordsBackend):
    """The `keywords` back-end naming by phrases: candidates are the PHRASE_CANDIDATES best distinct phrases of
    `phrase_ranking` (strongest segments against near misses, random and hard negatives), plainest last only
    when they tie; the contrastive term list stays the evidence shown under the name (Namer.keywords), no
    longer a name. Without near misses, the random and hard negatives alone are the contrast."""

    prompt_version = "phrases.v1"

    def __init__(self, index: TermIndex | None = None, *, candidates: int = 4, **kwargs: object) -> None:
        super().__init__(index, **kwargs)  # type: ignore[arg-type]
        self.candidates = candidates

    async def name_feature(self, request: NamingRequest) -> NamingResult:
        index, request = self._index_for(request)
        top = list(request.activating_ids)
        others = [*request.non_activating_ids, *request.hard_negative_ids]
        min_support = max(2, int(0.1 * len(top)))
        ranked = phrase_ranking(index, top, list(request.near_miss_ids), others, 10 * self.candidates, min_support)
        phrases = distinct_phrases(ranked, self.candidates)
        if not phrases:
            raise BackendOutputError("no phrase separates its strongest segments from its near misses and other "
                                     "segments")
        found = {term: (sep, recall) for term, sep, recall in ranked}
        cands = [LabelCandidate(label=index.display(p), description=(
            f"In {round(100 * found[p][1])} of every 100 of its strongest segments; separation {found[p][0]:.2f} "
            "against its near misses and other segments.")) for p in phrases]
        return NamingResult(cands, None, self.prompt_version)

