"""Naming runs: every feature named and scored with a control, resumed after a stop, families named; the
order features are named in; keywords as evidence and as the fallback of a language model; copies not shown."""

from __future__ import annotations

import gc

import pytest

from contracts.interpret import BackendOptions, FeatureInterpretations, InterpretRunPayload
from contracts.sae import FeatureFamily
from services.interpreter.backends.base import (Backend, BackendOutputError, LabelCandidate, NamingRequest,
                                                NamingResult)
from services.interpreter.config import InterpreterSettings
from services.interpreter.corpus import load_corpus
from services.interpreter.naming import corpus_language, naming_order
from services.interpreter.runs import InterpretRunStopped, name_run, read_shard, shard_key

from tests.interpreter.conftest import TOPICS, topic_embed  # noqa: E402
from tests.interpreter.naming_reference import without_times


def payload(ref, prefix: str, **kw) -> InterpretRunPayload:
    kw.setdefault("backends", [BackendOptions(backend="keywords")])
    return InterpretRunPayload(run_id=1, corpus=ref, artifact_prefix=prefix, batch_features=3, **kw)


@pytest.mark.anyio
async def test_run_names_scores_and_controls(synthetic):
    store, ref = synthetic
    progress = []
    fams = [FeatureFamily(iteration=0, parent=0, children=[1, 2], edges=[(0, 1), (0, 2)])]
    result = await name_run(payload(ref, "interp/full", families=fams), store, settings=InterpreterSettings(),
                            embed_texts=topic_embed, on_progress=progress.append)
    assert result.n_features == 8 and result.n_named == 7 and result.n_skipped == 1  # feature 6 is too rare
    records = [r for s in range(3) for r in read_shard(store, shard_key("interp/full", s))[0]]
    assert [r.feature for r in records] == naming_order(load_corpus(store, ref))  # densest first
    records.sort(key=lambda r: r.feature)
    for r in records[:6]:
        best = r.interpretations[r.best]
        assert TOPICS[r.feature].split()[0] in best.label or any(w in best.label for w in TOPICS[r.feature].split())
        assert best.score_embedding > 0.9 and best.reliable
        assert best.control_embedding is not None
        assert best.backend == "keywords" and best.evidence.holdout_activating
        assert r.keywords and best.evidence.keywords == r.keywords
        assert any(TOPICS[r.feature].split()[0] in k for k in r.keywords)
    # another feature's label: near chance on the whole (feature 7 mixes topics, so its phrase may fit one)
    assert sum(r.interpretations[r.best].control_embedding for r in records[:6]) / 6 < 0.6
    # each alternative phrase calibrated on the name's own segments, with its own curve (shown where it replaces it)
    alternatives = [(i, a) for r in records for i in r.interpretations for a in i.alternatives]
    assert alternatives
    for interp, alt in alternatives:
        assert alt.precision_curve and alt.precision_curve[-1][2] == interp.precision_curve[-1][2] == interp.calibrated_on
    assert any(alt.precision_curve != interp.precision_curve for interp, alt in alternatives)
    # each alternative scored on its own embedding (the lower of that and its near-miss AUROC), not on its name's
    for interp, alt in alternatives:
        assert alt.score_embedding is not None
        assert alt.score == min(x for x in (alt.score_embedding, alt.score_near_miss) if x is not None)
    assert any(alt.score_embedding != interp.score_embedding for interp, alt in alternatives)
    # what each name holds on: none without a threshold, else at most the units where the feature reaches it
    for r in records[:6]:
        for n in [*r.interpretations, *(a for i in r.interpretations for a in i.alternatives)]:
            assert (n.holds_on is None) == (n.threshold is None)
            assert n.holds_on is None or 0 <= n.holds_on <= r.n_activating
    assert any(i.holds_on for r in records[:6] for i in r.interpretations)
    assert records[6].skipped and records[6].best is None
    assert progress[-1].done == progress[-1].total == 8 and progress[-1].unit == "features"
    assert result.families is not None and b'"parent":0' in store.read_bytes(result.families.uri).replace(b" ", b"")


@pytest.mark.anyio
async def test_stopped_run_resumes_with_identical_results(synthetic):
    store, ref = synthetic
    calls = {"n": 0}

    def stop_after_first_batch() -> bool:
        calls["n"] += 1
        return calls["n"] > 1

    with pytest.raises(InterpretRunStopped):
        await name_run(payload(ref, "interp/resumed"), store, settings=InterpreterSettings(),
                       embed_texts=topic_embed, should_stop=stop_after_first_batch)
    assert store.exists(shard_key("interp/resumed", 0)) and not store.exists(shard_key("interp/resumed", 1))
    resumed = await name_run(payload(ref, "interp/resumed"), store, settings=InterpreterSettings(),
                             embed_texts=topic_embed)
    whole = await name_run(payload(ref, "interp/whole"), store, settings=InterpreterSettings(),
                           embed_texts=topic_embed)
    assert resumed.resumed_batches == 1 and whole.resumed_batches == 0
    for s in range(3):
        a, _ = read_shard(store, shard_key("interp/resumed", s))
        b, _ = read_shard(store, shard_key("interp/whole", s))
        strip = lambda rs: [[i.model_dump(exclude={"created_at"}) for i in r.interpretations] for r in rs]  # noqa: E731
        assert strip(a) == strip(b)
    again = await name_run(payload(ref, "interp/resumed"), store, settings=InterpreterSettings(), embed_texts=None)
    assert again == resumed  # result.json: a finished run is not redone


