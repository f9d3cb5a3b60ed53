"""The demo's ready concepts on its SAE run, for "every note with a confirmed bronchiolitis,
not the suspected ones": a sparse probe trained on the corpus's labels (on the notes' codes, the
max over their clauses' when the run has segments), a saved expression written from feature names
as a clinician would write it, on a run with segment codes the same probe read only on the
clauses that name bronchiolitis (`segment_words`), and a probe with no labels yet, to be labelled
note by note from the queue (seeded by the bronchiolitis name).

The expression: the words a clinician types into the run's label search (`bronchiolit`, and the
hedge words `sospett`, `esclus`, `possibil`, `probabil`, `pregress`: those of bench/status.py's regex
with cues), the reliable names each search returns, and `SEGMENT((<topic names>) AND NOT (<hedge
names>))` (one clause names it and does not hedge it; each name above its calibrated threshold;
without SEGMENT on a run without segments): no label of the corpus is read, and the expression is
the one `bench/status_expression.py` scores. Where the search finds no reliable name for the topic or
none for the hedges, two features picked from the data instead (on the training split, so the
held-out figures stay honest): the one that fires most like the bronchiolitis notes, without the one
that fires on suspected notes more than on confirmed ones.

Positive: `bronchiolitis:confirmed`; negative: every other note, the suspected bronchiolitis ones
among them. Each concept's page also scores, as the user's own regex, the rule with the same hedge words
(`CUES_REGEX`), so the features are shown against what a clinician would write with words. A probe trained
on confirmed against suspected notes alone would never have seen the
other conditions, and applied to the whole corpus would match most of them."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import regex

from contracts.concepts import ConceptCreate, Examples, LabelClasses
from contracts.labels import QueueSeed
from contracts.search import LabelSearch
from gateway.db import session_scope
from gateway.domain.auth.service import Principal
from gateway.domain.concepts import repo
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.examples import labelled_documents
from gateway.domain.concepts.service import create_concept, run_data
from gateway.search.expressions import SearchSpace, UnknownLabelError, resolve_labels
from gateway.search.label_rank import expression_from_names, query_terms
from gateway.search.service import label_query

CONFIRMED, SUSPECTED = "bronchiolitis:confirmed", "bronchiolitis:suspected"
PROBE_NAME = "Confirmed bronchiolitis (probe)"
EXPRESSION_NAME = "Confirmed bronchiolitis (expression)"
SCOPED_NAME = "Confirmed bronchiolitis (probe on its clauses)"
LABELLING_NAME = "Confirmed bronchiolitis (labelling)"
LABELLING_SEED = 'label:"bronchiolite"'
"""The labelling concept's seed: the name a clinician finds for the word (the demo's run names its bronchiolitis
features so); a run without that name starts from the word as a text query instead."""
SCOPE_WORDS = ["bronchiolit"]
TOPIC_WORDS = ("bronchiolit",)
HEDGE_WORDS = ("sospett", "?", "esclus", "possibil", "probabil", "pregress")
"""What a clinician types into the label search: the words of bench/status_expression.py's USER_WORDS["demo"]
(its regex with cues); "?" finds no name (the search reads words)."""
_CUE = "(?:" + "|".join(regex.escape(w) for w in HEDGE_WORDS) + ")"
CUES_REGEX = rf"(?<!{_CUE}[^.\n]{{0,40}})bronchiolit\w*(?![^.\n]{{0,25}}{_CUE})"
"""The user's own rule beside the demo's concepts: a mention of bronchiolitis with none of the hedge words in the
40 characters before it or the 25 after, within its sentence. The rule of bench/status.py's `regex_cues` for the
demo written as one pattern (`regex`'s variable-length look-behind): the same verdict on all 2,000 demo notes."""
EXAMPLES = Examples(labels=LabelClasses(positive=[CONFIRMED]), words_regex=CUES_REGEX)
SEARCH_LIMIT = 20
"""Results of one label search read (the search page's page size)."""


WRITTEN = ("Written from the label search, as a clinician would: the reliable names found for "
           + ", ".join(TOPIC_WORDS) + ", without those found for the hedge words "
           + ", ".join(w for w in HEDGE_WORDS if query_terms(w))
           + ", each above its calibrated threshold where it has one, in one clause.")
PICKED = "The bronchiolitis feature, without the feature that fires on suspicion: two features picked from the data."


def _reference(space: SearchSpace, index: int) -> str:
    """`label:"…"` when the feature's shown label names it unambiguously, else `F<index>`."""
    label = space.labels.get(index)
    if label and '"' not in label:
        try:
            if resolve_labels(space, label) == [index]:
                return f'label:"{label}"'
        except UnknownLabelError:
            pass
    return f"F{index}"


def demo_expression(space: SearchSpace, bronchiolitis: np.ndarray, confirmed: np.ndarray, suspected: np.ndarray) -> str:
    """The topic feature: best F1 at firing for bronchiolitis notes (any status) against all others;
    the hedge feature: the largest gap in firing rate, suspected minus confirmed notes (both taken
    from the training split)."""
    fires = space.codes.copy()
    fires.data = (fires.data > 0).astype(np.float32)  # [docs, n] 0/1, CSC
    tp = np.asarray(fires[bronchiolitis].sum(0)).ravel()
    f1 = 2 * tp / (len(bronchiolitis) + np.asarray(fires.sum(0)).ravel() + 1e-9)
    topic = int(np.argmax(f1))
    rate = lambda rows: np.asarray(fires[rows].sum(0)).ravel() / max(len(rows), 1)  # noqa: E731
    gap = rate(suspected) - rate(confirmed)
    gap[topic] = -np.inf
    hedge = int(np.argmax(gap))
    inner = f"{_reference(space, topic)} > 0 AND NOT {_reference(space, hedge)} > 0"
    # Within one sentence where the run has segment codes: "a sentence that names bronchiolitis
    # and does not hedge it", not "a note with bronchiolitis somewhere and no hedge anywhere".
    return f"SEGMENT({inner})" if space.segments is not None else inner


async def written_expression(state: Any, sae_run_id: int, scoped: bool) -> str | None:
    """The expression written from what the label search returns for TOPIC_WORDS and HEDGE_WORDS (reliable
    names only); None where no reliable name holds the topic or none a hedge (the concept is "confirmed, not
    suspected")."""
    found: dict[str, list[str]] = {}
    for word in (*TOPIC_WORDS, *HEDGE_WORDS):
        if query_terms(word):  # "?" holds no word the label search reads
            result = await label_query(state, sae_run_id, LabelSearch(mode="label", query=word, limit=SEARCH_LIMIT))
            found[word] = [hit.label for hit in result.items if hit.reliable and hit.label]
    expression, topic_names, cue_names = expression_from_names(found, TOPIC_WORDS, HEDGE_WORDS, scoped)
    return expression if topic_names and cue_names else None


def _plan(state: Any, sae_run_id: int) -> str:
    with session_scope(state.factory) as session:
        data = run_data(session, state.store, sae_run_id)
        labelled = labelled_documents(session, data.dataset, EXAMPLES)
        labels = dict(repo.document_labels(session, dataset_id=data.dataset.id))
    train = labelled.positions[labelled.split(EXAMPLES).train]
    confirmed = np.array([p for p in train if CONFIRMED in labels.get(int(p), [])], dtype=np.int64)
    suspected = np.array([p for p in train if SUSPECTED in labels.get(int(p), [])], dtype=np.int64)
    # the training split's bronchiolitis notes only (every note's were read before: the held-out
    # ones helped choose the topic feature that they then scored)
    bronchiolitis = np.union1d(confirmed, suspected)
    return demo_expression(data.space, bronchiolitis, confirmed, suspected)


async def create_labelling_concept(state: Any, sae_run_id: int, principal: Principal, *, scoped: bool = False) -> int:
    """The concept to label note by note: a probe with no labels yet, its queue seeded by LABELLING_SEED (or, where
    the run has no feature of that name, by the word as a text query); with `scoped` (a run with segment codes),
    it reads the clauses that name bronchiolitis, as the scoped probe does: a note holds several conditions."""
    description = ("Label notes one by one: a confirmed bronchiolitis is positive, a suspected, ruled-out or past "
                   "one negative. The probe retrains on the labels as they come.")
    body = ConceptCreate(sae_run_id=sae_run_id, name=LABELLING_NAME, kind="probe", description=description,
                         seed=QueueSeed(expression=LABELLING_SEED), segment_words=SCOPE_WORDS if scoped else None)
    try:
        return await create_concept(state, body, principal, None)
    except ConceptInputError as exc:
        if exc.field != "seed.expression":
            raise
    body = body.model_copy(update={"seed": QueueSeed(text="bronchiolite")})
    return await create_concept(state, body, principal, None)


async def create_demo_concepts(state: Any, sae_run_id: int, principal: Principal) -> list[int]:
    """The concepts (each once: a demo started again finds them by name); returns their ids: the
    probe, the expression, the scoped probe where the run has segment codes, and the concept to label."""
    names = (PROBE_NAME, EXPRESSION_NAME, SCOPED_NAME, LABELLING_NAME)
    with session_scope(state.factory) as session:
        existing = {n: repo.find_concept(session, sae_run_id=sae_run_id, name=n) for n in names}
        ids = {n: c.id for n, c in existing.items() if c is not None}
        has_segments = run_data(session, state.store, sae_run_id).space.segments is not None
    if PROBE_NAME not in ids:
        body = ConceptCreate(sae_run_id=sae_run_id, name=PROBE_NAME, kind="probe", examples=EXAMPLES,
                             description="A probe on the SAE features: notes labelled with a confirmed "
                                         "bronchiolitis against every other note, suspected ones included.")
        ids[PROBE_NAME] = await create_concept(state, body, principal, None)
    if EXPRESSION_NAME not in ids:
        expression = await written_expression(state, sae_run_id, scoped=has_segments)
        description = WRITTEN if expression else PICKED
        if expression is None:
            expression = await asyncio.to_thread(_plan, state, sae_run_id)
        body = ConceptCreate(sae_run_id=sae_run_id, name=EXPRESSION_NAME, kind="expression", expression=expression,
                             examples=EXAMPLES, description=description)
        ids[EXPRESSION_NAME] = await create_concept(state, body, principal, None)
    if has_segments and SCOPED_NAME not in ids:
        body = ConceptCreate(sae_run_id=sae_run_id, name=SCOPED_NAME, kind="probe", examples=EXAMPLES,
                             segment_words=SCOPE_WORDS,
                             description="The probe, read only on the clauses that name bronchiolitis: the word "
                                         "finds the mention, the features read its status.")
        ids[SCOPED_NAME] = await create_concept(state, body, principal, None)
    if LABELLING_NAME not in ids:
        ids[LABELLING_NAME] = await create_labelling_concept(state, sae_run_id, principal, scoped=has_segments)
    return [ids[n] for n in names if n in ids]
