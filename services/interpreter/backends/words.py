"""Words of a text as naming reads them: lower case, folded without accents, split at apostrophes; content words
(not stop-words, or a negation cue) and the terms a corpus is indexed by (services/interpreter/backends/keywords.py)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from services.interpreter.backends.stopwords import STOP_WORDS

_WORD = re.compile(r"[^\W\d_]{2,}")
MAX_NGRAM = 5
"""Longest phrase, in words (stop-words inside included): "pcr nei limiti", "non evidenza di bronchiolite"."""
CUE_WORDS = frozenset("non no not senza without nor never neither nessun nessuna nessuno mai".split())
"""Negation words (Italian and English, folded): stop-words, yet they may start or end a phrase and stand
alone as a term, since "non bronchiolite" and "bronchiolite" are different names."""


def fold(text: str) -> str:
    """Lower case without accents: 'Attività' → 'attivita'."""
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c))


def _is_content(word: str) -> bool:
    return word in CUE_WORDS or (len(word) >= 3 and word not in STOP_WORDS)


_WORD_INFO: dict[str, tuple[str, bool]] = {}
"""surface (lower case) → (folded, content?): words recur, and folding is the tokeniser's cost."""


def _word_info(surface: str) -> tuple[str, bool]:
    info = _WORD_INFO.get(surface)
    if info is None:
        word = fold(surface)
        info = (word, _is_content(word))
        if len(_WORD_INFO) < 1_000_000:  # bounded: a corpus' vocabulary, not its text
            _WORD_INFO[surface] = info
    return info


def tokens(text: str) -> list[tuple[str, str, int, int, bool, str]]:
    """(folded word, surface, start, end, content?, gap before it) for each word of `text`; the gap is
    the text between it and the previous word with spaces and apostrophes stripped ('' or ',' …)."""
    out = []
    lowered, end = text.lower(), 0
    for match in _WORD.finditer(lowered):
        surface = match.group()
        word, content = _word_info(surface)
        start, stop = match.span()
        gap = lowered[end:start]
        gap = "" if gap == " " else gap.strip(" '’\t")
        if lowered[stop:stop + 1] in ("'", "’"):
            surface += "'"  # elided article: shown glued to the next word ("dell'ospedale")
        end = stop
        out.append((word, surface, start, stop, content, gap))
    return out


def surfaces(text: str) -> set[str]:
    """The distinct words of `text` as written, lower case: folding each gives `folded_words(text)`'s set."""
    return set(_WORD.findall(text.lower()))


def folded_words(text: str) -> list[str]:
    """The folded words of `text`: those of `tokens(text)`, without their places and gaps."""
    return [_word_info(surface)[0] for surface in _WORD.findall(text.lower())]


def terms(text: str, surfaces: dict[str, Counter[str]] | None = None) -> list[str]:
    """Content words (folded) and phrases of 2-MAX_NGRAM adjacent words (stop-words allowed inside,
    never first or last, no punctuation or digit between them). `tokens`' words and gaps, read in one pass (a
    corpus's every text goes through here once, for the term index)."""
    out: list[str] = []
    words: list[str] = []
    contents: list[bool] = []
    lowered, end, seg_start = text.lower(), 0, 0
    for i, match in enumerate(_WORD.finditer(lowered)):
        surface = match.group()
        word, content = _word_info(surface)
        start, stop = match.span()
        gap = lowered[end:start]
        if gap != " " and gap.strip(" '’\t"):
            seg_start = i  # punctuation or a number between words ends a phrase
        end = stop
        words.append(word)
        contents.append(content)
        if surfaces is not None:
            if lowered[stop:stop + 1] in ("'", "’"):
                surface += "'"  # as tokens shows an elided article
            counts = surfaces.get(word)
            if counts is None:  # not setdefault(word, Counter()): a Counter made per word of the corpus
                counts = surfaces[word] = Counter()
            counts[surface] += 1
        if not content:
            continue
        out.append(word)
        for j in range(max(seg_start, i - MAX_NGRAM + 1), i):
            if contents[j]:
                out.append(" ".join(words[j:i + 1]))
    return out