@pytest.mark.anyio
async def test_a_child_process_drawing_ahead_names_as_one_process_and_is_stopped(synthetic, monkeypatch):
    """PRISMA_INTERPRETER_AHEAD_PROCESS: with it (where a child can be forked), a child draws the groups ahead and
    is stopped when the run ends; without it none is made; the shards are the same."""
    from services.interpreter import ahead as ahead_module, naming as naming_module, runs as runs_module

    if not ahead_module.can_fork():
        pytest.skip("needs fork and two cores")
    made: list = []

    class Watched(ahead_module.Ahead):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self._worker._process)

    monkeypatch.setattr(naming_module, "Ahead", Watched)
    monkeypatch.setattr(runs_module, "PREPARE_BATCHES", 2)  # groups of two batches of 3: several groups ahead
    store, ref = synthetic
    await name_run(payload(ref, "interp/child"), store, settings=InterpreterSettings(ahead_process=True),
                   embed_texts=topic_embed)
    assert len(made) == 1 and not made[0].is_alive()  # one child, stopped with the run
    await name_run(payload(ref, "interp/alone"), store, settings=InterpreterSettings(ahead_process=False),
                   embed_texts=topic_embed)
    assert len(made) == 1
    strip = lambda rs: [without_times(r.model_dump(mode="json")) for r in rs]  # noqa: E731
    for s in range(3):
        assert strip(read_shard(store, shard_key("interp/child", s))[0]) == strip(
            read_shard(store, shard_key("interp/alone", s))[0])


@pytest.mark.anyio
async def test_the_heap_is_trimmed_after_each_batch(synthetic, monkeypatch):
    import services.interpreter.runs as runs

    store, ref = synthetic
    trims: list[int] = []
    monkeypatch.setattr(runs, "trim_heap", lambda: trims.append(1) or True)
    await name_run(payload(ref, "interp/trimmed"), store, settings=InterpreterSettings(), embed_texts=topic_embed)
    assert len(trims) == 3  # 8 features, 3 a batch


def live_records() -> int:
    """FeatureInterpretations objects alive in this process."""
    gc.collect()
    return sum(type(o) is FeatureInterpretations for o in gc.get_objects())


@pytest.mark.anyio
async def test_a_run_holds_only_the_batch_in_hand(synthetic):
    """Memory bounded by the batches in hand: once a batch is in its shard, its records are let go; a run of
    12,288 features kept every one (their evidence ids), tens of KB each. The batches prepared ahead of it
    (runs.PREPARE_BATCHES a group, this group and the next) are held too."""
    store, ref = synthetic
    held: list[int] = []
    await name_run(payload(ref, "interp/bounded"), store, settings=InterpreterSettings(), embed_texts=topic_embed,
                   on_progress=lambda _p: held.append(live_records()))
    # the batch just written and those prepared after it (8 features, 3 a batch, all prepared at once), never the
    # ones before it
    assert held == [8, 5, 2]


@pytest.mark.anyio
async def test_controls_come_from_the_latest_labels_named(synthetic, monkeypatch):
    """The control pool is the best labels of the latest POOL features named, before this batch."""
    import services.interpreter.runs as runs
    from services.interpreter.naming import Namer

    store, ref = synthetic
    monkeypatch.setattr(runs, "POOL", 4)
    pools: list[list[str]] = []
    name_features = Namer.name_features

    async def spy(self, features, control_pool=()):  # noqa: ANN001, ANN202
        pools.append(list(control_pool))
        return await name_features(self, features, control_pool)

    monkeypatch.setattr(Namer, "name_features", spy)
    await name_run(payload(ref, "interp/pool"), store, settings=InterpreterSettings(), embed_texts=topic_embed)
    records = [r for s in range(3) for r in read_shard(store, shard_key("interp/pool", s))[0]]
    best = [r.interpretations[r.best].label if r.best is not None else None for r in records]
    assert pools[0] == [] and pools[1] == [lab for lab in best[:3] if lab]
    assert pools[2] == [lab for lab in best[2:6] if lab] and len(pools[2]) >= 3  # the latest 4, one may be skipped


