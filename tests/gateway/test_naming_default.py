"""The back-end a naming job uses when its request names none: the gateway's PRISMA_NAMING_BACKEND."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.interpret import BackendOptions
from gateway.config import GatewaySettings
from gateway.domain.features.interpret import InterpretationRequest, with_backends


def test_a_request_that_names_no_backend_gets_the_configured_one(monkeypatch) -> None:
    assert GatewaySettings().naming_backend == "keywords"  # no language model unless one is configured
    monkeypatch.setenv("PRISMA_NAMING_BACKEND", "ollama")
    configured = GatewaySettings().naming_backend
    assert configured == "ollama"
    body = InterpretationRequest(features=[1, 2])
    assert with_backends(body, configured).backends == [BackendOptions(backend="ollama")]
    assert with_backends(body, configured).features == [1, 2]
    asked = InterpretationRequest(backends=[BackendOptions(backend="keywords")])
    assert with_backends(asked, configured).backends == [BackendOptions(backend="keywords")]  # the request wins


def test_a_bad_backend_setting_or_an_empty_list_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("PRISMA_NAMING_BACKEND", "gpt")
    with pytest.raises(ValidationError, match="naming_backend"):
        GatewaySettings()
    with pytest.raises(ValidationError, match="backends"):
        InterpretationRequest(backends=[])
