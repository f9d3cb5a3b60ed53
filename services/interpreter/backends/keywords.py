"""The `keywords` back-end: no language model, contrastive term statistics.

Terms (words and two-word phrases) are ranked by the log-odds ratio with an informative
Dirichlet prior of Monroe, Colaresi & Quinn (2008), "Fightin' Words", eq. 16-22: with y_a, y_b
the document frequencies of term w in the activating and non-activating sets, α_w = α0 · the
term's share of the background corpus,

    δ_w = log((y_a+α_w) / (n_a+α0-y_a-α_w)) - log((y_b+α_w) / (n_b+α0-y_b-α_w)),
    z_w = δ_w / sqrt(1/(y_a+α_w) + 1/(y_b+α_w)),

and the label is the top terms by z. Italian and English: text is lower-cased, compared
without accents (so "attività" and "attivita" are one term, shown in its commonest written
form), split at apostrophes (so "dell'ospedale" gives "ospedale"), stop-words dropped.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from services.interpreter.backends.base import (Backend, BackendOutputError, FamilyNamer, FamilyRequest,
                                                LabelCandidate, NamingRequest, NamingResult)
from services.interpreter.backends.stopwords import STOP_WORDS

_WORD = re.compile(r"[^\W\d_]{2,}")


def fold(text: str) -> str:
    """Lower case without accents: 'Attività' → 'attivita'."""
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c))


def terms(text: str, surfaces: dict[str, Counter[str]] | None = None) -> list[str]:
    """Content words (folded) and the two-word phrases of adjacent content words."""
    out: list[str] = []
    prev: str | None = None
    lowered, end = text.lower(), 0
    for match in _WORD.finditer(lowered):
        surface = match.group()
        word = fold(surface)
        if lowered[end:match.start()].strip(" '’"):  # punctuation between words ends a phrase
            prev = None
        end = match.end()
        if word in STOP_WORDS or len(word) < 3:
            prev = None
            continue
        if surfaces is not None:
            surfaces.setdefault(word, Counter())[surface] += 1
        out.append(word)
        if prev is not None:
            out.append(f"{prev} {word}")
        prev = word
    return out


class TermIndex:
    """Binary document-term matrix of a corpus, built once, rows sliced per feature."""

    def __init__(self, texts: Iterable[str], min_df: int = 2) -> None:
        self.surfaces: dict[str, Counter[str]] = {}
        vocab: dict[str, int] = {}
        rows, cols = [], []
        n = 0
        for n, text in enumerate(texts, 1):
            ids = {vocab.setdefault(t, len(vocab)) for t in terms(text, self.surfaces)}
            rows.extend([n - 1] * len(ids))
            cols.extend(ids)
        matrix = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, len(vocab)))
        df = np.asarray(matrix.sum(0)).ravel()
        keep = np.flatnonzero(df >= min_df)
        names = np.array(list(vocab), dtype=object)
        self.vocab = names[keep]  # [V] folded terms
        self.matrix = matrix[:, keep].tocsr()  # [docs, V] 0/1
        self.background = df[keep]  # [V] document frequency in the corpus

    def counts(self, rows: Sequence[int]) -> np.ndarray:
        """[V] documents among `rows` containing each term."""
        return np.asarray(self.matrix[np.asarray(rows, dtype=np.int64)].sum(0)).ravel()

    def display(self, term: str) -> str:
        return " ".join(self.surfaces[w].most_common(1)[0][0] if w in self.surfaces else w
                        for w in term.split(" "))


def log_odds_z(y_a: np.ndarray, y_b: np.ndarray, background: np.ndarray, alpha0: float = 100.0) -> np.ndarray:
    """Monroe et al. (2008) z-scores of the log-odds ratio, set a vs set b (all [V])."""
    alpha = alpha0 * background / max(background.sum(), 1e-12)
    n_a, n_b = y_a.sum(), y_b.sum()
    a = (y_a + alpha) / np.maximum(n_a + alpha0 - y_a - alpha, 1e-9)
    b = (y_b + alpha) / np.maximum(n_b + alpha0 - y_b - alpha, 1e-9)
    delta = np.log(a) - np.log(b)
    return delta / np.sqrt(1.0 / (y_a + alpha) + 1.0 / (y_b + alpha))


def top_terms(z: np.ndarray, vocab: np.ndarray, support: np.ndarray, k: int, min_support: int) -> list[str]:
    """The k best terms by z with enough support; a phrase hides its words and vice versa."""
    chosen: list[str] = []
    z = np.where(support >= min_support, z, -np.inf)
    head = min(len(z), 40 * k)  # the k best surely lie among the 40k best by z: no full sort of V
    top = np.argpartition(-z, head - 1)[:head] if head < len(z) else np.arange(len(z))
    for i in top[np.argsort(-z[top])]:
        if len(chosen) == k or z[i] <= 0:
            break
        term = str(vocab[i])
        words = set(term.split(" "))
        if any(words & set(c.split(" ")) for c in chosen):
            continue
        chosen.append(term)
    return chosen


def candidate_term_lists(topic: list[str], near: list[str], n_terms: int) -> list[list[str]]:
    """Term lists to try as labels, the plain top `n_terms` topic terms first, then the top term
    alone and with the term that best sets the feature apart from its nearest documents."""
    out = [topic[:n_terms], topic[:1]]
    if near:
        out += [[topic[0], near[0]]]
    return out


class KeywordsBackend(Backend, FamilyNamer):
    """Labels from contrastive keywords. With a TermIndex of the corpus, documents are looked up
    by position (fast: no tokenising per feature); without, the request's texts are tokenised."""

    name = "keywords"
    model = None
    prompt_version = "log-odds-dirichlet.v2"

    def __init__(self, index: TermIndex | None = None, *, n_terms: int = 3, alpha0: float = 100.0,
                 pool_terms: int = 12) -> None:
        self.index, self.n_terms, self.alpha0, self.pool_terms = index, n_terms, alpha0, pool_terms

    def _index_for(self, request: NamingRequest) -> tuple[TermIndex, NamingRequest]:
        """The corpus index when the request names documents by position, else one of its texts."""
        if self.index is not None and request.activating_ids:
            return self.index, request
        index = TermIndex([*request.activating, *request.non_activating], min_df=1)
        n_a = len(request.activating)
        return index, NamingRequest(request.feature, request.activating, request.non_activating,
                                    activating_ids=range(n_a),
                                    non_activating_ids=range(n_a, n_a + len(request.non_activating)))

    def contrast(self, request: NamingRequest, k: int, *, hard: bool = False) -> list[str]:
        """The k most contrastive terms of the activating documents, as written: against the
        non-activating ones, or (hard) against the hard negatives only."""
        index, request = self._index_for(request)
        others = request.hard_negative_ids if hard else request.non_activating_ids
        if not others:
            return []
        y_a = index.counts(request.activating_ids)
        z = log_odds_z(y_a, index.counts(others), index.background, self.alpha0)
        min_support = max(2, int(0.1 * len(request.activating_ids)))
        return [index.display(t) for t in top_terms(z, index.vocab, y_a, k, min_support)]

    def keywords(self, request: NamingRequest, k: int) -> list[str]:
        """The k most contrastive terms of activating vs non-activating documents, as written."""
        return self.contrast(request, k)

    async def name_feature(self, request: NamingRequest) -> NamingResult:
        """Candidates of several lengths from two contrasts: the feature's topic (against random
        documents) and what sets it apart from its nearest non-activating documents. The first is
        the plain top terms; the Namer picks among them on the evidence documents."""
        topic = self.keywords(request, self.pool_terms)
        if not topic:
            raise BackendOutputError(f"feature {request.feature}: no term is more frequent in its "
                                     "activating documents than elsewhere")
        near = [t for t in self.contrast(request, self.pool_terms, hard=True) if t not in topic]
        why = f"Documents with {', '.join(topic)} more often than the non-activating documents."
        cands, seen = [], set()
        for words in candidate_term_lists(topic, near, self.n_terms):
            label = ", ".join(words)
            if label not in seen and len(label) <= 200:
                seen.add(label)
                text = why if not set(words) - set(topic) else f"{why} Unlike similar documents: {', '.join(near[:3])}."
                cands.append(LabelCandidate(label=label, description=text))
        # the terms themselves, for the Namer to compose labels from on the evidence documents
        return NamingResult(cands, None, self.prompt_version, extra={"terms": [*topic, *near]})

    async def name_family(self, request: FamilyRequest) -> NamingResult:
        """The terms of the parent's label, ordered by how many children's labels share them."""
        members = [request.parent, *request.children]
        counts = Counter(t for label in members for t in {p.strip() for p in label.split(",")} if t)
        parent_terms = [p.strip() for p in request.parent.split(",") if p.strip()]
        ranked = sorted(counts, key=lambda t: (-counts[t], t not in parent_terms))[: self.n_terms]
        label = ", ".join(ranked) or request.parent
        return NamingResult([LabelCandidate(label=label, description=f"Family of {request.parent!r} "
                                            f"and {len(request.children)} narrower features.")],
                            None, self.prompt_version)
