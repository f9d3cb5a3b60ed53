"""A feature's documents for people to read: activating documents across activation quantiles
(not only the very top, which can mislead), each with the chunk that drives the feature, and
near misses — non-activating documents closest to the activating ones."""

from __future__ import annotations

import numpy as np

from contracts.examples import Example, ExamplesRequest, FeatureExamples
from services.interpreter.corpus import Corpus
from services.interpreter.evidence import feature_rng, nearest_outside, quantile_sample, strongest_chunk


def feature_examples(corpus: Corpus, req: ExamplesRequest) -> FeatureExamples:
    positions, acts = corpus.column(req.feature)
    order = np.argsort(-acts, kind="stable")  # strongest first
    picked = quantile_sample(order, req.activating, req.quantiles, feature_rng(req.seed, req.feature))
    rank = {int(r): i for i, r in enumerate(order)}
    n = max(len(order), 1)
    activating = [
        Example(position=int(positions[r]), doc_id=int(corpus.doc_ids[positions[r]]), activation=float(acts[r]),
                quantile=min(rank[int(r)] * req.quantiles // n, req.quantiles - 1),
                span=strongest_chunk(corpus, int(positions[r]), req.feature))
        for r in picked
    ]
    near: list[Example] = []
    if len(positions) and req.near_misses:
        nearest, sims = centred_nearest(corpus, positions[picked], positions, req.near_misses)
        near = [Example(position=int(p), doc_id=int(corpus.doc_ids[p]), activation=0.0, similarity=float(s))
                for p, s in zip(nearest, sims, strict=True)]
    return FeatureExamples(feature=req.feature, n_activating=len(positions), activating=activating, near_misses=near)


def centred_nearest(corpus: Corpus, rows: np.ndarray, active: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The m non-activating positions nearest to the mean of `rows`, nearest first, with their cosines, all
    centred on the corpus's mean vector. An encoder's documents share one direction (the demo's notes: raw
    cosine 0.98-1.00 between any two), which raw cosines to the centroid rank by as much as by the feature's
    own content; centred, they spread (and read) as differences from the typical document."""
    mu, norms = corpus.centring
    centre = corpus.vectors[rows].mean(axis=0) - mu
    centre /= max(float(np.linalg.norm(centre)), 1e-12)
    sims = (corpus.vectors @ centre - float(mu @ centre)) / norms  # [N]: cos(v - mu, centre)
    top = nearest_outside(sims, active, m)
    return top, sims[top]
