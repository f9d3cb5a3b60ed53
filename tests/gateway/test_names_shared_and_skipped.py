"""One meaning per name across a run, and a reason for every feature the naming job skipped (issue #28)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import scipy.sparse as sp

from contracts.interpret import (Alternative, EvidenceIds, FeatureInterpretations, Interpretation,
                                 InterpretRunResult)
from gateway.db import session_scope
from gateway.domain.features import interpret
from gateway.domain.features import repo as feature_repo
from gateway.domain.features.names import SHARED_NAME, NameChoice, distinct_names, shared_fraction
from tests.factories import add_coded_sae_run, add_stub_dataset


NAME_CURVE = [(0.5, 1.0, 5), (0.2, 0.8, 12), (0.05, 0.6, 20)]
ACUTA_CURVE = [(0.5, 1.0, 6), (0.3, 0.85, 10), (0.05, 0.4, 20)]


def named(feature: int, label: str, score: float, alternatives: list[Alternative],
          holds_on: int | None = None, calibration: str | None = None) -> FeatureInterpretations:
    ev = EvidenceIds(activating=[1, 2], holdout_activating=list(range(10, 30)))
    interp = Interpretation(feature=feature, label=label, backend="keywords", evidence=ev, score_embedding=score,
                            score=score, reliable=True, threshold=0.2, alternatives=alternatives,
                            precision_curve=NAME_CURVE, calibrated_on=20, holds_on=holds_on, calibration=calibration)
    return FeatureInterpretations(feature=feature, n_activating=40, interpretations=[interp], best=0)


def test_distinct_names_keeps_the_best_holder_and_moves_the_others_to_a_free_reliable_phrase() -> None:
    alt = lambda label, ok=True: {"label": label, "score": 0.8, "threshold": 0.3, "reliable": ok}  # noqa: E731
    choices = [NameChoice(1, "bronchiolite", 0.80, True, 0.4, [alt("bronchiolite acuta")]),
               NameChoice(2, "Bronchiolite", 0.95, True, 0.2, [alt("bronchiolite in atto")]),
               NameChoice(3, "bronchiolite", 0.70, True, 0.1, [alt("bronchiolite acuta"), alt("x", False)]),
               NameChoice(4, "bronchiolite", 0.60, False, None, []),  # unreliable: shown, with a question mark
               NameChoice(5, "sospetta bronchiolite", 0.9, True, 0.5, [])]
    changes = distinct_names(choices)
    assert changes == {1: alt("bronchiolite acuta"), 3: None}  # 2 holds it best; 3's free phrase is only unreliable
    labels = {1: "bronchiolite acuta", 2: "Bronchiolite", 3: "bronchiolite", 5: "sospetta bronchiolite"}
    assert shared_fraction(labels, {1, 2, 5}) == 0.0 and shared_fraction(labels, {1, 2, 3, 5}) == 0.5


def test_a_name_that_does_not_hold_gives_way_to_an_alternative_that_does() -> None:
    """Feature 1's own name holds at no activation, its alternative "bronchiolite" does (score 0.97): it shows that
    alternative and, scoring higher, takes the name from feature 2, which has no free phrase left. Feature 3's
    alternative is taken by then: it keeps its unreliable name (no change). Feature 4 has no reliable alternative."""
    alt = lambda label, score=0.8, ok=True: {"label": label, "score": score, "threshold": 0.1, "reliable": ok}  # noqa: E731
    choices = [NameChoice(1, "bronchiolite acuta", 0.97, False, None,
                          [alt("diagnosi", 0.99, False), alt("bronchiolite", 0.97), alt("bronchiolite in atto", 0.90)]),
               NameChoice(2, "bronchiolite", 0.81, True, 0.05, [alt("faringotonsillite", ok=False)]),
               NameChoice(3, "bronchiolite acuta", 0.88, False, None, [alt("bronchiolite", 0.88)]),
               NameChoice(4, "verosimile", 0.81, False, None, [alt("verosimile bronchiolite", 0.6, False)])]
    changes = distinct_names(choices)
    assert changes == {1: alt("bronchiolite", 0.97), 2: None}
    # the highest-scoring reliable alternative is the one shown, not the first listed
    assert distinct_names([NameChoice(5, "x y", 0.9, False, None, [alt("x", 0.7), alt("y", 0.85)])]) == {5: alt("y", 0.85)}


def test_of_features_sharing_a_name_the_one_holding_it_on_most_units_keeps_it() -> None:
    """Demo, clause SAE: a "bronco-" feature scoring 0.97 held "bronchiolite" on ~170 clauses, a feature firing on
    every bronchiolitis clause scoring 0.94 on ~550: the second keeps the name, whatever the scores; names
    recorded without `holds_on` (before it existed) rank by score alone, after those that have it."""
    alt = lambda label, score, holds=None: {"label": label, "score": score, "threshold": 0.1,  # noqa: E731
                                             "reliable": True, "holds_on": holds}
    choices = [NameChoice(1, "test di broncodilatazione", 0.97, False, None, [alt("bronchiolite", 0.97, 173)]),
               NameChoice(2, "bronchiolite acuta", 0.94, False, None, [alt("bronchiolite", 0.94, 550)]),
               NameChoice(3, "bronchiolite", 0.99, True, 0.2, [alt("bronchiolite in atto", 0.8, 40)])]
    assert distinct_names(choices) == {2: alt("bronchiolite", 0.94, 550), 3: alt("bronchiolite in atto", 0.8, 40)}
    own = [NameChoice(4, "febbre", 0.75, True, 0.1, [], holds_on=300), NameChoice(5, "febbre", 0.95, True, 0.1, [], 120)]
    assert distinct_names(own) == {5: None}
    unknown = [NameChoice(6, "tosse", 0.75, True, 0.1, []), NameChoice(7, "tosse", 0.95, True, 0.1, [])]
    assert distinct_names(unknown) == {6: None}
    # a failing name's alternatives tied on score (as all were before they were scored on their own): the one
    # holding on most is shown
    tied = [NameChoice(8, "bronchiolite acuta", 0.94, False, None,
                       [alt("diagnosi clinica", 0.94, 40), alt("bronchiolite", 0.94, 550), alt("acuta", 0.9, 600)])]
    assert distinct_names(tied) == {8: alt("bronchiolite", 0.94, 550)}


@pytest.mark.anyio
async def test_recording_a_run_resolves_shared_names_and_stores_skip_reasons(app, client, auth) -> None:  # noqa: ANN001
    store, factory = app.state.store, app.state.factory
    with session_scope(factory) as session:
        ds = add_stub_dataset(session, name="notes", n_documents=4)
        run_id = add_coded_sae_run(session, store, dataset_id=ds.id, codes=sp.random(4, 6, density=0.5)).id
    guess = named(5, "verosimile", 0.85, [Alternative(label="verosimile bronchiolite", score=0.84, threshold=0.3,
                                                       reliable=True, precision_curve=ACUTA_CURVE)])
    guess.interpretations[0].reliable, guess.interpretations[0].threshold = False, None
    guess.interpretations[0].unreliable_reason = "at no activation do its words occur in 80 % of the segments it fires on"
    records = [named(0, "bronchiolite", 0.9, [], holds_on=15, calibration="strongest_and_sample"),
               named(1, "bronchiolite", 0.8, [Alternative(label="bronchiolite acuta", score=0.78, threshold=0.3,
                                                          reliable=True, precision_curve=ACUTA_CURVE, holds_on=7)],
                     holds_on=11),
               named(2, "bronchiolite", 0.7, []),
               FeatureInterpretations(feature=3, n_activating=2, skipped="feature 3 fires on 2 documents (< 4)"),
               FeatureInterpretations(feature=4, n_activating=50, skipped="no name: keywords: "
                                      "no phrase separates its strongest segments"), guess]
    shard = store.write_bytes(f"sae-runs/{run_id}/interpret/shard-00000.jsonl",
                              "".join(r.model_dump_json() + "\n" for r in records).encode(), kind="interpretations")
    result = InterpretRunResult(run_id=run_id, n_features=6, n_named=4, n_skipped=2, shards=[shard], seconds=1.0,
                                features_per_min=300.0)
    interpret.record_interpretations(SimpleNamespace(factory=factory, store=store), run_id, result)
    with session_scope(factory) as session:
        rows = feature_repo.features_by_index(session, sae_run_id=run_id, indices=[0, 1, 2, 3, 4, 5])
        shown = {i: (best.label, best.reliable, best.threshold) if best else f.skip_reason
                 for i, (f, best) in rows.items()}
        assert rows[1][1].evidence["replaced_label"] == "bronchiolite"
        # the curve shown beside the threshold is the shown phrase's, not the replaced name's
        assert rows[1][1].evidence["precision_curve"] == [list(p) for p in ACUTA_CURVE]
        assert rows[0][1].evidence["precision_curve"] == [list(p) for p in NAME_CURVE]
        # and so is what it holds on: the kept name's own, the alternative's where one is shown
        assert rows[0][1].evidence["holds_on"] == 15 and rows[1][1].evidence["holds_on"] == 7
        assert rows[2][1].evidence["unreliable_reason"] == SHARED_NAME  # kept, unreliable, and saying why
    assert shown[0] == ("bronchiolite", True, 0.2)
    assert shown[1] == ("bronchiolite acuta", True, 0.3)
    assert shown[2] == ("bronchiolite", False, 0.2)  # no phrase of its own left: shown as unreliable
    assert shown[3] == "feature 3 fires on 2 documents (< 4)" and shown[4].startswith("no name: keywords")
    # a name that holds nowhere gives way to its alternative that holds, saying why
    assert shown[5] == ("verosimile bronchiolite", True, 0.3)
    assert rows[5][1].evidence["replaced_label"] == "verosimile"
    assert rows[5][1].evidence["replaced_reason"].startswith("at no activation")
    assert rows[5][1].evidence["unreliable_reason"] is None
    page = (await client.get(f"/sae-runs/{run_id}/features/5", headers=auth)).text
    assert ("Shown instead of “verosimile”, a name that does not hold: at no activation do its words occur in 80 % "
            "of the segments it fires on.") in page
    assert "one meaning per name" in (await client.get(f"/sae-runs/{run_id}/features/1", headers=auth)).text
    # a threshold says what it was estimated on: the strongest segments counted, or (named before) a sample without
    counted = (await client.get(f"/sae-runs/{run_id}/features/0", headers=auth)).text
    assert "the feature's strongest, each counted" in counted and 'id="old-calibration"' not in counted
    older = (await client.get(f"/sae-runs/{run_id}/features/1", headers=auth)).text
    assert 'id="old-calibration"' in older and "name the run's features again" in older


@pytest.mark.anyio
async def test_the_feature_page_says_why_a_name_is_unreliable(app, client, auth) -> None:  # noqa: ANN001
    store, factory = app.state.store, app.state.factory
    with session_scope(factory) as session:
        ds = add_stub_dataset(session, name="notes", n_documents=4)
        run_id = add_coded_sae_run(session, store, dataset_id=ds.id, codes=sp.random(4, 3, density=0.9)).id
    ev = EvidenceIds(activating=[1, 2], holdout_activating=list(range(10, 30)))
    guess = Interpretation(feature=0, label="bronchiolite", backend="keywords", evidence=ev, score_embedding=0.91,
                           score=0.91, reliable=False, calibrated_on=71, precision_curve=[(0.05, 0.43, 21)],
                           unreliable_reason="at no activation do its words occur in 80 % of the segments it fires "
                                             "on (of 71) <b>")
    record = FeatureInterpretations(feature=0, n_activating=40, interpretations=[guess], best=0)
    shard = store.write_bytes(f"sae-runs/{run_id}/interpret/shard-00000.jsonl", (record.model_dump_json() + "\n").encode(),
                              kind="interpretations")
    result = InterpretRunResult(run_id=run_id, n_features=1, n_named=1, n_skipped=0, shards=[shard], seconds=1.0,
                                features_per_min=60.0)
    interpret.record_interpretations(SimpleNamespace(factory=factory, store=store), run_id, result)
    page = await client.get(f"/sae-runs/{run_id}/features/0", headers=auth)
    assert page.status_code == 200
    assert ('id="unreliable-reason">Unreliable: at no activation do its words occur in 80 % of the segments it fires '
            'on (of 71) &lt;b&gt;. Read it as a guess.</p>') in page.text
    assert "score below the threshold" not in page.text  # not the other tests' generic sentence
    api = (await client.get(f"/api/v1/sae-runs/{run_id}/features/0/interpretations", headers=auth)).json()
    assert api[0]["evidence"]["unreliable_reason"].startswith("at no activation")
    detail = (await client.get(f"/api/v1/sae-runs/{run_id}/features/0", headers=auth)).json()
    assert detail["reliable"] is False and detail["unreliable_reason"].startswith("at no activation")
    listed = (await client.get(f"/api/v1/sae-runs/{run_id}/features?sort=index", headers=auth)).json()["items"]
    assert listed[0]["unreliable_reason"] == detail["unreliable_reason"] and listed[1]["unreliable_reason"] is None


def test_the_api_says_why_a_name_is_unreliable_or_shared() -> None:
    from gateway.api.v1.sae import unreliable_reason

    row = lambda reliable, **evidence: SimpleNamespace(reliable=reliable, evidence=evidence)  # noqa: E731
    assert unreliable_reason(row(True, unreliable_reason="stale")) is None  # reliable: no reason, whatever is stored
    assert unreliable_reason(row(None)) is None  # unscored
    assert unreliable_reason(row(False, unreliable_reason="only 2 of its documents ...")) == "only 2 of its documents ..."
    assert unreliable_reason(row(False, shared_name=True, unreliable_reason=None)).startswith("another feature holds")
    assert unreliable_reason(row(False)) is None  # named before reasons were kept
