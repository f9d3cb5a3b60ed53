"""Concepts: create (a saved expression, or a sparse probe trained on labelled documents), evaluate
on a held-out split, and describe (metrics, named weights, the last apply job).

Reads happen in one session, the numerics (CV, fitting) outside any transaction, and the concept
is written in a second one, so a long fit never holds the database.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from contracts.concepts import ConceptCreate, Examples
from gateway.db import session_scope, utcnow
from gateway.domain.auth.scope import visible
from gateway.domain.auth.service import Principal, audit
from gateway.domain.concepts import repo
from gateway.domain.concepts.repo import get_or_404
from gateway.domain.concepts.baselines import compute_baselines
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.examples import Labelled, labelled_documents
from gateway.domain.concepts.probe import binary_metrics, pr_curve, sigmoid
from gateway.domain.concepts.readout import READOUT_CV_MAX, fit_readout, normalise_rows
from gateway.domain.concepts.scope import SegmentScope, probe_codes, segment_scope, with_context
from gateway.domain.datasets import repo as dataset_repo
from gateway.domain.datasets.models import Dataset
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.models import SaeRun
from gateway.search.expressions import (
    ExpressionError, FeatureOutOfRange, Match, PlainWords, SearchSpace, UnknownFamilyError, UnknownLabelError, evaluate,
)
from gateway.search.space import SearchNotReady, load_search_space

THRESHOLD = 0.5  # classes are weighted to balance in training, so 0.5 is the balanced cut


@dataclass
class RunData:
    """An SAE run with what concepts need of it, read in one session."""

    run: SaeRun
    dataset: Dataset
    space: SearchSpace


def run_data(session: Session, store: Any, sae_run_id: int, *, field: str = "sae_run_id") -> RunData:
    run = run_repo.get_sae_run(session, run_id=sae_run_id)
    if run is None:
        raise ConceptInputError(f"{field}: SAE run {sae_run_id} does not exist", field=field)
    try:
        space = load_search_space(session, store, run)
    except SearchNotReady as exc:
        raise ConceptInputError(f"{field}: {exc}", field=field, status_code=409) from None
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
    return RunData(run, dataset_repo.get_dataset(session, dataset_id=emb.dataset_id), space)


def dense_vectors(app_state: Any, run: SaeRun) -> np.ndarray | None:
    """The SAE run's embedding vectors (unit rows, [docs, d]) for the dense baseline, the notes appended to an
    extended run after its embedding run's; None when it has none."""
    from gateway.domain.runs.extend_search import appended, unit_rows
    from gateway.search.text_index import run_vectors

    vectors = run_vectors(app_state.factory, app_state.store, run.embedding_run_id)
    extra = appended(app_state.store, (run.result or {}).get("artifacts") or {})
    if vectors is None or extra is None:
        return vectors
    return np.concatenate([vectors, unit_rows(extra["documents"])])


def _where(exc: ValueError) -> dict[str, Any]:
    """What a client needs to fix the expression: the position, and what was expected or could be meant."""
    extra: dict[str, Any] = {"line": exc.line, "column": exc.column}  # type: ignore[attr-defined]
    if isinstance(exc, ExpressionError):
        extra["expected"] = exc.expected
    elif isinstance(exc, FeatureOutOfRange):
        extra.update(index=exc.index, n_features=exc.n_features)
    elif isinstance(exc, UnknownFamilyError):
        extra["family_id"] = exc.family_id
    if isinstance(exc, (PlainWords, UnknownLabelError)):  # PlainWords is an ExpressionError: expected and candidates
        extra["candidates"] = [{"index": i, "label": lab} for i, lab in exc.candidates]
    return extra


def match_expression(text: str, space: SearchSpace) -> Match:
    """Evaluate, turning each expression error into a 422 on `expression` that says where."""
    try:
        return evaluate(text, space)
    except (ExpressionError, UnknownLabelError, FeatureOutOfRange, UnknownFamilyError) as exc:
        raise ConceptInputError(f"expression: {exc}", field="expression", extra=_where(exc)) from None


def reads_context(probe: dict[str, Any]) -> bool:
    """A scoped probe that also reads the whole note's features (scope.probe_codes with `context`)."""
    return probe.get("context") == "document"


