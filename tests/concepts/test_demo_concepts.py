"""The demo's two concepts: a probe for confirmed bronchiolitis (not suspected, not other
conditions), and the expression a clinician would write, whose two features are found from the
training split; each made once."""

from __future__ import annotations

import pytest

from gateway.domain.auth.service import Principal
from gateway.domain.concepts.demo import EXPRESSION_NAME, PROBE_NAME, create_demo_concepts

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_demo_concepts_on_a_run_with_the_demo_labels(app, client, auth, labelled_run) -> None:  # noqa: ANN001
    ids = await create_demo_concepts(app.state, labelled_run.run_id, Principal(None, "demo"))
    probe, expr = [(await client.get(f"/api/v1/concepts/{i}", headers=auth)).json() for i in ids]
    assert (probe["name"], probe["kind"], expr["name"], expr["kind"]) == (PROBE_NAME, "probe", EXPRESSION_NAME,
                                                                        "expression")
    # F0 fires on every bronchiolitis note, F1 on the suspected ones: the query writes itself, by name.
    assert expr["expression"] == 'label:"bronchiolite" > 0 AND NOT label:"sospetto" > 0'
    assert expr["metrics"]["f1"] > 0.9 and probe["metrics"]["f1"] > 0.7  # linear: "F0 but not F1" only roughly
    assert probe["examples"]["labels"] == {"positive": ["bronchiolitis:confirmed"], "negative": []}
    assert probe["metrics"]["n_test"] == 100  # a quarter of every note: confirmed against all the others
    again = await create_demo_concepts(app.state, labelled_run.run_id, Principal(None, "demo"))
    assert again == ids
    assert (await client.get("/api/v1/concepts", headers=auth)).json()["total"] == 2
