"""The llamacpp back-end's model is a name of the allowlist (PRISMA_MODELS), never a path; loaded
GGUF models are kept in a bounded LRU."""

from __future__ import annotations

import re
import sys
import types

import pytest
from pydantic import ValidationError

from contracts.interpret import BackendOptions
from contracts.model_allowlist import allowed_models, parse_models
from gateway.domain.features.interpret import InterpretationRequest
from services.interpreter.backends import llamacpp_model


def test_a_path_is_refused_naming_the_allowed_models(tmp_path) -> None:
    real = tmp_path / "real.gguf"
    real.write_bytes(b"GGUF")
    messages = []
    for path in (str(real), str(tmp_path / "missing.gguf")):
        with pytest.raises(ValidationError) as info:
            BackendOptions(backend="llamacpp", model=path)
        messages.append(re.sub(r"'[^']*'", "PATH", info.value.errors()[0]["msg"], count=1))  # shortened when long
    assert messages[0] == messages[1]  # the same whether the file exists or not
    assert "smollm2-135m-instruct" in messages[0] and "all-MiniLM" not in messages[0]
    with pytest.raises(ValidationError) as info:
        InterpretationRequest(backends=[{"backend": "llamacpp", "model": "/etc/passwd"}])
    assert info.value.errors()[0]["loc"] == ("backends", 0, "model")
    assert BackendOptions(backend="ollama", model="llama3.2:3b").model == "llama3.2:3b"  # an Ollama tag


def test_allowed_names_resolve_to_their_files(monkeypatch) -> None:
    monkeypatch.setenv("PRISMA_MODELS", '{"qwen": "/models/qwen2.5-0.5b.gguf", "bio": "/models/biobert"}')
    assert BackendOptions(backend="llamacpp", model="qwen").model == "qwen"
    assert llamacpp_model("qwen", None) == "/models/qwen2.5-0.5b.gguf"
    assert llamacpp_model("smollm2-135m-instruct", None) is None  # the shipped package's file
    assert llamacpp_model(None, "qwen") == "/models/qwen2.5-0.5b.gguf"  # the service's configured default
    assert llamacpp_model(None, "/admin/chose.gguf") == "/admin/chose.gguf"
    assert set(allowed_models("encoder")) == {"default", "multilingual-e5-small", "all-MiniLM-L6-v2", "bio"}
    assert parse_models("a=/x.gguf, b = hub/id") == {"a": "/x.gguf", "b": "hub/id"}
    for bad in ("{not json", "novalue", '{"bad name!": "/x"}', '{"a": ""}'):
        with pytest.raises(ValueError, match="PRISMA_MODELS"):
            parse_models(bad)


def test_loaded_gguf_models_are_bounded(monkeypatch) -> None:
    from services.interpreter.backends import llamacpp

    loaded: list[str] = []

    class FakeLlama:
        def __init__(self, model_path: str, **kw: object) -> None:
            loaded.append(model_path)

        def close(self) -> None:
            pass

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=FakeLlama))
    monkeypatch.setattr(llamacpp, "_MODELS", type(llamacpp._MODELS)())
    first = llamacpp.load_llama("/m/a.gguf", max_models=2)
    llamacpp.load_llama("/m/b.gguf", max_models=2)
    assert llamacpp.load_llama("/m/a.gguf", max_models=2) is first  # used again: now the newest
    llamacpp.load_llama("/m/c.gguf", max_models=2)
    assert [k[0] for k in llamacpp._MODELS] == ["/m/a.gguf", "/m/c.gguf"]  # b, least recently used, went
    assert loaded == ["/m/a.gguf", "/m/b.gguf", "/m/c.gguf"]
