"""Texts classified by a concept exactly as its apply job scores a stored note (apply.py `Scorer.block`): the
texts encoded as the run encodes its notes (runs/passages.py), then the probe's probability on the codes it
reads (the note's, or the max over the clauses naming its topic, with the note's beside them for a probe with
context; unit-norm rows for a readout trained on them), or the expression evaluated on the texts as on the run's
notes (its labels, thresholds and families). With each decision, the features that carried it and the clause
each fired on. No FastAPI here; the call is audited as a read (who, which concept, how many texts; never a text).
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from contracts.classify import MAX_TEXTS, Classified, ClassifyOut, Evidence, ModelOut, Span
from contracts.sparse import max_pool_rows
from gateway.domain.auth import trail
from gateway.domain.concepts.apply import concept_version
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.readout import normalise_rows
from gateway.domain.concepts.scope import matching_segments
from gateway.domain.concepts.service import get_or_404, match_expression, probe_probability, probe_weights, reads_context
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.passages import EncodedTexts, PassageTarget, check_texts, encode_texts, passage_target
from gateway.search.expressions import SearchSpace
from gateway.search.results import feature_labels
from gateway.search.space import SearchNotReady, load_search_space

EVIDENCE = 5  # a probe's carrying features shown per text (an expression shows every one of its that fires)
CACHED_PROBES = 32


class CachedProbe(NamedTuple):
    probe: dict[str, Any]
    weights: np.ndarray  # float64 [columns]: n, or 2n with context (the scope's n, then the note's)


class ProbeCache:
    """Probes by concept version (a version names one definition: its probe never changes under it)."""

    def __init__(self, size: int) -> None:
        self.size, self.lock, self.probes = size, threading.Lock(), OrderedDict()

    def get(self, version: str, probe: dict[str, Any], n_features: int) -> CachedProbe:
        with self.lock:
            if version in self.probes:
                self.probes.move_to_end(version)
                return self.probes[version]
        found = CachedProbe(probe, probe_weights(probe, 2 * n_features if reads_context(probe) else n_features))
        with self.lock:
            self.probes[version] = found
            while len(self.probes) > self.size:
                self.probes.popitem(last=False)
        return found


_probes = ProbeCache(CACHED_PROBES)


@dataclass(frozen=True)
class Prepared:
    concept_id: int
    version: str
    kind: str
    expression: str | None
    probe: CachedProbe | None
    space: SearchSpace  # the run's: its labels, thresholds and families
    target: PassageTarget


def prepare(state: Any, session: Session, concept_id: int, texts: list[str]) -> Prepared:
    """Blocking. The texts checked, the concept and its run read; raises ConceptInputError (404, 409) and
    RunInputError (texts.<i>: 413/422; model: 409)."""
    check_texts(texts, max_texts=MAX_TEXTS, max_bytes=state.settings.max_document_bytes)
    concept = get_or_404(session, concept_id)
    if concept.kind == "probe" and not concept.probe:
        raise ConceptInputError(f"concept {concept_id} has no trained probe yet: label notes of both classes, then "
                                "retrain", field="concept_id", status_code=409)
    run = run_repo.get_sae_run(session, run_id=concept.sae_run_id)
    try:
        space = load_search_space(session, state.store, run)
    except SearchNotReady as exc:
        raise ConceptInputError(f"sae_run_id: {exc}", field="sae_run_id", status_code=409) from None
    target = passage_target(session, run)
    version = concept_version(concept)
    probe = _probes.get(version, concept.probe, space.n_features) if concept.kind == "probe" else None
    return Prepared(concept.id, version, concept.kind, concept.expression, probe, space, target)


class Scored(NamedTuple):
    score: np.ndarray  # float64 [texts]
    decision: np.ndarray  # bool [texts]
    read: sp.csr_matrix | None  # a probe's rows as it reads them [texts, columns]
    rows: sp.csr_matrix | None  # the same before a row_l2 readout's scaling (the activations shown)
    scope: np.ndarray | None  # a scoped probe's matching segments (rows of the texts' segments, ascending)
    features: list[int]  # an expression's features
    segment: np.ndarray | None  # an expression's SEGMENT(…) match per text (-1: none)


def score_probe(cached: CachedProbe, encoded: EncodedTexts, texts: list[str]) -> Scored:
    """probe_probability on the rows apply reads (scope.probe_codes), for these texts."""
    probe, rows, hits = cached.probe, encoded.codes, None
    if probe.get("segment_words"):
        seg = encoded.segments
        if seg is None:
            raise ConceptInputError("segment_words: the SAE run has no segment codes", field="segment_words",
                                    status_code=409)
        hits = np.flatnonzero(matching_segments(texts, seg.doc, seg.spans, probe["segment_words"]))
        rows = max_pool_rows(encoded.segment_rows[hits], seg.doc[hits], len(texts))
        if reads_context(probe):
            rows = sp.hstack([rows, encoded.codes], format="csr")
    p = probe_probability(probe, rows)
    read = normalise_rows(rows) if probe.get("readout") == "row_l2" else rows
    return Scored(p, p >= probe["threshold"], sp.csr_matrix(read), rows, hits, [], None)


def score_expression(prepared: Prepared, encoded: EncodedTexts) -> Scored:
    run = prepared.space
    space = SearchSpace(encoded.codes.tocsc(), run.labels, run.families, segments=encoded.segments,
                        thresholds=run.thresholds, reliable=run.reliable)
    match = match_expression(prepared.expression, space)
    return Scored(match.score.astype(np.float64), match.mask, None, None, None, match.features, match.segment)


def _strongest(encoded: EncodedTexts, candidates: np.ndarray, feature: int) -> Span | None:
    """The candidate segment where `feature` fires strongest (the first among equals), None where it is silent."""
    if encoded.segment_rows is None or not len(candidates):
        return None
    column = encoded.segment_rows[candidates][:, feature].toarray().ravel()
    if column.max() <= 0:
        return None
    at = int(candidates[int(np.argmax(column))])
    start, end = encoded.segments.spans[at].tolist()
    return Span(start=start, end=end)


def _segments_of(encoded: EncodedTexts, text: int) -> np.ndarray:
    if encoded.segments is None:
        return np.zeros(0, dtype=np.int64)
    doc = encoded.segments.doc
    return np.arange(np.searchsorted(doc, text, "left"), np.searchsorted(doc, text, "right"))


def probe_evidence(prepared: Prepared, scored: Scored, encoded: EncodedTexts, i: int) -> list[dict[str, Any]]:
    """Text i's features whose activation × weight (on the rows the probe reads) pushed hardest toward its decision:
    the largest positive for a yes, the most negative for a no."""
    n, weights = prepared.space.n_features, prepared.probe.weights
    lo, hi = scored.read.indptr[i], scored.read.indptr[i + 1]
    cols = scored.read.indices[lo:hi]
    contrib = scored.read.data[lo:hi] * weights[cols]
    toward = contrib if scored.decision[i] else -contrib
    order = [j for j in np.argsort(-toward, kind="stable")[:EVIDENCE] if toward[j] > 0]
    own = _segments_of(encoded, i)
    scoped = prepared.probe.probe.get("segment_words") is not None
    in_scope = own[np.isin(own, scored.scope)] if scoped else own
    out = []
    for j in order:
        column = int(cols[j])
        on_scope = scoped and column < n
        feature = column % n
        out.append({"index": feature, "activation": float(scored.rows[i, column]), "weight": float(weights[column]),
                    "contribution": float(contrib[j]), "read_on": "scope" if on_scope else "note",
                    "segment": _strongest(encoded, in_scope if on_scope else own, feature)})
    return out


def expression_evidence(scored: Scored, encoded: EncodedTexts, i: int) -> list[dict[str, Any]]:
    """Text i's activations of the expression's features that fire, strongest first."""
    row = encoded.codes[i]
    acts = {int(f): float(a) for f, a in zip(row.indices, row.data)}
    firing = sorted((f for f in scored.features if acts.get(f, 0) > 0), key=lambda f: (-acts[f], f))
    own = _segments_of(encoded, i)
    return [{"index": f, "activation": acts[f], "weight": None, "contribution": None, "read_on": "note",
             "segment": _strongest(encoded, own, f)} for f in firing]


def _span(encoded: EncodedTexts, segment: int) -> Span:
    start, end = encoded.segments.spans[segment].tolist()
    return Span(start=start, end=end)


def evidence_of(prepared: Prepared, scored: Scored, encoded: EncodedTexts, i: int) -> list[dict[str, Any]]:
    if prepared.kind == "probe":
        return probe_evidence(prepared, scored, encoded, i)
    return expression_evidence(scored, encoded, i)


def classified(prepared: Prepared, scored: Scored, encoded: EncodedTexts, evidence: list[dict[str, Any]],
               names: dict[int, tuple[str | None, bool | None]], i: int) -> Classified:
    segment = scope = threshold = None
    if prepared.kind == "probe":
        own = _segments_of(encoded, i)
        scope = None if scored.scope is None else [_span(encoded, s) for s in own[np.isin(own, scored.scope)]]
        threshold = float(prepared.probe.probe["threshold"])
    elif scored.segment is not None and scored.segment[i] >= 0:
        segment = _span(encoded, int(scored.segment[i]))
    return Classified(decision=bool(scored.decision[i]), score=float(scored.score[i]), threshold=threshold,
                      evidence=[Evidence(label=names[e["index"]][0], reliable=names[e["index"]][1], **e)
                                for e in evidence], segment=segment, scope=scope)


def score(prepared: Prepared, encoded: EncodedTexts, texts: list[str]) -> Scored:
    if prepared.kind == "probe":
        return score_probe(prepared.probe, encoded, texts)
    return score_expression(prepared, encoded)


def finish(prepared: Prepared, scored: Scored, encoded: EncodedTexts, session: Session, n_texts: int) -> ClassifyOut:
    """Blocking: the evidence named, the call audited in the request's unit of work."""
    evidence = [evidence_of(prepared, scored, encoded, i) for i in range(n_texts)]
    shown = sorted({e["index"] for found in evidence for e in found})
    names = feature_labels(session, sae_run_id=prepared.target.sae_run_id, indices=shown)
    items = [classified(prepared, scored, encoded, evidence[i], names, i) for i in range(n_texts)]
    trail.record_read(session, "concept.classify", dataset_id=prepared.target.dataset_id, count=n_texts,
                      concept_id=prepared.concept_id, sae_run_id=prepared.target.sae_run_id)
    return ClassifyOut(concept_id=prepared.concept_id, concept_version=prepared.version, kind=prepared.kind,
                       sae_run_id=prepared.target.sae_run_id, model=model_out(prepared.target), items=items)


def model_out(target: PassageTarget) -> ModelOut:
    model = target.model
    return ModelOut(name=model.name, precision=model.precision, engine=model.engine, file_sha256=model.sha256,
                    provenance=model.provenance)


async def classify_texts(state: Any, session: Session, concept_id: int, texts: list[str]) -> ClassifyOut:
    """Each text's decision, score, threshold and evidence (see the module docstring)."""
    prepared = await asyncio.to_thread(prepare, state, session, concept_id, texts)
    encoded = await encode_texts(state.services, prepared.target, texts)
    scored = await asyncio.to_thread(score, prepared, encoded, texts)
    return await asyncio.to_thread(finish, prepared, scored, encoded, session, len(texts))
