"""The `keywords` back-end: no language model, contrastive term statistics.

Terms — content words and phrases of 2-4 words that start and end with a content word
("antibiotic resistance", "trauma cranico minore", "infection of the bladder") — are ranked by
the log-odds ratio with an informative Dirichlet prior of Monroe, Colaresi & Quinn (2008),
"Fightin' Words", eq. 16-22: with y_a, y_b the document frequencies of term w in the activating
and non-activating sets, α_w = α0 · the term's share of the background corpus,

    δ_w = log((y_a+α_w) / (n_a+α0-y_a-α_w)) - log((y_b+α_w) / (n_b+α0-y_b-α_w)),
    z_w = δ_w / sqrt(1/(y_a+α_w) + 1/(y_b+α_w)),

Candidates, each read like a name: the best phrase alone, the top terms, and short extractive
spans of the activating excerpts (centred on the chunk that drives the feature) that hold the
most top terms. Italian and English: text is lower-cased, compared without accents (so
"attività" and "attivita" are one term, shown in its commonest written form), split at
apostrophes (so "dell'ospedale" gives "ospedale"), stop-words never start or end a term.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cached_property
from itertools import accumulate

import numpy as np
import scipy.sparse as sp

from services.interpreter.backends.base import (Backend, BackendOutputError, FamilyNamer, FamilyRequest,
                                                LabelCandidate, NamingRequest, NamingResult)
from services.interpreter.backends.term_scan import Scan, scan, scan_corpus
from services.interpreter.backends.words import MAX_NGRAM, _is_content, fold, tokens
from services.interpreter.corpus import Corpus
from services.interpreter.rows import row_entries

_SENTENCE_END = re.compile(r"[.;:!?()\[\]{}\n]")
LABEL_WORDS = 8
"""Longest label, in words (a term list's words together): short enough to read as a name."""
SPAN_WORDS = LABEL_WORDS
"""Longest extractive span, in words."""


def label_words(label: str) -> int:
    return len(label.replace(",", " ").split())


class TermIndex:
    """Binary document-term matrix of a corpus, built once, rows sliced per feature."""

    def __init__(self, texts: Iterable[str] | Scan, min_df: int = 2) -> None:
        found = texts if isinstance(texts, Scan) else scan(texts)
        vocab, self.surfaces, n = found.vocab, found.surfaces, found.n
        matrix = sp.csr_matrix((np.ones(len(found.rows), np.float32), (found.rows, found.cols)), shape=(n, len(vocab)))
        del found
        df = np.asarray(matrix.sum(0)).ravel()
        keep = np.flatnonzero(df >= min_df)
        names = np.array(list(vocab), dtype=object)
        self.vocab = names[keep]  # [V] folded terms
        self.matrix = matrix[:, keep].tocsr()  # [docs, V] 0/1: only its rows' entries are read (present, counts_at)
        self.matrix.data = np.ones(self.matrix.nnz, np.int8)  # not float32: 3 bytes an entry fewer (70 MB at 200,000 notes)
        self.background = df[keep]  # [V] document frequency in the corpus
        self.prior = self.background / max(self.background.sum(), 1e-12)  # [V], cached for log_odds_z
        self.n_words = np.array([t.count(" ") + 1 for t in self.vocab], dtype=np.int64)  # [V]
        self._shown: dict[str, str] = {}  # display's answers
        self._places = threading.local()  # counts_at's table

    @classmethod
    def of_corpus(cls, corpus: Corpus, min_df: int = 2) -> TermIndex:
        """The index of a corpus's texts (`corpus.text(p)`, `corpus.n_docs`), read by two processes when it is large
        (term_scan.scan_corpus): the same index as one pass gives."""
        return cls(scan_corpus(corpus.text, corpus.n_docs, sizes=corpus.text_sizes()), min_df)

    def present(self, rows: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(columns, support): the terms found in any of `rows`, ascending, and float32 how many of the rows hold
        each, without a [V] array: what a feature's statistics need."""
        m = self.matrix
        columns, support = np.unique(m.indices[row_entries(m.indptr, np.asarray(rows, np.int64))], return_counts=True)
        return columns.astype(np.int64), support.astype(np.float32)

    def counts_at(self, rows: Sequence[int], columns: np.ndarray) -> tuple[np.ndarray, int]:
        """(float32 counts(rows)[columns], the rows' entries in all): `columns` distinct. Each entry is looked up
        in a [V] table of places, set for `columns` and reset after (one per thread), so the cost is the rows'."""
        m = self.matrix
        place = getattr(self._places, "table", None)
        if place is None:
            place = self._places.table = np.full(len(self.vocab), -1, np.int64)
        place[columns] = np.arange(len(columns))
        try:
            at = place[m.indices[row_entries(m.indptr, np.asarray(rows, np.int64))]]
        finally:
            place[columns] = -1
        return np.bincount(at[at >= 0], minlength=len(columns)).astype(np.float32), len(at)

    @cached_property
    def words_of(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts [V + 1], columns): the single-word terms among each term's distinct content words, term i's
        being columns[starts[i]:starts[i + 1]], ascending (built on first use, once)."""
        column = {str(t): i for i, t in enumerate(self.vocab) if " " not in t}
        found = [sorted({column[w] for w in content_words(str(t)) if w in column}) for t in self.vocab]
        starts = np.concatenate([[0], np.cumsum([len(f) for f in found], dtype=np.int64)])
        return starts, np.fromiter((c for f in found for c in f), np.int64, count=int(starts[-1]))

    def display(self, term: str) -> str:
        """The term as most often written (accents, elisions: "dell'ospedale"); found once a term."""
        shown = self._shown.get(term)
        if shown is None:
            words = [self.surfaces[w].most_common(1)[0][0] if w in self.surfaces else w for w in term.split(" ")]
            shown = self._shown[term] = "".join(s + ("" if s.endswith("'") else " ") for s in words).strip()
        return shown


def log_odds_z(y_a: np.ndarray, y_b: np.ndarray, background: np.ndarray, alpha0: float = 100.0,
               prior: np.ndarray | None = None, totals: tuple[float, float] | None = None) -> np.ndarray:
    """Monroe et al. (2008) z-scores of the log-odds ratio, set a vs set b (all [V], or all at the same columns);
    `prior` is background / background.sum() when already known; `totals`: (n_a, n_b) when the arrays are not
    every column."""
    alpha = alpha0 * (prior if prior is not None else background / max(background.sum(), 1e-12))
    n_a, n_b = totals if totals is not None else (y_a.sum(), y_b.sum())
    a = (y_a + alpha) / np.maximum(n_a + alpha0 - y_a - alpha, 1e-9)
    b = (y_b + alpha) / np.maximum(n_b + alpha0 - y_b - alpha, 1e-9)
    delta = np.log(a) - np.log(b)
    return delta / np.sqrt(1.0 / (y_a + alpha) + 1.0 / (y_b + alpha))


def content_words(term: str) -> set[str]:
    return {w for w in term.split(" ") if _is_content(w)}


def top_columns(z: np.ndarray, support: np.ndarray, k: int, min_support: int) -> np.ndarray:
    """The columns of the k largest z with z > 0 and enough support, best first."""
    z = np.where(support >= min_support, z, -np.inf)
    head = min(len(z), k)  # argpartition: no full sort of V
    top = np.argpartition(-z, head - 1)[:head] if head < len(z) else np.arange(len(z))
    top = top[np.argsort(-z[top])]
    return top[z[top] > 0]


def spread(values: np.ndarray, columns: np.ndarray, n: int, fill: float = -np.inf) -> np.ndarray:
    """float64 [n]: `values` at `columns`, `fill` elsewhere: a feature's own terms' statistics laid over the
    vocabulary, so that the top-k selections (argpartition, an unstable argsort) order ties as they did."""
    out = np.full(n, fill)
    out[columns] = values
    return out


def top_terms(ranked: Sequence[tuple[str, float]], k: int, *, phrases_only: bool = False) -> list[str]:
    """The k best terms of `ranked`; a term hides the later ones sharing a content word with it."""
    chosen: list[str] = []
    used: set[str] = set()
    for term, _ in ranked:
        if len(chosen) == k:
            break
        words = content_words(term)
        if (phrases_only and " " not in term) or words & used:
            continue
        chosen.append(term)
        used |= words
    return chosen


def _matches(toks: list, weights: dict[str, float], firsts: set[str]) -> list[tuple[int, int, str]]:
    """(first token, last token, term) of every weighted term found in `toks`; `firsts`: the
    terms' first words (most tokens start no term: one set lookup instead of four joins)."""
    out = []
    for i, tok in enumerate(toks):
        if tok[0] not in firsts:
            continue
        for j in range(i, min(len(toks), i + MAX_NGRAM)):
            if j > i and toks[j][5]:
                break  # punctuation inside: no term spans it
            if toks[j][4]:
                term = " ".join(t[0] for t in toks[i:j + 1])
                if term in weights:
                    out.append((i, j, term))
    return out


def best_span(text: str, weights: dict[str, float], max_words: int = SPAN_WORDS) -> tuple[float, str] | None:
    """The stretch of at most `max_words` words of one sentence of `text` whose distinct weighted
    terms sum highest (at least two content words), as written; None when there is none."""
    toks = tokens(text)
    matches = _matches(toks, weights, {t.split(" ", 1)[0] for t in weights})
    sentence = list(accumulate(bool(t[5] and _SENTENCE_END.search(t[5])) for t in toks))  # sentence of each token
    best: tuple[float, int, int] | None = None
    for a, (first, _, _) in enumerate(matches):
        for last in sorted({m[1] for m in matches[a:] if m[0] >= first}):
            if last - first + 1 > max_words or sentence[last] != sentence[first]:
                continue
            inside = {m[2] for m in matches if m[0] >= first and m[1] <= last}
            if len(set().union(*map(content_words, inside))) < 2:
                continue
            score = sum(weights[t] for t in inside)
            if best is None or score > best[0] or (score == best[0] and last - first < best[2] - best[1]):
                best = (score, first, last)
    if best is None:
        return None
    span = text[toks[best[1]][2]:toks[best[2]][3]]
    return best[0], " ".join(span.split())


def extractive_spans(texts: Iterable[str], weights: dict[str, float], k: int) -> list[str]:
    """The k best spans (best_span of each text, best first, without repeats)."""
    found = sorted((s for t in texts if (s := best_span(t, weights))), key=lambda s: -s[0])
    out: list[str] = []
    for _, span in found:
        if len(out) < k and fold(span) not in {fold(o) for o in out}:
            out.append(span)
    return out


class KeywordsBackend(Backend, FamilyNamer):
    """Labels from contrastive keywords. With a TermIndex of the corpus, documents are looked up
    by position (fast: no tokenising per feature); without, the request's texts are tokenised.
    Extractive spans come from the request's activating texts (the Namer sends excerpts)."""

    name = "keywords"
    model = None
    prompt_version = "log-odds-dirichlet.v3"

    def __init__(self, index: TermIndex | None = None, *, n_terms: int = 3, alpha0: float = 100.0,
                 pool_terms: int = 16, near_terms: int = 8, spans: int = 1, span_terms: int = 30) -> None:
        self.index, self.n_terms, self.alpha0, self.pool_terms = index, n_terms, alpha0, pool_terms
        self.near_terms, self.spans, self.span_terms = near_terms, spans, span_terms

    def _index_for(self, request: NamingRequest) -> tuple[TermIndex, NamingRequest]:
        """The corpus index when the request names documents by position, else one of its texts."""
        if self.index is not None and request.activating_ids:
            return self.index, request
        index = TermIndex([*request.activating, *request.non_activating], min_df=1)
        n_a = len(request.activating)
        return index, NamingRequest(request.feature, request.activating, request.non_activating,
                                    activating_ids=range(n_a), hard_negative_ids=(),
                                    non_activating_ids=range(n_a, n_a + len(request.non_activating)))

    def ranked_columns(self, request: NamingRequest, k: int, *, hard: bool = False,
                       present: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[TermIndex, np.ndarray, np.ndarray]:
        """(index, columns, z): the k most contrastive terms of the activating documents, best first (overlapping
        ones included; ties by vocabulary order), against the non-activating ones or (hard) against the hard
        negatives only, and their log-odds z. Only the terms the activating documents hold are scored (no other
        can be ranked): the cost is the evidence's, not the vocabulary's. `present`: TermIndex.present of the
        activating documents, when already found."""
        index, request = self._index_for(request)
        others = request.hard_negative_ids if hard else request.non_activating_ids
        if not others:
            return index, np.empty(0, np.int64), np.empty(0)
        columns, y_a = index.present(request.activating_ids) if present is None else present
        y_b, n_b = index.counts_at(others, columns)
        # the sums over every column, as float32 sums of the [V] counts were (whole numbers: exact)
        totals = (y_a.sum(), np.float32(n_b))
        z = log_odds_z(y_a, y_b, index.background[columns], self.alpha0, index.prior[columns], totals)
        min_support = max(2, int(0.1 * len(request.activating_ids)))
        z = spread(np.where(y_a >= min_support, z, -np.inf), columns, len(index.vocab))  # [V]
        top = top_columns(z, z > -np.inf, k, 1)  # the vocabulary ids
        return index, top, z[top]

    def ranked(self, request: NamingRequest, k: int, *, hard: bool = False) -> list[tuple[str, float]]:
        """The k most contrastive (folded term, z) of the activating documents: against the
        non-activating ones, or (hard) against the hard negatives only."""
        index, columns, z = self.ranked_columns(request, k, hard=hard)
        return [(str(index.vocab[i]), float(v)) for i, v in zip(columns, z)]

    def contrast(self, request: NamingRequest, k: int, *, hard: bool = False) -> list[str]:
        """The k most contrastive terms (none sharing a content word), as written."""
        index, _ = self._index_for(request)
        return [index.display(t) for t in top_terms(self.ranked(request, 10 * k, hard=hard), k)]

    def keywords(self, request: NamingRequest, k: int) -> list[str]:
        """The k most contrastive terms of activating vs non-activating documents, as written."""
        return self.contrast(request, k)

    async def name_feature(self, request: NamingRequest) -> NamingResult:
        """Candidates, plainest first: the top terms, the best phrase, the top term alone, and
        extractive spans; the terms that set the feature apart from its nearest documents are offered
        for the Namer's compositions. The Namer picks among them on the evidence documents."""
        index, _ = self._index_for(request)
        ranked = self.ranked(request, max(self.span_terms, 10 * self.pool_terms))
        if not ranked:
            raise BackendOutputError(f"feature {request.feature}: no term is more frequent in its "
                                     "activating documents than elsewhere")
        near_ranked = self.ranked(request, 10 * self.near_terms, hard=True)
        topic = [index.display(t) for t in top_terms(ranked, self.pool_terms)]
        near = [t for t in (index.display(t) for t in top_terms(near_ranked, self.near_terms)) if t not in topic]
        phrase = [index.display(t) for t in top_terms(ranked, 1, phrases_only=True)]
        weights = dict(ranked[: self.span_terms])
        spans = extractive_spans(request.activating, weights, self.spans) if self.spans else []
        why = f"Documents with {', '.join(topic)} more often than the non-activating documents."
        lists = [topic[: self.n_terms], phrase, topic[:1], *([s] for s in spans)]
        cands, seen = [], set()
        for words in lists:
            label = ", ".join(words)
            if words and label not in seen and len(label) <= 200 and label_words(label) <= LABEL_WORDS:
                seen.add(label)
                text = why if not set(words) & set(near) else f"{why} Unlike similar documents: {', '.join(near[:3])}."
                cands.append(LabelCandidate(label=label, description=text))
        # the terms themselves, for the Namer to compose labels from on the evidence documents
        return NamingResult(cands, None, self.prompt_version, extra={"terms": [*topic, *near]})

    async def name_family(self, request: FamilyRequest) -> NamingResult:
        """The terms of the parent's label, ordered by how many children's labels share them."""
        members = [request.parent, *request.children]
        # each label's terms once, in the order written (a set's order depends on the hash seed, and
        # ties kept it: the same family was named differently from one process to the next)
        counts = Counter(t for label in members for t in dict.fromkeys(p.strip() for p in label.split(",")) if t)
        parent_terms = [p.strip() for p in request.parent.split(",") if p.strip()]
        ranked = sorted(counts, key=lambda t: (-counts[t], t not in parent_terms))[: self.n_terms]
        label = ", ".join(ranked) or request.parent
        return NamingResult([LabelCandidate(label=label, description=f"Family of {request.parent!r} "
                                            f"and {len(request.children)} narrower features.")],
                            None, self.prompt_version)
