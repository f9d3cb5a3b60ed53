"""The ollama back-end against recorded Ollama HTTP responses.

No Ollama server runs in this environment: a local HTTP server on 127.0.0.1 replays bodies
recorded from a real Ollama `/api/chat` (non-streaming, structured output), and the official
`ollama.AsyncClient` is pointed at it. The tests check the request we build (model, messages,
JSON-schema `format`, options) and how answers and failures are parsed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from services.interpreter.backends.base import BackendOutputError, BackendUnavailable, NamingRequest, naming_schema
from services.interpreter.backends.ollama import OllamaBackend

#: A real /api/chat response (llama3.2:3b, format = JSON schema, stream = false).
RECORDED_NAMING = {
    "model": "llama3.2:3b", "created_at": "2025-01-14T10:21:07.512318Z",
    "message": {"role": "assistant", "content": "{\"candidates\": [{\"label\": \"Epilepsy and seizures\", "
                "\"description\": \"Studies of epileptic seizures and their treatment with anticonvulsants.\"}, "
                "{\"label\": \"Anticonvulsant therapy\", \"description\": \"Drug treatment of seizures.\"}]}"},
    "done_reason": "stop", "done": True, "total_duration": 2104632125, "load_duration": 21483250,
    "prompt_eval_count": 412, "prompt_eval_duration": 386000000, "eval_count": 58,
    "eval_duration": 1693000000,
}
RECORDED_DETECT = {**RECORDED_NAMING, "message": {"role": "assistant", "content": "{\"applies\": true}"},
                   "eval_count": 6}


class Replay:
    """Answers POST /api/chat with queued (status, body) pairs and keeps the requests."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict]] = []
        self.requests: list[dict] = []
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                replay.requests.append({"path": self.path, "body": json.loads(body)})
                status, answer = replay.answers.pop(0)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def replay() -> Iterator[Replay]:
    r = Replay()
    thread = threading.Thread(target=r.server.serve_forever, daemon=True)
    thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()
    thread.join()


REQUEST = NamingRequest(3, ["Seizures in children with epilepsy.", "Refractory epilepsy and valproate."],
                        ["Breast cancer screening.", "Hypertension in the elderly."],
                        hints=["epilepsy", "seizures"], candidates=2, temperature=0.2)


@pytest.mark.anyio
async def test_naming_request_and_recorded_answer(replay):
    replay.answers.append((200, RECORDED_NAMING))
    backend = OllamaBackend(host=replay.host, model="llama3.2:3b", retries=0)
    result = await backend.name_feature(REQUEST)
    assert [c.label for c in result.candidates] == ["Epilepsy and seizures", "Anticonvulsant therapy"]
    assert result.model == "llama3.2:3b" and result.prompt_version == "name_feature.v2"
    (sent,) = replay.requests
    body = sent["body"]
    assert sent["path"] == "/api/chat" and body["model"] == "llama3.2:3b" and body["stream"] is False
    assert body["format"] == naming_schema(2)  # Ollama turns the JSON schema into a grammar
    assert body["format"]["properties"]["candidates"]["items"]["required"] == ["label", "description"]
    assert body["options"]["temperature"] == pytest.approx(0.2)
    system, user = body["messages"]
    assert system["role"] == "system" and "JSON" in system["content"]
    assert "noun phrase of 2 to 5 words in English" in system["content"]
    assert "1. Seizures in children with epilepsy." in user["content"]
    assert "Breast cancer screening." in user["content"]
    assert "KEYWORDS, much more frequent in the activating documents: epilepsy, seizures" in user["content"]


@pytest.mark.anyio
async def test_detection_parses_recorded_answers(replay):
    replay.answers += [(200, RECORDED_DETECT), (200, {**RECORDED_DETECT, "message": {
        "role": "assistant", "content": "{\"applies\": false}"}})]
    backend = OllamaBackend(host=replay.host, model="llama3.2:3b", retries=0)
    assert await backend.detect("Epilepsy", "seizures", ["Seizure clinic.", "Dermatology."]) == [True, False]
    assert replay.requests[0]["body"]["format"]["required"] == ["applies"]
    assert "Concept: Epilepsy" in replay.requests[0]["body"]["messages"][1]["content"]


