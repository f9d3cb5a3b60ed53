"""Schemathesis against every app's OpenAPI schema (the gateway with a valid API key, the
embedder, the SAE and the interpreter services): whatever the generated request, never a 5xx."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tests.conftest import make_settings

pytestmark = pytest.mark.slow
FUZZ = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


async def _upload(app: Any, auth: dict[str, str]) -> None:
    rows = "\n".join(f"N{i},nota {i} con tosse e febbre,tosse" for i in range(6))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        resp = await client.post("/api/v1/datasets", headers=auth, data={"label_columns": "labels"},
                                 files={"file": ("d.csv", f"id,text,labels\n{rows}\n".encode())})
        assert resp.status_code == 201, resp.text


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str]]]:
    """The gateway in embedded mode (its services in-process), with a key and one small dataset."""
    from gateway.app import create_app
    from gateway.db import session_scope
    from gateway.domain.auth.service import create_key

    app = create_app(make_settings(tmp_path_factory.mktemp("fuzz") / "data"), configure_logs=False)
    with session_scope(app.state.factory) as session:
        _, key = create_key(session, name=f"fuzz-{uuid.uuid4().hex[:6]}")
    auth = {"Authorization": f"Bearer {key}"}
    asyncio.run(_upload(app, auth))
    yield app, auth
    app.state.runner.shutdown()


@pytest.fixture(scope="module")
def service_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from services.embedder.app import create_app as embedder_app
    from services.embedder.config import EmbedderSettings
    from services.interpreter.app import create_app as interpreter_app
    from services.interpreter.config import InterpreterSettings
    from services.sae.app import create_app as sae_app
    from services.sae.config import SaeSettings

    root = tmp_path_factory.mktemp("fuzz-artifacts").as_uri()
    apps = {
        # Bounded so that a generated request cannot ask for minutes of inference.
        "embedder": embedder_app(EmbedderSettings(threads=1, max_texts=4, max_chars=2000, precision="fp32",
                                                  artifact_root=root)),
        "sae": sae_app(SaeSettings(artifact_root=root)),
        "interpreter": interpreter_app(InterpreterSettings(artifact_root=root)),
    }
    return {name: asgi_schema(app) for name, app in apps.items()}


def asgi_schema(app: Any) -> Any:
    """A service app's schema, taken in-process: the services serve no /openapi.json."""
    schema = schemathesis.openapi.from_dict(app.openapi())
    schema.app = app
    return schema


def fuzz(schema: Any, headers: dict[str, str] | None = None) -> list[str]:
    """Every operation, positive and negative examples; returns the operations that answered 5xx."""
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @FUZZ
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                case.call_and_validate(headers=dict(headers or {}), checks=[not_a_server_error])

            try:
                run()
            except Unsatisfiable:  # nothing to make invalid (e.g. no parameters at all)
                continue
            except Exception as exc:  # noqa: BLE001 - collected, reported together below
                failures.append(f"{operation.label} ({mode}): {str(exc)[:600]}")
    return failures


def test_gateway_never_answers_5xx(gateway) -> None:  # noqa: ANN001
    app, auth = gateway
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app, headers=dict(auth))
    assert len(list(schema.get_all_operations())) >= 15
    failures = fuzz(schema, auth)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("service", ["embedder", "sae", "interpreter"])
def test_service_never_answers_5xx(service: str, service_schemas) -> None:  # noqa: ANN001
    failures = fuzz(service_schemas[service])
    assert not failures, "\n".join(failures)
