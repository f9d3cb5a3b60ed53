"""Candidate selection: a back-end's candidates are compared on evidence documents (never the
held-out ones), the one that predicts the feature is kept, and only it is scored on held-out."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from contracts.interpret import (BackendOptions, EvidenceConfig, EvidenceIds, FeatureInterpretations, Interpretation,
                                 ScoringConfig)
from services.interpreter.backends.base import Backend, LabelCandidate, NamingRequest, NamingResult
from services.interpreter.corpus import load_corpus
from services.interpreter.evidence import sample_evidence
from services.interpreter.naming import Namer, _Pending
from services.interpreter.selection import first_per_backend as _first_per_backend, names_first as _names_first
from services.interpreter.scoring import auroc, auroc_columns

from tests.interpreter.conftest import topic_embed  # noqa: E402


class FixedCandidates(Backend):
    """Always the same candidates, a wrong one first."""

    name = "llamacpp"
    model = "fixed"

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels

    async def name_feature(self, request: NamingRequest) -> NamingResult:
        return NamingResult([LabelCandidate(label=x) for x in self.labels], self.model, "fixed.v1")


WRONG_FIRST = ["eczema rash", "fracture cast", "migraine headache aura", "otitis earache"]


def namer(corpus, embed, keep: int = 1) -> Namer:  # noqa: ANN001
    opts = BackendOptions(backend="llamacpp")
    return Namer(corpus, [(opts, FixedCandidates(WRONG_FIRST))], embed, scoring=ScoringConfig(keep_candidates=keep))


@pytest.mark.anyio
async def test_the_candidate_that_predicts_the_feature_is_kept(synthetic):
    store, ref = synthetic
    corpus = load_corpus(store, ref)
    (rec,) = await namer(corpus, topic_embed).name_features([3], ["asthma wheezing"])  # feature 3: migraine
    (kept,) = rec.interpretations
    assert kept.label == "migraine headache aura" and kept.score_evidence == pytest.approx(1.0)
    assert kept.score_embedding > 0.9 and kept.reliable and rec.best == 0

    (three,) = await namer(corpus, topic_embed, keep=3).name_features([3], ["asthma wheezing"])
    assert [i.label for i in three.interpretations][0] == "migraine headache aura"
    assert len(three.interpretations) == 3
    scores = [i.score_evidence for i in three.interpretations]
    assert scores == sorted(scores, reverse=True)

    (plain,) = await namer(corpus, None).name_features([3])  # no embedder: the back-end's first, unscored
    assert [i.label for i in plain.interpretations] == ["eczema rash"] and plain.interpretations[0].score is None


@pytest.mark.anyio
async def test_selection_never_looks_at_held_out_documents(synthetic):
    """With the held-out documents' vectors scrambled after the evidence is drawn, the choice and its
    evidence score stay the same; only the held-out score changes."""
    store, ref = synthetic
    corpus = load_corpus(store, ref)
    ev = sample_evidence(corpus, 3, EvidenceConfig(), pool=200)
    held = [*ev.holdout_activating, *ev.holdout_non_activating]
    selection = {*ev.selection_activating, *ev.selection_hard, *ev.selection_random}
    assert ev.selection_activating and ev.selection_hard and len(ev.selection_random) == len(ev.selection_hard)
    assert not selection & set(held)

    async def name(vectors: np.ndarray) -> Interpretation:
        n = namer(corpus, topic_embed)
        n.corpus = replace(corpus, vectors=vectors)
        n._evidence = lambda f: _Pending(FeatureInterpretations(feature=f, n_activating=ev.n_activating), ev)
        (rec,) = await n.name_features([3])
        return rec.interpretations[0]

    before = await name(corpus.vectors)
    scrambled = corpus.vectors.copy()
    scrambled[held] = np.random.default_rng(1).normal(size=(len(held), scrambled.shape[1])).astype(np.float32)
    after = await name(scrambled)
    assert after.label == before.label and after.score_evidence == before.score_evidence == pytest.approx(1.0)
    assert after.score_embedding < before.score_embedding


def test_held_out_sets_do_not_change_with_the_selection_set(synthetic):
    store, ref = synthetic
    corpus = load_corpus(store, ref)
    with_sel = sample_evidence(corpus, 2, EvidenceConfig(selection_hard_negatives=24), pool=200)
    without = sample_evidence(corpus, 2, EvidenceConfig(selection_hard_negatives=0), pool=200)
    assert with_sel.holdout_activating == without.holdout_activating
    assert with_sel.holdout_non_activating == without.holdout_non_activating
    assert with_sel.activating == without.activating and len(with_sel.selection_hard) > len(without.selection_hard)


@pytest.mark.parametrize("p, q", [(1, 1), (3, 7), (20, 20)])
def test_vectorised_auroc_equals_the_scalar_one(p: int, q: int):
    rng = np.random.default_rng(p * 100 + q)
    pos = rng.integers(0, 4, (p, 5)).astype(float)  # ties on purpose
    neg = rng.integers(0, 4, (q, 5)).astype(float)
    np.testing.assert_allclose(auroc_columns(pos, neg), [auroc(pos[:, i], neg[:, i]) for i in range(5)])


def test_a_name_close_to_the_best_term_list_is_kept_instead():
    def interp(label: str, score: float, backend: str = "keywords") -> Interpretation:
        return Interpretation(feature=0, label=label, backend=backend, evidence=EvidenceIds(activating=[1]),
                              score_evidence=score)

    close = [interp("otitis, ear, pain", 0.80), interp("acute otitis media", 0.79), interp("ear", 0.70)]
    assert [i.label for i in _names_first(close, 0.02)][:2] == ["acute otitis media", "otitis, ear, pain"]
    far = [interp("otitis, ear, pain", 0.80), interp("acute otitis media", 0.75)]
    assert _names_first(far, 0.02)[0].label == "otitis, ear, pain"  # too far below: the list stays first
    assert _names_first(close, 0.0)[0].label == "otitis, ear, pain"
    mixed = [*far, interp("fever, cough", 0.9, "llamacpp"), interp("bronchiolitis", 0.89, "llamacpp")]
    kept = _first_per_backend(_names_first(mixed, 0.02), 1)  # each back-end on its own
    assert sorted(i.label for i in kept) == ["bronchiolitis", "otitis, ear, pain"]
