"""Naming runs: every feature named and scored with a control, resumed after a stop, families named."""

from __future__ import annotations

import pytest

from contracts.interpret import BackendOptions, InterpretRunPayload
from contracts.sae import FeatureFamily
from services.interpreter.config import InterpreterSettings
from services.interpreter.runs import InterpretRunStopped, name_run, read_shard, shard_key

from tests.interpreter.conftest import TOPICS, topic_embed  # noqa: E402


def payload(ref, prefix: str, **kw) -> InterpretRunPayload:
    return InterpretRunPayload(run_id=1, corpus=ref, artifact_prefix=prefix, batch_features=3,
                               backends=[BackendOptions(backend="keywords")], **kw)


@pytest.mark.anyio
async def test_run_names_scores_and_controls(synthetic):
    store, ref = synthetic
    progress = []
    fams = [FeatureFamily(iteration=0, parent=0, children=[1, 2], edges=[(0, 1), (0, 2)])]
    result = await name_run(payload(ref, "interp/full", families=fams), store, settings=InterpreterSettings(),
                            embed_texts=topic_embed, on_progress=progress.append)
    assert result.n_features == 8 and result.n_named == 7 and result.n_skipped == 1  # feature 6 is too rare
    records = [r for s in range(3) for r in read_shard(store, shard_key("interp/full", s))[0]]
    for r in records[:6]:
        best = r.interpretations[r.best]
        assert TOPICS[r.feature].split()[0] in best.label or any(w in best.label for w in TOPICS[r.feature].split())
        assert best.score_embedding > 0.9 and best.reliable
        assert best.control_embedding is not None and best.control_embedding < 0.6
        assert best.backend == "keywords" and best.evidence.holdout_activating
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
