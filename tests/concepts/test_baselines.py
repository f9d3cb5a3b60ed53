"""Words alone beside every concept: a keyword regex from the positive labels and TF-IDF + logistic
regression, on the concept's own held-out split, equal to an independent scikit-learn computation, each with
the concept's F1 lead over it and its paired bootstrap interval; the share of positives the regex finds, and the
page's note when the label's name is not a word of the texts; no regex for examples given by id; the table on
the concept page (escaped)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score
from sklearn.model_selection import train_test_split

from gateway.domain.concepts import baselines
from tests.concepts.conftest import note_text, tuned_tfidf_predictions
from tests.concepts.test_concepts_api import create

pytestmark = pytest.mark.anyio
CONFIRMED = {"labels": {"positive": ["bronchiolitis:confirmed"]}}  # against every other document


def split_here(run, positive: set[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # noqa: ANN001
    """(train positions, train y, test positions, test y): every document, 25 % held out, seed 0."""
    positions = np.arange(len(run.labels))
    y = np.array([int(lab in positive) for lab in run.labels])
    train, test = train_test_split(positions, test_size=0.25, random_state=0, stratify=y)
    train, test = np.sort(train), np.sort(test)
    return train, y[train], test, y[test]


def scores(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    return {"precision": precision_score(y, pred, zero_division=0), "recall": recall_score(y, pred, zero_division=0),
            "f1": f1_score(y, pred, zero_division=0)}


def assert_figures(got: dict, want: dict[str, float]) -> None:
    for key, value in want.items():
        assert 0.0 <= got[key] <= 1.0
        assert got[key] == pytest.approx(value, abs=1e-4), key


async def test_baselines_on_the_same_split_match_sklearn(client, auth, labelled_run) -> None:  # noqa: ANN001
    resp = await create(client, auth, labelled_run, name="probe", kind="probe", examples=CONFIRMED)
    assert resp.status_code == 201, resp.text
    c = resp.json()
    b = c["baselines"]
    assert b == c["metrics"]["baselines"]

    train, y_train, test, y_test = split_here(labelled_run, {"bronchiolitis:confirmed"})
    texts = [note_text(i, lab) for i, lab in enumerate(labelled_run.labels)]
    assert c["metrics"]["n_test"] == len(test)

    assert b["regex"]["pattern"] == "bronchioli"
    regex_pred = np.array([int(re.search("bronchioli", texts[p], re.I) is not None) for p in test])
    assert_figures(b["regex"], scores(y_test, regex_pred))
    assert 0 < b["regex"]["recall"] < 1 and 0 < b["regex"]["precision"] < 1  # misses and decoys
    found = [re.search("bronchioli", texts[p], re.I) is not None for p, y in zip(train, y_train) if y]
    assert b["regex"]["positive_coverage"] == pytest.approx(np.mean(found)) and 0.5 < np.mean(found) < 1

    tfidf_pred, chosen = tuned_tfidf_predictions([texts[p] for p in train], y_train, [texts[p] for p in test])
    assert_figures(b["tfidf_lr"], scores(y_test, tfidf_pred))
    assert b["tfidf_lr"]["C"] == chosen  # what a user tuning the words' model would pick
    assert b["tfidf_lr"]["n_train"] == len(train) and b["tfidf_lr"]["sampled"] is False

    # the concept against each, paired on the same held-out documents
    for name in ("regex", "tfidf_lr"):
        d = b[name]["f1_difference"]
        assert d["difference"] == pytest.approx(c["metrics"]["f1"] - b[name]["f1"], abs=2e-4)
        assert d["low"] <= d["difference"] <= d["high"] and d["level"] == 0.95 and d["resamples"] == 2000
        assert d["distinguishable"] == (d["low"] > 0 or d["high"] < 0)
    assert "_predicted" not in c["metrics"]  # the predictions the comparison read are neither stored nor returned

    again = await client.post(f"/api/v1/concepts/{c['id']}/evaluate", headers=auth)
    assert again.status_code == 200, again.text
    assert {k: again.json()["baselines"][k] for k in ("regex", "tfidf_lr")} == {k: b[k] for k in ("regex", "tfidf_lr")}
    assert "_predicted" not in again.json()  # the evaluation is the metrics themselves


async def test_id_based_concept_has_no_regex(client, auth, labelled_run) -> None:  # noqa: ANN001
    ids = labelled_run.doc_ids
    positive = [ids[p] for p, lab in enumerate(labelled_run.labels) if lab == "bronchiolitis:confirmed"]
    negative = [ids[p] for p, lab in enumerate(labelled_run.labels) if lab == "otitis:confirmed"]
    resp = await create(client, auth, labelled_run, name="by id", kind="expression", expression="F0 > 0",
                        examples={"documents": {"positive": positive, "negative": negative}})
    assert resp.status_code == 201, resp.text
    b = resp.json()["baselines"]
    assert b["regex"] is None
    assert all(0.0 <= b["tfidf_lr"][k] <= 1.0 for k in ("precision", "recall", "f1"))


async def test_no_baselines_without_examples(client, auth, labelled_run) -> None:  # noqa: ANN001
    resp = await create(client, auth, labelled_run, name="bare", kind="expression", expression="F0 > 0")
    assert resp.status_code == 201, resp.text
    assert resp.json()["baselines"] is None and resp.json()["metrics"] is None


def test_regex_pattern_from_labels() -> None:
    assert baselines.regex_pattern(["bronchiolitis:confirmed", "bronchiolitis:suspected"]) == "bronchioli"
    assert baselines.regex_pattern(["acute_otitis_media:x"]) == "acute|otiti|media"
    assert baselines.regex_pattern(["a.b+c"]) == re.escape("a.b+c")
    assert baselines.regex_pattern([":x"]) is None


async def test_training_split_is_sampled_when_large(client, auth, labelled_run, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(baselines, "MAX_TFIDF_TRAIN", 100)
    resp = await create(client, auth, labelled_run, name="sampled", kind="probe", examples=CONFIRMED)
    assert resp.status_code == 201, resp.text
    tfidf = resp.json()["baselines"]["tfidf_lr"]
    assert tfidf["n_train"] == 100 and tfidf["sampled"] is True


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_concept_page_shows_words_alone_table(client, auth, labelled_run) -> None:  # noqa: ANN001
    c = (await create(client, auth, labelled_run, name="probe", kind="probe", examples=CONFIRMED)).json()
    page = (await client.get(f"/concepts/{c['id']}", headers=auth)).text
    assert "Words alone, same held-out split" in page
    table = re.search(r'<table [^>]*id="baselines".*?</table>', page, re.S).group(0)
    b = c["baselines"]
    assert "<code>bronchioli</code>" in table
    for row in (c["metrics"], b["regex"], b["tfidf_lr"]):
        assert f'<td class="num">{row["f1"]:.3f}</td>' in table
    for row in (b["regex"], b["tfidf_lr"]):  # the concept's F1 minus the method's, its interval and verdict
        d = row["f1_difference"]
        cell = f'{d["difference"]:+.3f} <span class="muted small">({d["low"]:+.3f} to {d["high"]:+.3f})</span>'
        assert cell in table
        verdict = ("within the noise" if not d["distinguishable"]
                   else "features better" if d["difference"] > 0 else "words better")
        assert verdict in table.split(cell, 1)[1].split("</td>", 1)[0]
    assert "|safe" not in Path("web/templates/partials/_concept_metrics.html").read_text()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_label_name_the_texts_never_use_is_no_comparison(client, auth, labelled_run) -> None:  # noqa: ANN001
    """Labels named in English over Italian notes: `otitis:confirmed` gives `otiti`, which no "otite media" note
    holds. The regex is still scored, and the page says it finds none of the positives, so its F1 of 0 is not
    read as words losing to features."""
    otitis = {"labels": {"positive": ["otitis:confirmed"]}}
    c = (await create(client, auth, labelled_run, name="otitis", kind="probe", examples=otitis)).json()
    regex = c["baselines"]["regex"]
    assert regex["pattern"] == "otiti" and regex["positive_coverage"] == 0.0 and regex["recall"] == 0.0
    page = (await client.get(f"/concepts/{c['id']}", headers=auth)).text
    note = re.search(r'<span [^>]*id="regex-not-a-word">(.*?)</span>', page, re.S)
    assert note and "found in 0.0% of the positive training documents" in note.group(1)
    bronchiolitis = (await create(client, auth, labelled_run, name="b", kind="probe", examples=CONFIRMED)).json()
    assert 'id="regex-not-a-word"' not in (await client.get(f"/concepts/{bronchiolitis['id']}", headers=auth)).text


RULED_OUT = r"sospetta|esclusa|otite|febbre"  # what a user would write against confirmed bronchiolitis


@pytest.mark.parametrize("match", ["positive", "negative"])
async def test_your_own_regex_is_scored_beside_the_concept(client, auth, labelled_run, match: str) -> None:  # noqa: ANN001
    pattern = r"bronchiolite|sibilante" if match == "positive" else RULED_OUT
    examples = {**CONFIRMED, "words_regex": pattern, "words_regex_match": match}
    c = (await create(client, auth, labelled_run, name=f"own {match}", kind="probe", examples=examples)).json()
    mine = c["baselines"]["words_regex"]
    assert mine["pattern"] == pattern and mine["match"] == match and c["baselines"]["words_regex_skipped"] is None
    _, _, test, y_test = split_here(labelled_run, {"bronchiolitis:confirmed"})
    texts = [note_text(i, lab) for i, lab in enumerate(labelled_run.labels)]
    found = np.array([re.search(pattern, texts[p], re.I) is not None for p in test])
    assert_figures(mine, scores(y_test, found if match == "positive" else ~found))
    d = mine["f1_difference"]
    assert d["difference"] == pytest.approx(c["metrics"]["f1"] - mine["f1"], abs=2e-4)
    if match == "negative":  # ruling out the other statuses beats the label's stem, and the list names the strongest
        assert mine["f1"] > c["baselines"]["regex"]["f1"]
        listed = (await client.get(f"/api/v1/concepts?sae_run_id={labelled_run.run_id}", headers=auth)).json()
        words = next(item["words"] for item in listed["items"] if item["id"] == c["id"])
        strongest = max(("regex", "words_regex", "tfidf_lr"), key=lambda m: c["baselines"][m]["f1"])
        assert words["method"] == strongest and words["f1"] == c["baselines"][strongest]["f1"]


async def test_a_regex_that_does_not_compile_is_refused_where(client, auth, labelled_run) -> None:  # noqa: ANN001
    resp = await create(client, auth, labelled_run, name="bad", kind="probe",
                        examples={**CONFIRMED, "words_regex": "(sospett"})
    assert resp.status_code == 422
    assert resp.json()["field"] == "body.examples.words_regex"
    assert "does not compile at position 8: missing )" in resp.json()["message"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_regex_past_its_time_is_not_scored_and_the_page_says_so(client, auth, labelled_run,  # noqa: ANN001
                                                                       monkeypatch) -> None:
    """A user's pattern may backtrack for ever: the search stops at the time allowed (here none is left), the
    concept is stored all the same, and its page says why that row is empty."""
    monkeypatch.setattr(baselines, "WORDS_REGEX_BUDGET_S", 0.0)
    c = (await create(client, auth, labelled_run, name="slow", kind="probe",
                      examples={**CONFIRMED, "words_regex": r"^(\w+\s?)*$"})).json()
    assert c["baselines"]["words_regex"] is None
    assert c["baselines"]["words_regex_skipped"].startswith("it ran past 0 s over the")
    row = re.search(r'<tr id="baseline-words-regex">.*?</tr>', (await client.get(f"/concepts/{c['id']}",
                                                                                 headers=auth)).text, re.S)
    assert row and "not scored: it ran past 0 s" in row.group(0)


def test_a_backtracking_pattern_stops_at_its_deadline() -> None:
    import time

    import regex

    slow = regex.compile(r"(x+x+)+y")
    found, late = baselines.search_all(slow, ["x" * 5000, "xy"], time.monotonic() + 0.05)
    assert late and found == [False, False]  # the second text is not searched once time is out
    found, late = baselines.search_all(regex.compile("xy"), ["x" * 50, "xy"], time.monotonic() + 5)
    assert not late and found == [False, True]


def test_the_words_model_reads_a_question_mark_and_a_marked_mention() -> None:
    # "bronchiolite?" is a hedge, "[tosse]" the mention a sentence is about: both are words to a user, and
    # scikit-learn's default token pattern drops them, leaving the two classes the same text
    hedged = [f"bronchiolite? giorno {i}" for i in range(12)] + [f"bronchiolite. giorno {i}" for i in range(12)]
    y = np.array([1] * 12 + [0] * 12)
    vectorizer, model = baselines._fit_tfidf(hedged, y, seed=0)
    assert {"?", "bronchiolite ?"} <= set(vectorizer.vocabulary_)
    assert model.predict(vectorizer.transform(["bronchiolite? giorno 99", "bronchiolite. giorno 99"])).tolist() == [1, 0]

    marked = [f"no [tosse], febbre {i}" for i in range(12)] + [f"no tosse, [febbre] {i}" for i in range(12)]
    vectorizer, model = baselines._fit_tfidf(marked, y, seed=0)
    assert {"[", "]", "tosse ]"} <= set(vectorizer.vocabulary_)
    assert model.predict(vectorizer.transform(["no [tosse], febbre", "no tosse, [febbre]"])).tolist() == [1, 0]


async def test_dense_vectors_beside_the_words_on_the_same_split(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    """With the run's document vectors stored, the concept's baselines hold dense LR on them, equal to an
    independent scikit-learn computation on the same training split (C by CV on the training rows only)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from gateway.db import session_scope
    from gateway.domain.runs import repo as run_repo
    from tests.factories import write_vector_shards

    rng = np.random.default_rng(5)
    y_all = np.array([int(lab == "bronchiolitis:confirmed") for lab in labelled_run.labels])
    vectors = (rng.standard_normal((len(y_all), 8)) + 0.8 * y_all[:, None] * np.eye(8)[0]).astype(np.float32)
    with session_scope(app.state.factory) as session:
        sae = run_repo.get_sae_run(session, run_id=labelled_run.run_id)
        write_vector_shards(app.state.store, run_repo.get_embedding_run(session, run_id=sae.embedding_run_id),
                            vectors, shard_size=150)
    c = (await create(client, auth, labelled_run, name="dense", kind="probe", examples=CONFIRMED)).json()
    train, y_train, test, y_test = split_here(labelled_run, {"bronchiolitis:confirmed"})
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    search = GridSearchCV(LogisticRegression(class_weight="balanced", max_iter=2000), {"C": [0.01, 0.1, 1, 10, 100]},
                          scoring="f1", cv=StratifiedKFold(3, shuffle=True, random_state=0)).fit(unit[train], y_train)
    dense = c["baselines"]["dense_lr"]
    assert dense["C"] == search.best_params_["C"] and dense["n_train"] == len(train)
    assert_figures(dense, scores(y_test, search.best_estimator_.predict(unit[test])))
    assert 0.3 < dense["f1"] < 0.95 and dense["f1_difference"]["difference"] == pytest.approx(
        c["metrics"]["f1"] - dense["f1"], abs=2e-4)
    page = (await client.get(f"/concepts/{c['id']}", headers=auth)).text
    assert 'id="baseline-dense"' in page and "Dense vectors + logistic regression" in page
