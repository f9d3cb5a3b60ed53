"""Recording a naming run: every interpretation stored and each feature pointed at its best, one shard
at a time (issue #18: the whole run's records at once were hundreds of MB at 12,288 features)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import ClassVar

import scipy.sparse as sp
from sqlalchemy import func, select

from contracts.interpret import EvidenceIds, FeatureInterpretations, Interpretation, InterpretRunResult
from gateway.db import session_scope
from gateway.domain.features import interpret
from gateway.domain.features import repo as feature_repo
from gateway.domain.features.models import Interpretation as InterpretationRow
from tests.factories import add_coded_sae_run, add_stub_dataset

SHARD = 3


def record(feature: int) -> FeatureInterpretations:
    """Two names of `feature`, the second scoring higher."""
    ev = EvidenceIds(activating=[1, 2], holdout_activating=[3, 4])
    names = [Interpretation(feature=feature, label=f"name {feature} {n}", backend="keywords", evidence=ev,
                            score_embedding=score, score=score, reliable=score > 0.7)
             for n, score in ((0, 0.6), (1, 0.8))]
    return FeatureInterpretations(feature=feature, n_activating=10, interpretations=names, best=1)


class Counted(FeatureInterpretations):
    """A record that counts the live ones (created by validation, gone when freed)."""

    alive: ClassVar[int] = 0

    def model_post_init(self, context: object) -> None:
        type(self).alive += 1

    def __del__(self) -> None:
        type(self).alive -= 1


def test_a_run_is_recorded_shard_by_shard(app, monkeypatch) -> None:  # noqa: ANN001
    store, factory = app.state.store, app.state.factory
    with session_scope(factory) as session:
        ds = add_stub_dataset(session, name="notes", n_documents=4)
        run_id = add_coded_sae_run(session, store, dataset_id=ds.id, codes=sp.random(4, 7, density=0.5)).id
    shards = []
    for s, start in enumerate(range(0, 7, SHARD)):
        lines = "".join(record(f).model_dump_json() + "\n" for f in range(start, min(start + SHARD, 7)))
        shards.append(store.write_bytes(f"sae-runs/{run_id}/interpret/shard-{s:05d}.jsonl", lines.encode(),
                                        kind="interpretations"))
    result = InterpretRunResult(run_id=run_id, n_features=7, n_named=7, n_skipped=0, shards=shards, seconds=1.0,
                                features_per_min=420.0)
    held: list[int] = []
    rows_of = interpret.interpretation_rows

    def counting_rows(feature_id, rec):  # noqa: ANN001, ANN202
        held.append(Counted.alive)
        return rows_of(feature_id, rec)

    monkeypatch.setattr(interpret, "interpretation_rows", counting_rows)
    monkeypatch.setattr(interpret, "FeatureInterpretations", Counted)  # what the shards are read as
    interpret.record_interpretations(SimpleNamespace(store=store, factory=factory), run_id, result)

    assert len(held) == 7 and max(held) <= SHARD  # the shard in hand, never the run's records
    with session_scope(factory) as session:
        assert session.scalar(select(func.count()).select_from(InterpretationRow)) == 14
        by_index = feature_repo.features_by_index(session, sae_run_id=run_id, indices=list(range(7)))
        for index, (_feature, best) in by_index.items():
            assert best is not None and best.label == f"name {index} 1" and best.score == 0.8


def test_the_best_of_many_features_is_picked_as_for_one(app) -> None:  # noqa: ANN001
    """set_best_interpretations (one query per 1,000 features) picks, for each feature, what the
    rule says: the highest score, unscored ones last, the newest among equals; a feature without
    any interpretation points at none. Random scores with ties and gaps, queries of 4 features."""
    import random

    rng = random.Random(0)
    with session_scope(app.state.factory) as session:
        ds = add_stub_dataset(session, name="notes", n_documents=4)
        run_id = add_coded_sae_run(session, app.state.store, dataset_id=ds.id, codes=sp.random(4, 11, density=0.5)).id
        feats = [f for f, _ in feature_repo.features_by_index(session, sae_run_id=run_id,
                                                               indices=list(range(11))).values()]
        expected = {}
        for f in feats:
            rows = [InterpretationRow(feature_id=f.id, backend="keywords", label=f"n{j}", evidence={},
                                      score=rng.choice([None, 0.5, 0.5, 0.7, 0.9]))
                    for j in range(rng.randint(0, 4))]
            session.add_all(rows)
            session.flush()
            ranked = sorted(rows, key=lambda r: (r.score is not None, r.score or 0.0, r.id), reverse=True)
            expected[f.id] = ranked[0].id if ranked else None
        assert None in expected.values() and len(set(expected.values())) > 5
        feature_repo.set_best_interpretations(session, feats, per_query=4)
        assert {f.id: f.best_interpretation_id for f in feats} == expected
