"""The demo's two concepts: a probe for confirmed bronchiolitis (not suspected, not other
conditions), and the expression a clinician would write, from what the run's label search returns
for the topic's and the hedges' words (or, where no reliable name holds the topic, two features
found from the training split); each made once."""

from __future__ import annotations

import pytest

from gateway.db import session_scope
from gateway.domain.auth.service import Principal
from gateway.demo.corpus import generate_notes
from gateway.domain.concepts.demo import CUES_REGEX, EXPRESSION_NAME, LABELLING_NAME, PROBE_NAME, create_demo_concepts
from gateway.domain.concepts.examples import labelled_documents
from gateway.domain.concepts.service import run_data

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_demo_concepts_on_a_run_with_the_demo_labels(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    ids = await create_demo_concepts(app.state, labelled_run.run_id, Principal(None, "demo"))
    probe, expr, labelling = [(await client.get(f"/api/v1/concepts/{i}", headers=auth)).json() for i in ids]
    assert (probe["name"], probe["kind"], expr["name"], expr["kind"]) == (PROBE_NAME, "probe", EXPRESSION_NAME,
                                                                        "expression")
    assert (labelling["name"], labelling["kind"], labelling["probe"]) == (LABELLING_NAME, "probe", None)
    assert labelling["seed"]["expression"] == 'label:"bronchiolite"' and labelling["labelling"]["segment_words"] is None
    # the label search finds "bronchiolite" (F0, every bronchiolitis note) for `bronchiolit` and "sospetto" (F1,
    # the suspected ones) for `sospett`: the query writes itself, by name (a run without segments: no SEGMENT)
    assert expr["expression"] == '(label:"bronchiolite") AND NOT (label:"sospetto")'
    assert expr["description"].startswith("Written from the label search")
    assert expr["metrics"]["f1"] > 0.9 and probe["metrics"]["f1"] > 0.7  # linear: "F0 but not F1" only roughly
    assert probe["examples"]["labels"] == {"positive": ["bronchiolitis:confirmed"], "negative": []}
    assert probe["metrics"]["n_test"] == 100  # a quarter of every note: confirmed against all the others
    for concept in (probe, expr):  # beside each, the rule a clinician would write with the same hedge words
        assert concept["examples"]["words_regex"] == CUES_REGEX
        assert concept["baselines"]["words_regex"]["pattern"] == CUES_REGEX
    again = await create_demo_concepts(app.state, labelled_run.run_id, Principal(None, "demo"))
    assert again == ids
    assert (await client.get("/api/v1/concepts", headers=auth)).json()["total"] == 3


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_the_expression_s_features_are_chosen_on_the_training_split(app, client, auth, labelled_run,  # noqa: ANN001
                                                                          monkeypatch) -> None:  # noqa: ANN001
    """Where no reliable name holds the topic's word, the expression's two features are chosen from the data:
    every note they are chosen from is in the probe's training split, none of the held-out notes its figures
    are computed on."""
    from gateway.domain.concepts import demo
    from gateway.domain.features.models import Interpretation

    with session_scope(app.state.factory) as session:  # "bronchiolite" shown, but not reliable
        session.query(Interpretation).filter(Interpretation.label == "bronchiolite").update({"reliable": False})

    seen: dict[str, list[int]] = {}
    original = demo.demo_expression

    def recording(space, bronchiolitis, confirmed, suspected):  # noqa: ANN001, ANN202
        seen.update(bronchiolitis=bronchiolitis.tolist(), confirmed=confirmed.tolist(), suspected=suspected.tolist())
        return original(space, bronchiolitis, confirmed, suspected)

    monkeypatch.setattr(demo, "demo_expression", recording)
    ids = await create_demo_concepts(app.state, labelled_run.run_id, Principal(None, "demo"))
    probe, expr, _ = [(await client.get(f"/api/v1/concepts/{i}", headers=auth)).json() for i in ids]
    assert expr["expression"] == 'label:"bronchiolite" > 0 AND NOT label:"sospetto" > 0'
    assert expr["description"] == demo.PICKED
    with session_scope(app.state.factory) as session:  # the probe's split: the notes it trained on
        data = run_data(session, app.state.store, labelled_run.run_id)
        labelled = labelled_documents(session, data.dataset, demo.EXAMPLES)
    train = set(labelled.positions[labelled.split(demo.EXAMPLES).train].tolist())
    assert len(train) == probe["metrics"]["n_train"]
    with_status = {i for i, lab in enumerate(labelled_run.labels) if lab.startswith("bronchiolitis:")}
    assert set(seen["bronchiolitis"]) == with_status & train  # every training one, no held-out one
    assert set(seen["confirmed"]) | set(seen["suspected"]) <= train


def test_the_cues_regex_is_the_status_benchmark_s_rule() -> None:
    """One pattern for bench/status.py's `regex_cues` on the demo (a mention with no hedge word 40 characters before
    it or 25 after, within its sentence), checked against that rule written out in Python on 2,000 demo notes."""
    import re

    import regex

    cue = re.compile(r"sospett|\?|esclus|possibil|probabil|pregress", re.IGNORECASE)

    def by_hand(text: str) -> bool:
        for m in re.finditer(r"bronchiolit\w*", text, re.IGNORECASE):
            left = max(text.rfind(".", 0, m.start()), text.rfind("\n", 0, m.start())) + 1
            ends = [i for i in (text.find(".", m.end()), text.find("\n", m.end())) if i >= 0]
            right = min(ends) if ends else len(text)
            window = text[max(left, m.start() - 40):min(right, m.end() + 25)]
            if not cue.search(window.replace(m.group(0), " ")):
                return True
        return False

    pattern = regex.compile(CUES_REGEX, regex.IGNORECASE)
    texts = [note.text for note in generate_notes(n=2000, seed=0)]
    verdicts = [(pattern.search(t) is not None, by_hand(t)) for t in texts]
    assert all(a == b for a, b in verdicts)
    assert 0.1 < sum(a for a, _ in verdicts) / len(texts) < 0.9  # it tells notes apart
