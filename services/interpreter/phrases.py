"""Phrase names: the 1-5 words, as written, that best tell a feature's strongest segments from its near misses.

A candidate phrase is any term of the corpus's TermIndex (a content or negation word, or 2-5 adjacent
words of one clause that start and end with one, function words inside kept: "pcr nei limiti",
"sospetta bronchiolite", "non evidenza di bronchiolite"). Its separation is

    sep(w) = recall among the strongest activating segments - the largest rate among the near misses
             (weak activations, segments of co-firing features) and the random/hard negatives,

so a phrase that is as common in the near misses as in the strongest segments separates nothing, however
frequent. Among phrases that separate about equally, the longer reads better: each extra word adds
PHRASE_BONUS. After those, a covering phrase: one of 2-5 words whose content words' separations sum highest
(covering_phrases), where the best separating phrase is one frequent word and the feature is several.

`name_holds` is the text judge of a name on one segment: every content or negation word of the name occurs
in it (case and accents folded, a word matched by its Snowball stem in the corpus's language, so that
"sospetta" holds on "sospetto" and "denies" on "denied", while "bronchiolite" does not hold on "bronchite", as
it did when words were compared by their first six characters); the precision curve of calibration.py counts it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import snowballstemmer

from services.interpreter.backends.base import BackendOutputError, LabelCandidate, NamingRequest, NamingResult
from services.interpreter.backends.keywords import KeywordsBackend, TermIndex, content_words, spread, top_terms
from services.interpreter.backends.words import fold, folded_words, tokens
from services.interpreter.rows import spans

PHRASE_WORDS = 5
"""Longest phrase name, in words."""
COVERING_POOL = 300
"""Phrases (the best separating) among which covering_phrases looks for those holding most of a feature's words."""
PHRASE_BONUS = 0.02
"""Separation one more word is worth: "bronchiolite acuta" over "bronchiolite" when it separates nearly as well."""
STEMMERS = {"it": "italian", "en": "english"}
"""Snowball stemmer of each language names are written in (naming.corpus_language): Italian inflects the ending
(sospetta, sospetto, sospetti → sospett), English too (denies, denied → deni)."""
STEM = 6
"""Characters of a word compared in a language without a stemmer here."""


@dataclass(frozen=True)
class Contrast:
    """Each term's support among a feature's strongest segments and how much more often it occurs there than in
    the segments it is told from, for the terms those segments hold (no other can name them: the cost is the
    evidence's, not the vocabulary's): columns [C] (vocabulary ids, ascending), support [C] (segments of `top`
    holding it), recall [C] (its share of `top`) and worst [C] (its largest rate among the near misses and among
    the random/hard negatives)."""

    columns: np.ndarray
    support: np.ndarray
    recall: np.ndarray
    worst: np.ndarray

    @classmethod
    def of(cls, index: TermIndex, top: Sequence[int], near: Sequence[int], others: Sequence[int]) -> Contrast:
        columns, support = index.present(top)
        rates = [index.counts_at(ids, columns)[0] / len(ids) for ids in (near, others) if len(ids)]
        recall = support / max(len(top), 1)
        return cls(columns, support, recall, np.max(rates, axis=0) if rates else np.zeros_like(recall))

    @property
    def separation(self) -> np.ndarray:
        """[C] recall - worst."""
        return self.recall - self.worst

    def at(self, column: int) -> int:
        """The place of vocabulary id `column` among `columns`."""
        return int(np.searchsorted(self.columns, column))


def phrase_ranking(index: TermIndex, top: Sequence[int], near: Sequence[int], others: Sequence[int], k: int,
                   min_support: int, contrast: Contrast | None = None) -> list[tuple[str, float, float]]:
    """The k best (folded phrase, separation, recall among `top`) of `top` against `near` and `others` (positions in `index`),
    best first; only phrases found in at least `min_support` of `top`, with separation > 0. `contrast`: Contrast.of
    these sets, when already computed."""
    if not len(top):
        return []
    c = contrast or Contrast.of(index, top, near, others)
    n_words = index.n_words[c.columns]  # [C]
    sep = c.separation + PHRASE_BONUS * (n_words - 1)
    sep = np.where((c.support >= min_support) & (n_words <= PHRASE_WORDS) & (c.recall > c.worst), sep, -np.inf)
    sep = spread(sep, c.columns, len(index.vocab))  # [V]: the selection of the best over every term, as before
    head = min(len(sep), 10 * k)
    if head == 0:
        return []
    cut = np.argpartition(-sep, head - 1)[:head] if head < len(sep) else np.arange(len(sep))
    cut = cut[np.lexsort((cut, -sep[cut]))]  # best first, ties by vocabulary order (deterministic)
    cut = cut[np.isfinite(sep[cut])]
    return list(zip(index.vocab[cut].tolist(), sep[cut].tolist(), c.recall[np.searchsorted(c.columns, cut)].tolist()))


