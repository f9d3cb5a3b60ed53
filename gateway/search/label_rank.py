"""How label search ranks the features a query finds: by how well the name holds, then how specific it is.

Pure (no database): the label search of the API and the search box's completion rank the rows the database
finds with `rank_labels`, and bench/status.py ranks a run's names with the same function, matching them
with `label_matches` (the full-text index's rule: every word of the query begins a word of the label or the
description; a word between double quotes must be a whole word of it). Order: names that hold the query
themselves before those found through their description only (a language model's sentence, or the keywords
back-end's "In N of every 100 of its strongest segments …": typing "bron" must offer the "bronchiolite …" names
before "torace libero", whose description mentions bronchiolitis; the keyword evidence itself is not indexed),
then names holding every
word of the query as a whole word (`no` finds "no rash" before "normal"), then reliable names, then the held-out
score (best first), then the fewer notes a name selects (the more specific), then index. Each entry says how
many notes `label:"…"` would select: those where the feature reaches its name's threshold (any activation
where it has none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class LabelEntry:
    index: int
    label: str
    description: str | None
    score: float | None
    reliable: bool | None
    threshold: float | None
    density: float = 0.0


MAX_TERMS = 16
"""Words of a search box kept (the rest ignored): each is one term of the full-text query."""


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def query_terms(query: str) -> list[tuple[str, bool]]:
    """The words of a search box, case-folded, each with whether it is exact: a word between double quotes
    matches a whole word of a label or description, any other word begins one (a prefix). A quote left open
    quotes nothing. What the database's full-text query and `label_matches` both read."""
    parts = query.casefold().split('"')
    if len(parts) % 2 == 0:  # an odd number of quotes: the last one is not closed
        parts = [*parts[:-2], parts[-2] + " " + parts[-1]]
    return [(w, i % 2 == 1) for i, part in enumerate(parts) for w in re.findall(r"\w+", part)][:MAX_TERMS]


def _entry_words(entry: LabelEntry) -> set[str]:
    return set(_words(f"{entry.label} {entry.description or ''}"))


def _matches(terms: list[tuple[str, bool]], words: set[str]) -> bool:
    return bool(terms) and all(t in words if exact else any(w.startswith(t) for w in words) for t, exact in terms)


def label_matches(query: str, entry: LabelEntry) -> bool:
    """Every word of `query` begins some word of the entry's label or description, or is one where it is quoted
    (as the full-text index)."""
    return _matches(query_terms(query), _entry_words(entry))


def selected(activations: np.ndarray, threshold: float | None) -> np.ndarray:
    """What label:"…" selects of a feature's activations: at or above its name's threshold, above 0 where it
    has none (the expression evaluator and the note counts here read it alike)."""
    return activations >= np.float64(threshold) if threshold is not None and threshold > 0 else activations > 0


def notes_selected(codes: sp.csc_matrix, entry: LabelEntry) -> int:
    """Documents (rows of the CSC codes) where the feature reaches its threshold (> 0 without one)."""
    return int(np.count_nonzero(selected(codes.data[codes.indptr[entry.index]:codes.indptr[entry.index + 1]],
                                         entry.threshold)))


def rank_labels(entries: Iterable[LabelEntry], codes: sp.csc_matrix | None = None,
                query: str | None = None) -> list[tuple[LabelEntry, int | None]]:
    """(entry, notes it selects) in ranking order; notes None without codes. With the `query` that found them,
    the entries whose names hold its words come first, then those holding them as whole words."""
    terms = query_terms(query) if query is not None else []  # parsed once, not once an entry

    def elsewhere(entry: LabelEntry) -> bool:  # the name itself does not hold the query: its evidence does
        return bool(terms) and not _matches(terms, set(_words(entry.label)))

    def partial(entry: LabelEntry) -> bool:  # some word of the query only begins a word of the entry
        words = _entry_words(entry) if terms else set()
        return bool(terms) and not all(t in words for t, _ in terms)

    counted = [(e, notes_selected(codes, e) if codes is not None else None) for e in entries]
    return sorted(counted, key=lambda c: (elsewhere(c[0]), partial(c[0]), not c[0].reliable, -(c[0].score or 0.0),
                                          c[1] if c[1] is not None else c[0].density, c[0].index))


def search_names(query: str, entries: Iterable[LabelEntry], codes: sp.csc_matrix | None = None,
                 limit: int = 20) -> list[tuple[LabelEntry, int | None]]:
    """The `limit` best entries matching `query`, ranked."""
    terms = query_terms(query)
    return rank_labels((e for e in entries if _matches(terms, _entry_words(e))), codes, query)[:limit]


def holds_word(label: str, stems: Iterable[str]) -> bool:
    """Whether some word of the label (or a "?" in it) begins with one of the stems."""
    words = re.findall(r"\w+|\?", label.casefold())
    return any(w.startswith(s) for w in words for s in stems)


def quote_label(label: str) -> str:
    """The label as it goes between the quotes of label:"…" (the grammar's two escapes)."""
    return label.replace("\\", "\\\\").replace('"', '\\"')


def quoted_label(label: str) -> str:
    """label:"…" for this name."""
    return f'label:"{quote_label(label)}"'


def expression_from_names(found: dict[str, list[str]], topic: Iterable[str], cues: Iterable[str],
                          scoped: bool = True) -> tuple[str, list[str], list[str]]:
    """The expression a user writes from label searches: `found` holds, for each word typed, the reliable names
    the search returned, best first. The topic's names (a topic name that also holds a cue word counts as a cue),
    and NOT any cue's name, within one segment where `scoped`: `SEGMENT((label:"t" OR …) AND NOT (label:"c" OR
    …))`; with no topic word, `NOT (cues)`; with nothing found, an expression that matches nothing. Returns
    (expression, topic names, cue names)."""
    topic, cues = tuple(topic), tuple(cues)
    topic_names = list(dict.fromkeys(n for w in topic for n in found.get(w, []) if not holds_word(n, cues)))
    cue_names = list(dict.fromkeys([*(n for w in cues for n in found.get(w, [])),
                                    *(n for w in topic for n in found.get(w, []) if holds_word(n, cues))]))
    cue_part = " OR ".join(map(quoted_label, cue_names))
    if topic_names:
        inner = "(" + " OR ".join(map(quoted_label, topic_names)) + (f") AND NOT ({cue_part}" if cue_part else "") + ")"
    else:
        inner = f"NOT ({cue_part})" if cue_part else "F0 < 0"
    return (f"SEGMENT({inner})" if scoped else inner), topic_names, cue_names