@pytest.mark.anyio
async def test_a_full_label_cache_starts_again_without_changing_a_name(synthetic, monkeypatch):
    """The label-vector cache is bounded (naming.EMBED_CACHE): when full it starts again from the texts
    in hand (clearing it outright lost them: KeyError); names and scores are those of a roomy cache."""
    import services.interpreter.naming as naming

    store, ref = synthetic
    await name_run(payload(ref, "interp/roomy"), store, settings=InterpreterSettings(), embed_texts=topic_embed)
    monkeypatch.setattr(naming, "EMBED_CACHE", 10)
    await name_run(payload(ref, "interp/small"), store, settings=InterpreterSettings(), embed_texts=topic_embed)
    for s in range(3):
        small, roomy = (read_shard(store, shard_key(f"interp/{p}", s))[0] for p in ("small", "roomy"))
        strip = lambda rs: [[i.model_dump(exclude={"created_at"}) for i in r.interpretations] for r in rs]  # noqa: E731
        assert strip(small) == strip(roomy)


def test_naming_order_is_the_browse_order_and_language_is_found(synthetic):
    store, ref = synthetic
    corpus = load_corpus(store, ref)
    order = naming_order(corpus)
    density = corpus.codes.getnnz(axis=0)
    assert sorted(order) == list(range(corpus.n_features)) and naming_order(corpus, "index") == sorted(order)
    assert all(density[a] >= density[b] for a, b in zip(order, order[1:]))
    assert corpus_language(["Il bambino ha la febbre e la tosse da tre giorni, con difficoltà respiratoria."]) == "it"
    assert corpus_language(["The child has had a fever and a cough for three days."]) == "en"


@pytest.mark.anyio
async def test_limit_names_the_first_features_of_the_order(synthetic):
    store, ref = synthetic
    result = await name_run(payload(ref, "interp/limited", limit=4), store, settings=InterpreterSettings(),
                            embed_texts=topic_embed)
    records = [r for s in range(2) for r in read_shard(store, shard_key("interp/limited", s))[0]]
    assert result.n_features == 4 and [r.feature for r in records] == naming_order(load_corpus(store, ref))[:4]


class ScriptedLLM(Backend):
    """A language-model back-end that fails on feature 0, copies an excerpt on feature 1 and names the
    rest with an unrelated phrase; it keeps every request."""

    name = "llamacpp"
    model = "scripted"

    def __init__(self) -> None:
        self.requests: list[NamingRequest] = []

    async def name_feature(self, request: NamingRequest) -> NamingResult:
        self.requests.append(request)
        if request.feature == 0:
            raise BackendOutputError("no usable candidate")
        if request.feature == 1:  # 6+ words verbatim from an excerpt: topical, so it would score well
            copy = " ".join(request.activating[0].split()[-9:-3])
            return NamingResult([LabelCandidate(label=copy, description="copied", copies_input=False)],
                                self.model, "name_feature.v2")
        return NamingResult([LabelCandidate(label="weather report", description="unrelated")], self.model,
                            "name_feature.v2")


@pytest.mark.anyio
async def test_keywords_are_the_fallback_of_a_language_model_and_copies_are_not_shown(synthetic):
    store, ref = synthetic
    llm = ScriptedLLM()
    llm_only = dict(backends=[BackendOptions(backend="llamacpp")], features=[0, 1, 2, 3])
    await name_run(payload(ref, "interp/fallback", **llm_only), store, settings=InterpreterSettings(),
                   embed_texts=topic_embed, backends=[llm])
    records = {r.feature: r for s in range(2) for r in read_shard(store, shard_key("interp/fallback", s))[0]}
    request = next(q for q in llm.requests if q.feature == 2)
    assert request.language == "English" and any("diabetes" in k for k in request.hints) and request.activating
    assert "llamacpp: no usable candidate" in records[0].errors  # the reason, not the exception class
    (copy,) = [i for i in records[1].interpretations if i.backend == "llamacpp"]
    assert copy.copies_input and len(copy.label.split()) >= 6 and copy.score_embedding is not None
    for r in records.values():  # a failure, a copy and a worse name: each shows the keywords' name
        best = r.interpretations[r.best]
        assert best.backend == "keywords" and not best.copies_input and best.evidence.keywords
    (worse,) = [i for i in records[2].interpretations if i.backend == "llamacpp"]
    assert worse.score_embedding < records[2].interpretations[records[2].best].score_embedding
    await name_run(payload(ref, "interp/no-fallback", keywords_fallback=False, **llm_only), store,
                   settings=InterpreterSettings(), embed_texts=topic_embed, backends=[ScriptedLLM()])
    records = {r.feature: r for s in range(2) for r in read_shard(store, shard_key("interp/no-fallback", s))[0]}
    assert records[0].best is None and records[0].skipped == "no name: llamacpp: no usable candidate"
    assert {i.backend for r in records.values() for i in r.interpretations} == {"llamacpp"}
    assert records[1].interpretations[records[1].best].copies_input  # nothing else to show: shown, flagged