@pytest.mark.anyio
async def test_unparsable_then_good_answer_is_retried(replay):
    bad = {**RECORDED_NAMING, "message": {"role": "assistant", "content": "Sure! The label is epilepsy"}}
    replay.answers += [(200, bad), (200, RECORDED_NAMING)]
    backend = OllamaBackend(host=replay.host, model="llama3.2:3b", retries=1, backoff_s=0.01)
    result = await backend.name_feature(REQUEST)
    assert result.candidates[0].label == "Epilepsy and seizures"
    temps = [r["body"]["options"]["temperature"] for r in replay.requests]
    assert temps[1] > temps[0]  # a retry samples hotter


@pytest.mark.anyio
async def test_copied_document_is_flagged_and_server_errors_are_typed(replay):
    copied = {**RECORDED_NAMING, "message": {"role": "assistant", "content": json.dumps(
        {"candidates": [{"label": "children with epilepsy were reduced by valproate", "description": "x"},
                        {"label": "Epilepsy treatment", "description": "y"}]})}}
    replay.answers += [(200, copied)]
    backend = OllamaBackend(host=replay.host, model="llama3.2:3b", retries=0)
    request = NamingRequest(3, ["Seizures in children with epilepsy were reduced by valproate."], ["Asthma."])
    result = await backend.name_feature(request)  # 7 words of one excerpt: a copy, kept last and flagged
    assert [(c.label, c.copies_input) for c in result.candidates] == [
        ("Epilepsy treatment", False), ("children with epilepsy were reduced by valproate", True)]
    replay.answers += [(200, {**RECORDED_NAMING, "message": {"role": "assistant", "content": json.dumps(
        {"candidates": [{"label": "ACTIVATING", "description": "x"}]})}})]
    with pytest.raises(BackendOutputError):
        await backend.name_feature(REQUEST)
    replay.answers += [(404, {"error": "model 'nope' not found"})]
    with pytest.raises(BackendUnavailable) as info:
        await OllamaBackend(host=replay.host, model="nope", retries=3, backoff_s=0.01).name_feature(REQUEST)
    assert not info.value.retryable and len(replay.requests) == 3  # a missing model is not retried


@pytest.mark.anyio
async def test_no_server_is_unavailable():
    backend = OllamaBackend(host="http://127.0.0.1:9", model="m", retries=1, backoff_s=0.01)
    with pytest.raises(BackendUnavailable):
        await backend.name_feature(REQUEST)


@pytest.mark.anyio
async def test_a_naming_run_with_the_configured_ollama_keeps_keywords_as_fallback(replay, synthetic):
    """What compose's default (PRISMA_NAMING_BACKEND=ollama) runs: the back-end built from the interpreter's
    settings, one recorded answer a feature, each name scored; the keywords' term list named beside it."""
    from contracts.interpret import BackendOptions, InterpretRunPayload
    from services.interpreter.config import InterpreterSettings
    from services.interpreter.runs import name_run, read_shard, shard_key
    from tests.interpreter.conftest import topic_embed

    store, ref = synthetic
    replay.answers += [(200, RECORDED_NAMING), (200, RECORDED_NAMING)]
    settings = InterpreterSettings(ollama_host=replay.host, ollama_model="llama3.2:3b", max_retries=0)
    await name_run(InterpretRunPayload(run_id=1, corpus=ref, artifact_prefix="interp/ollama", batch_features=2,
                                       backends=[BackendOptions(backend="ollama")], features=[0, 2]),
                   store, settings=settings, embed_texts=topic_embed)
    records = {r.feature: r for r in read_shard(store, shard_key("interp/ollama", 0))[0]}
    assert sorted(records) == [0, 2] and len(replay.requests) == 2
    for request in replay.requests:
        body = request["body"]
        assert request["path"] == "/api/chat" and body["model"] == "llama3.2:3b" and body["stream"] is False
        assert body["format"]["properties"]["candidates"]["maxItems"] == 3
        assert "KEYWORDS" in body["messages"][1]["content"]
    for r in records.values():
        by_backend = {i.backend: i for i in r.interpretations}
        assert set(by_backend) == {"ollama", "keywords"}  # the keywords fallback beside the model's name
        ollama = by_backend["ollama"]
        assert ollama.label in {"Epilepsy and seizures", "Anticonvulsant therapy"} and ollama.model == "llama3.2:3b"
        assert ollama.prompt_version == "name_feature.v2" and ollama.score_embedding is not None
        assert ollama.evidence.keywords == by_backend["keywords"].evidence.keywords != []
        # the recorded names are about epilepsy, not this corpus's topics: the term list is shown
        assert r.interpretations[r.best].backend == "keywords"