def covering_phrases(index: TermIndex, contrast: Contrast, k: int, min_support: int = 2,
                     pool: int = COVERING_POOL) -> list[tuple[str, float, float]]:
    """The 10·k best (folded phrase of 2-5 words, coverage, recall) by coverage: the summed separation of the
    distinct content words it holds, each counted where it separates. Phrases found in at least `min_support` of
    the strongest segments that separate themselves; of those, the `pool` that separate most are looked at.
    phrase_ranking favours what most of the strongest segments say, often one word ("hepatitis"); a phrase that
    holds several of the words setting them apart ("chronic gastritis and gastric acid") reads more of the
    feature, however rarely it is written verbatim."""
    sep, cols = contrast.separation, contrast.columns  # [C], vocabulary ids [C] ascending
    n_words = index.n_words[cols]
    multi = np.flatnonzero((n_words >= 2) & (n_words <= PHRASE_WORDS) & (contrast.support >= min_support) & (sep > 0))
    multi = multi[np.argsort(-sep[multi], kind="stable")[:pool]]  # places among cols
    if not len(multi):
        return []
    gain = np.where((n_words == 1) & (sep > 0), sep, 0).astype(np.float64)  # [C]: what a word adds
    starts, words = index.words_of
    lo, hi = starts[cols[multi]], starts[cols[multi] + 1]
    # a phrase's words are in every segment holding it: among cols too
    held = np.searchsorted(cols, words[spans(lo, hi)])
    cover = np.bincount(np.repeat(np.arange(len(multi)), hi - lo), weights=gain[held],
                        minlength=len(multi))  # [len(multi)]: each phrase's words' separations summed
    best = np.lexsort((multi, -cover))[: 10 * k]  # ties by vocabulary order
    return [(str(index.vocab[cols[multi[j]]]), float(cover[j]), float(contrast.recall[multi[j]])) for j in best]


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


@lru_cache(maxsize=100_000)
def required_words(label: str, language: str) -> tuple[str, ...]:
    """The stems of the folded content and negation words of a name (names recur: a feature's are looked up
    once for its calibration, and again wherever another feature proposes them)."""
    return tuple(stem(t[0], language) for t in tokens(label) if t[4])


def word_stems(text: str, language: str) -> frozenset[str]:
    """The stems of the (folded) words of `text`."""
    return frozenset(stem(word, language) for word in set(folded_words(text)))


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
    """The `keywords` back-end naming by phrases. Candidates, each a phrase as written: the `candidates` best
    distinct phrases of `phrase_ranking` (strongest segments against near misses, random and hard negatives);
    the `contrastive` terms most frequent in the strongest segments against the non-activating ones (log-odds,
    as the keyword evidence is ranked: a topic word that every near miss shares, "rats", separates nothing from
    them, yet it is the feature's topic and often holds where a longer phrase does not); and the `covering`
    phrases that hold most of its separating words (covering_phrases). The Namer keeps the one that tells the
    selection documents apart best; the contrastive term list stays the evidence shown under the name
    (Namer.keywords), no longer a name. Without near misses, the random and hard negatives alone are the contrast."""

    prompt_version = "phrases.v2"

    def __init__(self, index: TermIndex | None = None, *, candidates: int = 4, contrastive: int = 2,
                 covering: int = 2, **kwargs: object) -> None:
        super().__init__(index, **kwargs)  # type: ignore[arg-type]
        self.candidates, self.contrastive, self.covering = candidates, contrastive, covering

    async def name_feature(self, request: NamingRequest) -> NamingResult:
        index, request = self._index_for(request)
        top = list(request.activating_ids)
        others = [*request.non_activating_ids, *request.hard_negative_ids]
        min_support = max(2, int(0.1 * len(top)))
        contrast = Contrast.of(index, top, list(request.near_miss_ids), others)
        ranked = phrase_ranking(index, top, (), (), 10 * self.candidates, min_support, contrast)
        phrases = distinct_phrases(ranked, self.candidates)
        if not phrases:
            raise BackendOutputError("no phrase separates its strongest segments from its near misses and other "
                                     "segments")
        found = {term: (sep, recall) for term, sep, recall in ranked}
        cands = [LabelCandidate(label=index.display(p), description=(
            f"In {round(100 * found[p][1])} of every 100 of its strongest segments; separation {found[p][0]:.2f} "
            "against its near misses and other segments.")) for p in phrases]
        shown = {c.label for c in cands}
        if self.contrastive:
            _, columns, z = self.ranked_columns(request, 10 * self.contrastive,
                                                present=(contrast.columns, contrast.support))
            column = {str(index.vocab[i]): i for i in columns}
            for term in top_terms(list(zip(column, z)), self.contrastive):
                if (label := index.display(term)) not in shown:
                    shown.add(label)
                    cands.append(LabelCandidate(label=label, description=(
                        f"In {round(100 * contrast.recall[contrast.at(column[term])])} of every 100 of its strongest segments; "
                        "more often there than in the other segments (log-odds).")))
        if self.covering:  # each adding a content word that no lexical phrase holds
            covering = covering_phrases(index, contrast, self.covering)
            covers = {term: (cover, recall) for term, cover, recall in covering}
            more = distinct_phrases([*((p, 0.0, 0.0) for p in phrases), *covering], len(phrases) + self.covering)[len(phrases):]
            cands += [LabelCandidate(label=index.display(p), description=(
                f"In {round(100 * covers[p][1])} of every 100 of its strongest segments; holds several of the words "
                f"that set them apart (their separations sum to {covers[p][0]:.2f}).")) for p in more
                if index.display(p) not in shown]
        return NamingResult(cands, None, self.prompt_version)