def probe_weights(probe: dict[str, Any], n_columns: int) -> np.ndarray:
    """float64 [n_columns]: the weights over the columns of the codes the probe reads (with context, the
    scoped features' n, then the whole note's n)."""
    w = np.zeros(n_columns, dtype=np.float64)
    for index, weight in probe["weights"].items():
        w[int(index)] = weight
    for index, weight in (probe.get("context_weights") or {}).items():
        w[n_columns // 2 + int(index)] = weight
    return w


def probe_probability(probe: dict[str, Any], rows: sp.csr_matrix) -> np.ndarray:
    """P(positive) for each row of codes, float64 [rows] (rows at unit norm first for a readout trained on them)."""
    if probe.get("readout") == "row_l2":
        rows = normalise_rows(rows)
    return sigmoid(np.asarray(rows @ probe_weights(probe, rows.shape[1])) + probe["intercept"])


PREDICTED = "_predicted"
"""Key of the held-out 0/1 predictions in the metrics `_metrics` returns: not stored, not returned; taken out
(`held_out_predictions`) for the baselines' paired comparison before the metrics go anywhere."""


def held_out_predictions(metrics: dict[str, Any]) -> np.ndarray | None:
    """The concept's held-out predictions, removed from `metrics` (None if they carry none)."""
    return metrics.pop(PREDICTED, None)


def _metrics(y_true: np.ndarray, y_pred: np.ndarray, *, n_train: int, labelled: Labelled,
             scores: np.ndarray | None = None) -> dict[str, Any]:
    return {**binary_metrics(y_true, y_pred), PREDICTED: y_pred, "n_train": n_train,
            "n_excluded": labelled.n_excluded,
            "pr_curve": pr_curve(y_true, scores) if scores is not None else None,
            "evaluated_at": utcnow().isoformat()}


def expression_metrics(match: Match, labelled: Labelled, examples: Examples) -> dict[str, Any]:
    """On the held-out part of the examples (the same split a probe on them would be scored on)."""
    test = labelled.split(examples).test
    return _metrics(labelled.y[test], match.mask[labelled.positions[test]].astype(np.int8), n_train=0,
                    labelled=labelled)


def train_probe(codes: sp.csr_matrix, labelled: Labelled, examples: Examples,
                context: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fit on the training split, score on the held-out split: (probe, metrics). With `context`, `codes` are
    [docs, 2n] (scope.probe_codes): the weights of the first n go to `weights`, of the others to `context_weights`."""
    split = labelled.split(examples)
    fitted = fit_readout(codes[labelled.positions[split.train]], labelled.y[split.train], seed=examples.seed,
                         cv_max=READOUT_CV_MAX)
    n = codes.shape[1] // 2 if context else codes.shape[1]
    coef = fitted.probe.coef[0]
    used = np.flatnonzero(coef)
    cv_f1 = fitted.probe.cv_score if fitted.out_of_fold is not None else 0.0
    probe = {"weights": {str(int(i)): float(coef[i]) for i in used[used < n]},
             "intercept": float(fitted.probe.intercept[0]), "C": fitted.probe.C, "cv_f1": round(cv_f1, 4),
             "cv_labels": None if fitted.out_of_fold is None else len(fitted.out_of_fold),
             "threshold": THRESHOLD, "converged": fitted.probe.converged, "readout": fitted.readout}
    if context:
        probe |= {"context": "document",
                  "context_weights": {str(int(i) - n): float(coef[i]) for i in used[used >= n]}}
    metrics = probe_metrics(probe, codes, labelled.positions[split.test], labelled.y[split.test],
                            n_train=len(split.train), labelled=labelled)
    return probe, metrics


def train_scoped_probe(app_state: Any, dataset_id: int, space: SearchSpace, scope: SegmentScope, labelled: Labelled,
                       examples: Examples) -> tuple[dict[str, Any], dict[str, Any]]:
    """A scoped probe on its segments' features alone, and on those with the whole note's beside them: the one
    with the higher cross-validated F1 on the training split (the held-out split never chooses; a tie keeps the
    scope alone). On NegEx the note's features hold a negation cue that a list puts in another clause ("no
    fever, chills, or [cough]"); on the demo, other conditions' statuses (bench/scope_context.py)."""
    scoped = probe_codes(app_state.factory, dataset_id, space, scope, labelled.positions)  # pooled once, read twice
    alone = train_probe(scoped, labelled, examples)
    wide = train_probe(with_context(scoped, space), labelled, examples, context=True)
    return wide if wide[0]["cv_f1"] > alone[0]["cv_f1"] else alone


def probe_metrics(probe: dict[str, Any], codes: sp.csr_matrix, positions: np.ndarray, y: np.ndarray, *,
                  n_train: int, labelled: Labelled) -> dict[str, Any]:
    p = probe_probability(probe, codes[positions])
    return _metrics(y, (p >= probe["threshold"]).astype(np.int8), n_train=n_train, labelled=labelled, scores=p)


def _check_body(body: ConceptCreate) -> None:
    if body.kind == "expression" and not (body.expression or "").strip():
        raise ConceptInputError("expression: a concept of kind 'expression' needs an expression", field="expression")
    if body.kind == "probe" and body.expression is not None:
        raise ConceptInputError("expression: only a concept of kind 'expression' has one", field="expression")
    if body.seed is not None and body.kind != "probe":
        raise ConceptInputError("seed: only a probe is labelled from a queue", field="seed")
    if body.kind == "expression" and body.segment_words is not None:
        raise ConceptInputError("segment_words: only a probe reads a scope of segments (an expression has SEGMENT(…))",
                                field="segment_words")


def _build(app_state: Any, body: ConceptCreate) -> dict[str, Any]:
    """Everything the new concept row holds, computed from one read of the run."""
    _check_body(body)
    with session_scope(app_state.factory) as session:
        data = run_data(session, app_state.store, body.sae_run_id)
        if repo.find_concept(session, sae_run_id=body.sae_run_id, name=body.name) is not None:
            raise ConceptInputError(f"name: SAE run {body.sae_run_id} already has a concept named {body.name!r}",
                                    field="name", status_code=409)
        labelled = labelled_documents(session, data.dataset, body.examples) if body.examples else None
        dataset_id = data.dataset.id
    fields: dict[str, Any] = {"probe": None, "metrics": None}
    scope: SegmentScope | None = None
    if body.seed is not None and body.seed.expression is not None:  # a seed that does not parse says where
        try:
            match_expression(body.seed.expression, data.space)
        except ConceptInputError as exc:
            raise ConceptInputError(f"seed.{exc.message}", field="seed.expression", extra=exc.extra) from None
    if body.kind == "probe" and labelled is None:  # labelled note by note: trained as labels come
        segment_scope(data.space, body.segment_words)  # a run without segment codes refuses the words now
        fields["features"] = []
        fields["labelling"] = untrained_labelling(body.segment_words)
        return fields
    if body.kind == "expression":
        match = match_expression(body.expression, data.space)
        fields["features"] = match.features
        if labelled is not None:
            fields["metrics"] = expression_metrics(match, labelled, body.examples)
    else:
        scope = segment_scope(data.space, body.segment_words)
        if scope is not None:  # matched once, for the probe and for the words-alone baseline
            scope = scope.found(app_state.factory, dataset_id, labelled.positions)
        if scope is None:
            codes = probe_codes(app_state.factory, dataset_id, data.space, scope, labelled.positions)
            probe, fields["metrics"] = train_probe(codes, labelled, body.examples)
        else:
            probe, fields["metrics"] = train_scoped_probe(app_state, dataset_id, data.space, scope, labelled,
                                                          body.examples)
            probe["segment_words"] = list(body.segment_words or [])
        fields["probe"] = probe
        fields["features"] = sorted({int(i) for i in [*probe["weights"], *(probe.get("context_weights") or {})]})
    if labelled is not None:
        fields["examples_labels"] = examples_rows(app_state.factory, dataset_id, labelled)
    if fields["metrics"] is not None:  # words alone, on the same split (and on the same segments)
        predicted = held_out_predictions(fields["metrics"])
        fields["metrics"]["baselines"] = compute_baselines(app_state.factory, dataset_id, labelled, body.examples,
                                                           scope, predicted, dense_vectors(app_state, data.run))
    return fields


async def create_concept(app_state: Any, body: ConceptCreate, principal: Principal, request_id: str | None) -> int:
    """Validate, evaluate (or train and evaluate), store; returns the new concept's id."""
    with session_scope(app_state.factory) as session:
        if not visible(session, principal, "sae_run", body.sae_run_id):  # another project's: as if missing
            raise ConceptInputError(f"sae_run_id: SAE run {body.sae_run_id} does not exist", field="sae_run_id")
    fields = await asyncio.to_thread(_build, app_state, body)
    examples_labels = fields.pop("examples_labels", None)
    with session_scope(app_state.factory) as session:
        concept = repo.add_concept(
            session, sae_run_id=body.sae_run_id, name=body.name, description=body.description, kind=body.kind,
            expression=body.expression.strip() if body.expression else None,
            seed=body.seed.model_dump(mode="json", exclude_none=True) if body.seed else None,
            examples=body.examples.model_dump(mode="json", exclude_none=True) if body.examples else None, **fields)
        if examples_labels is not None:  # the examples become the concept's label set, shown as imported
            from gateway.domain.labels.service import record_examples  # labels reads concepts: imported here

            record_examples(session, principal, concept, examples_labels)
            if concept.kind == "probe":
                concept.labelling = examples_labelling(examples_labels)
        audit(session, principal, "concept.create", target_type="concept", target_id=concept.id,
              request_id=request_id, details={"sae_run_id": body.sae_run_id, "kind": body.kind,
                                              "n_features": len(fields["features"])})
        return concept.id


@dataclass
class Scored:
    """A concept's figures on some examples, and what its words-alone baselines are computed from."""

    metrics: dict[str, Any]
    store: bool  # on its own examples' held-out split: the figures are stored, with baselines
    dataset_id: int
    labelled: Labelled
    examples: Examples
    scope: SegmentScope | None  # a scoped probe's segments: the baselines read them too
    vectors: np.ndarray | None = None  # the run's document vectors, for the dense baseline


def _evaluate(app_state: Any, concept_id: int, examples: Examples | None) -> tuple[dict[str, Any], bool]:
    s = _score(app_state, concept_id, examples)
    predicted = held_out_predictions(s.metrics)
    if s.store:  # the stored figures carry the words-alone baselines of the same split
        s.metrics["baselines"] = compute_baselines(app_state.factory, s.dataset_id, s.labelled, s.examples, s.scope,
                                                   predicted, s.vectors)
    return s.metrics, s.store


def _score(app_state: Any, concept_id: int, examples: Examples | None) -> Scored:
    with session_scope(app_state.factory) as session:
        concept = get_or_404(session, concept_id)
        data = run_data(session, app_state.store, concept.sae_run_id)
        own = Examples.model_validate(concept.examples) if concept.examples else None
        given = examples or own
        if given is None:
            raise ConceptInputError("examples: this concept has no labelled examples; give `examples`", field="examples")
        labelled = labelled_documents(session, data.dataset, given)
        trained_on = labelled_documents(session, data.dataset, own) if concept.kind == "probe" else None
        kind, text, probe, dataset_id = concept.kind, concept.expression, concept.probe, data.dataset.id
    if kind == "expression":
        return Scored(expression_metrics(match_expression(text, data.space), labelled, given), True, dataset_id,
                      labelled, given, None, dense_vectors(app_state, data.run))
    words = probe.get("segment_words")  # codes are read only where they are scored (a scope reads texts)
    if examples is None:  # its own held-out split
        split = labelled.split(given)
        pos, y, n_train = labelled.positions[split.test], labelled.y[split.test], len(split.train)
        scope = segment_scope(data.space, words)
        if scope is not None:  # every labelled document's, once: the baseline reads the training ones too
            scope = scope.found(app_state.factory, dataset_id, labelled.positions)
        codes = probe_codes(app_state.factory, dataset_id, data.space, scope, pos, context=reads_context(probe))
        return Scored(probe_metrics(probe, codes, pos, y, n_train=n_train, labelled=labelled), True, dataset_id,
                      labelled, given, scope, dense_vectors(app_state, data.run))
    # Other examples: every one the probe was not trained on (never its training split).
    train = set(trained_on.positions[trained_on.split(own).train].tolist())
    keep = np.array([p not in train for p in labelled.positions.tolist()], dtype=bool)
    if len(np.unique(labelled.y[keep])) < 2:
        raise ConceptInputError("examples: outside the probe's training documents, these examples have only one class",
                                field="examples")
    codes = probe_codes(app_state.factory, dataset_id, data.space, segment_scope(data.space, words),
                        labelled.positions[keep], context=reads_context(probe))
    metrics = probe_metrics(probe, codes, labelled.positions[keep], labelled.y[keep], n_train=len(train),
                            labelled=labelled)
    return Scored(metrics, False, dataset_id, labelled, given, None)


async def evaluate_concept(app_state: Any, concept_id: int, examples: Examples | None) -> dict[str, Any]:
    """Held-out metrics on the concept's own examples (stored), or on others: an expression takes
    them as its examples; a probe is scored on them without changing what it was trained on."""
    metrics, store = await asyncio.to_thread(_evaluate, app_state, concept_id, examples)
    if store:
        with session_scope(app_state.factory) as session:
            concept = get_or_404(session, concept_id)
            concept.metrics = metrics
            if examples is not None:
                concept.examples = examples.model_dump(mode="json", exclude_none=True)
    return metrics


MAX_EXAMPLE_LABELS = 200_000  # a label column's negatives are every other note: bounded like the id lists


def examples_rows(factory: Any, dataset_id: int, labelled: Labelled) -> list[tuple[int, int, str]]:
    """(document_id, position, positive | negative) of the examples, at most MAX_EXAMPLE_LABELS."""
    positions = labelled.positions[:MAX_EXAMPLE_LABELS]
    with session_scope(factory) as session:
        ids = dataset_repo.ids_at(session, dataset_id=dataset_id, positions=positions.tolist())
    return [(ids[int(p)], int(p), "positive" if y else "negative")
            for p, y in zip(positions.tolist(), labelled.y.tolist()) if int(p) in ids]


def untrained_labelling(segment_words: list[str] | None) -> dict[str, Any]:
    """A concept to be labelled note by note, before its first training: its scope is kept here until a probe
    carries it."""
    return {"version": 0, "trained_on": {"count": 0, "hash": None, "at": None}, "counts": {}, "estimate": None,
            "curve": [], "carriers": [], "seconds": 0.0,
            **({"segment_words": list(segment_words)} if segment_words else {})}


def examples_labelling(rows: list[tuple[int, int, str]]) -> dict[str, Any]:
    """What a probe made from examples was trained on, in the terms of a label set (its held-out quarter included:
    the hash names the examples the concept was made from)."""
    from gateway.domain.labels.service import labels_hash

    counts = {"positive": sum(r[2] == "positive" for r in rows), "negative": sum(r[2] == "negative" for r in rows),
              "skip": 0, "random": 0}
    return {"version": 0, "trained_on": {"count": len(rows), "hash": labels_hash([(d, lab) for d, _, lab in rows]),
                                         "at": utcnow().isoformat(), "source": "examples"},
            "counts": counts, "estimate": None, "curve": [], "carriers": [], "readout": "l1", "seconds": 0.0}


def delete_concept(factory: Any, store: Any, *, concept_id: int, principal: Principal | None,
                   request_id: str | None = None) -> int | None:
    """Delete a concept: its row, its last apply's matches (catalogued artifacts and files), and stop its apply
    job where one still runs (it ends at its next block); audited. Returns the SAE run it belonged to, None if
    it does not exist."""
    from gateway.domain.artifacts import repo as artifact_repo
    from gateway.domain.jobs.service import request_cancel

    with session_scope(factory) as session:
        concept = repo.get_concept(session, concept_id=concept_id)
        if concept is None:
            return None
        if concept.apply_job_id:
            request_cancel(session, job_id=concept.apply_job_id)
        run_id = concept.sae_run_id
        details = {"name": concept.name, "kind": concept.kind, "sae_run_id": run_id}
        session.delete(concept)
        artifact_repo.forget_owner(session, owner_type="concept", owner_id=concept_id)
        audit(session, principal, "concept.delete", target_type="concept", target_id=concept_id,
              request_id=request_id, details=details)
    store.delete(f"concepts/{concept_id}")
    return run_id
