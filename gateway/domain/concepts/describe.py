"""A concept as the API and the pages show it: metrics, weights with their features' names, and
its last apply job."""

from __future__ import annotations

from sqlalchemy.orm import Session

from contracts.concepts import (AppliedOut, ConceptMetrics, ConceptOut, ConceptSummary, Examples, NamedWeight, ProbeOut,
                                StrongestWords)
from contracts.labels import LabellingOut, QueueSeed
from gateway.domain.concepts.models import Concept
from gateway.domain.features import repo as feature_repo
from gateway.domain.jobs import repo as job_repo


def named(session: Session, sae_run_id: int, weights: dict[int, float]) -> list[NamedWeight]:
    """Weights with each feature's shown label, largest magnitude first."""
    found = feature_repo.labels_by_index(session, sae_run_id=sae_run_id, indices=sorted(weights))
    out = []
    for index, weight in sorted(weights.items(), key=lambda kv: (-abs(kv[1]), kv[0])):
        label, reliable = found.get(index, (None, None))
        out.append(NamedWeight(index=index, weight=round(weight, 6), label=label, reliable=reliable))
    return out


def applied(session: Session, concept: Concept) -> AppliedOut:
    job = job_repo.get_job(session, job_id=concept.apply_job_id) if concept.apply_job_id else None
    done = concept.applied or {}
    return AppliedOut(job_id=concept.apply_job_id, status=job.status if job else None,
                      n_matches=done.get("n_matches"), n_documents=done.get("n_documents"),
                      export_url=f"/api/v1/concepts/{concept.id}/export.csv" if done else None,
                      trained_on=done.get("trained_on"))


def concept_out(session: Session, concept: Concept) -> ConceptOut:
    probe = None
    if concept.probe:
        p = concept.probe
        weights = named(session, concept.sae_run_id, {int(i): w for i, w in p["weights"].items()})
        context = named(session, concept.sae_run_id, {int(i): w for i, w in (p.get("context_weights") or {}).items()})
        probe = ProbeOut(C=p["C"], cv_f1=p["cv_f1"], intercept=p["intercept"], threshold=p["threshold"],
                         n_features=len(weights) + len(context), converged=p["converged"], weights=weights,
                         segment_words=p.get("segment_words"), context=p.get("context"), context_weights=context,
                         readout=p.get("readout", "l1"), cv_labels=p.get("cv_labels"))
    metrics = ConceptMetrics.model_validate(concept.metrics) if concept.metrics else None
    features = [] if concept.probe else named(session, concept.sae_run_id, {i: 1.0 for i in concept.features or []})
    return ConceptOut(
        id=concept.id, sae_run_id=concept.sae_run_id, name=concept.name, description=concept.description,
        kind=concept.kind, expression=concept.expression,
        examples=Examples.model_validate(concept.examples) if concept.examples else None,
        metrics=metrics, baselines=metrics.baselines if metrics else None,
        probe=probe, features=features, applied=applied(session, concept), created_at=concept.created_at,
        seed=QueueSeed.model_validate(concept.seed) if concept.seed else None, labelling=labelling_out(session, concept),
    )


def labelling_out(session: Session, concept: Concept) -> LabellingOut | None:
    """The stored training on labels, with the counts as they are now (`stale` when they changed since)."""
    from gateway.domain.labels import repo as label_repo

    if not concept.labelling:
        return None
    stored = concept.labelling
    counts = label_repo.label_counts(session, concept_id=concept.id)
    trained = stored.get("counts") or {}
    stale = any(counts[k] != trained.get(k, 0) for k in ("positive", "negative", "skip"))
    return LabellingOut.model_validate({**stored, "counts": counts, "stale": stale})


def strongest_words(metrics: dict | None) -> StrongestWords | None:
    """The stored baseline with the highest F1 (the first of regex, your regex, TF-IDF, TF-IDF on segments on a
    tie)."""
    baselines = (metrics or {}).get("baselines") or {}
    found = [(b["f1"], -n, method, b)
             for n, method in enumerate(("regex", "words_regex", "tfidf_lr", "tfidf_lr_segments"))
             if (b := baselines.get(method))]
    if not found:
        return None
    f1, _, method, best = max(found)
    return StrongestWords(method=method, f1=f1, f1_difference=best.get("f1_difference"))


def concept_summary(concept: Concept) -> ConceptSummary:
    estimate = ((concept.labelling or {}).get("estimate") or {}).get("f1")
    return ConceptSummary(id=concept.id, sae_run_id=concept.sae_run_id, name=concept.name, kind=concept.kind,
                          f1=(concept.metrics or {}).get("f1", estimate), words=strongest_words(concept.metrics),
                          n_matches=(concept.applied or {}).get("n_matches"), created_at=concept.created_at)
