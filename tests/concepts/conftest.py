"""An SAE run with labelled documents, without training one: a real upload (labels and metadata),
then the run's rows and its codes artifact written the way the SAE job records them.

The codes are built so that the answer is known: F0 ("bronchiolite") fires on every bronchiolitis
note, confirmed or suspected; F1 ("sospetto") on the suspected ones and on a tenth of the others;
F2..F31 are noise."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

from gateway.db import session_scope
from gateway.domain.features import repo as feature_repo
from gateway.domain.features.models import Interpretation
from gateway.search.space import clear_cache
from tests.factories import add_coded_sae_run

N_DOCS, N_FEATURES = 400, 32
LABELS = {0: "bronchiolite", 1: "sospetto", 2: "otite media", 3: "febbre"}
STATUS = ("bronchiolitis:confirmed", "bronchiolitis:suspected", "otitis:confirmed", "fever:confirmed")


@dataclass
class LabelledRun:
    run_id: int
    dataset_id: int
    codes: sp.csr_matrix  # float32 [docs, features]
    labels: list[str]  # the primary label of each document, by position
    doc_ids: list[int]  # the gateway's document id, by position


def known_codes(seed: int = 0) -> tuple[sp.csr_matrix, list[str]]:
    rng = np.random.default_rng(seed)
    labels = [STATUS[i % 4] for i in range(N_DOCS)]
    dense = np.where(rng.random((N_DOCS, N_FEATURES)) < 0.12, rng.exponential(1.0, (N_DOCS, N_FEATURES)), 0)
    bronch = np.array([lab.startswith("bronchiolitis") for lab in labels])
    suspected = np.array([lab.endswith("suspected") for lab in labels])
    dense[:, 0] = np.where(bronch, rng.uniform(0.5, 2.0, N_DOCS), 0)
    dense[:, 1] = np.where(suspected | (rng.random(N_DOCS) < 0.1), rng.uniform(0.3, 1.5, N_DOCS), 0)
    return sp.csr_matrix(dense.astype(np.float32)), labels


def note_text(i: int, label: str) -> str:
    """A note's text (no commas): the words a regex or TF-IDF can read, with misses and decoys."""
    phrase = {"bronchiolitis:confirmed": "bronchiolite" if i % 6 else "respiro sibilante",
              "bronchiolitis:suspected": "sospetta bronchiolite", "otitis:confirmed": "otite media",
              "fever:confirmed": "febbre alta esclusa bronchiolite" if i % 5 == 0 else "febbre alta"}[label]
    return f"visita numero {i} {phrase}"


def add_interpretation(session, *, run_id: int, index: int, label: str) -> None:  # noqa: ANN001
    feat, _ = feature_repo.get_feature(session, sae_run_id=run_id, index=index)
    session.add(Interpretation(feature_id=feat.id, backend="keywords", label=label, score=0.9, reliable=True,
                               evidence={}))
    session.flush()
    feature_repo.set_best_interpretation(session, feature=feat)


def write_run(app, dataset_id: int, codes: sp.csr_matrix) -> int:  # noqa: ANN001
    """The rows and artifacts a finished SAE run has, for these codes."""
    with session_scope(app.state.factory) as session:
        run = add_coded_sae_run(session, app.state.store, dataset_id=dataset_id, codes=codes)
        for index, label in LABELS.items():
            add_interpretation(session, run_id=run.id, index=index, label=label)
        return run.id


@pytest.fixture
async def labelled_run(app, client, auth) -> LabelledRun:  # noqa: ANN001
    clear_cache()
    codes, labels = known_codes()
    rows = "\n".join(f"N{i:04d},{note_text(i, lab)},{lab},{i % 7}" for i, lab in enumerate(labels))
    resp = await client.post("/api/v1/datasets", headers=auth,
                             files={"file": ("notes.csv", f"id,text,labels,ward\n{rows}\n".encode())})
    assert resp.status_code == 201, resp.text
    dataset_id = resp.json()["id"]
    docs = (await client.get(f"/api/v1/datasets/{dataset_id}/documents?limit=500", headers=auth)).json()["items"]
    doc_ids = [d["id"] for d in sorted(docs, key=lambda d: d["position"])]
    assert len(doc_ids) == N_DOCS
    return LabelledRun(write_run(app, dataset_id, codes), dataset_id, codes, labels, doc_ids)


def tuned_tfidf_predictions(train_texts: list[str], y_train, test_texts: list[str]):  # noqa: ANN001, ANN201
    """TF-IDF 1-2-grams (words, `?`, `[`, `]`) + balanced logistic regression with C by stratified 3-fold CV on F1
    among 0.1 to 1000, written here from scikit-learn's documentation: (held-out predictions, the C chosen)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2, token_pattern=r"(?u)\b\w\w+\b|[?\[\]]")
    search = GridSearchCV(LogisticRegression(class_weight="balanced", solver="liblinear", max_iter=1000),
                          {"C": [0.1, 1, 10, 100, 1000]}, scoring="f1",
                          cv=StratifiedKFold(3, shuffle=True, random_state=0))
    search.fit(vec.fit_transform(train_texts), y_train)
    return search.best_estimator_.predict(vec.transform(test_texts)), search.best_params_["C"]

