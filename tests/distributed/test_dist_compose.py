"""compose.yaml (and its GPU and S3 overlays) checked without a Docker engine: every service's
command is a real `prisma` command, every environment variable is read by the settings of the
process it runs, health checks and named volumes are there, workers can be scaled."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
import yaml
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from gateway.cli import SERVICE_NAMES, WORKER_MODULES
from gateway.cli import app as cli_app
from gateway.config import GatewaySettings
from services.embedder.config import EmbedderSettings
from services.interpreter.config import InterpreterSettings
from services.sae.config import SaeSettings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS: dict[str, type[BaseSettings]] = {
    "gateway": GatewaySettings, "embedder": EmbedderSettings, "sae": SaeSettings, "interpreter": InterpreterSettings,
}
# Read by libraries, not by our settings: Hugging Face's offline switches (also set in the
# Dockerfile) and botocore's credentials for s3fs.
LIBRARY_ENV = {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
               "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"}
ONE_SHOT = {"migrate", "ollama-pull"}
INFRA = {"postgres", "redis", "ollama", "ollama-pull"}


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / name).read_text())


def env_names(cls: type[BaseSettings]) -> set[str]:
    """Environment variables a settings class reads (pydantic-settings: aliases, else prefix + name)."""
    prefix = cls.model_config.get("env_prefix", "")
    names = set()
    for name, field in cls.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(c.upper() for c in alias.choices if isinstance(c, str))
        elif isinstance(alias, str):
            names.add(alias.upper())
        else:
            names.add(f"{prefix}{name}".upper())
    return names


def role(command: list[str]) -> str:
    """Which settings class the process started by `command` reads."""
    assert command[0] == "prisma", command
    if command[1] in ("worker", "service"):
        return command[2]
    return "gateway"  # serve, db upgrade, apikey ...


def parses(args: list[str]) -> bool:
    """`prisma ARGS` names a real command with real options (--help stops before running it)."""
    return CliRunner().invoke(cli_app, [*args, "--help"]).exit_code == 0


def prisma_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in compose["services"].items() if name not in INFRA}


def test_every_command_exists_in_the_cli() -> None:
    services = prisma_services(load("compose.yaml"))
    assert {role(s["command"]) for s in services.values()} == {"gateway", *SERVICE_NAMES}
    for name, svc in services.items():
        command = svc["command"]
        assert parses(command[1:]), f"{name}: {command} is not a prisma command"
        if command[1] == "worker":
            assert command[2] in WORKER_MODULES, name
        if command[1] == "service":
            assert command[2] in SERVICE_NAMES, name
        check = svc.get("healthcheck", {}).get("test", [])
        if "prisma" in check:
            assert parses(check[check.index("prisma") + 1:]), f"{name}: health check {check}"


def test_the_check_rejects_a_wrong_command() -> None:
    assert not parses(["servce"])
    assert not parses(["service", "embedder", "--prot", "1"])


@pytest.mark.parametrize("file", ["compose.yaml", "compose.s3.yaml"])
def test_every_env_var_is_a_known_setting(file: str) -> None:
    base = prisma_services(load("compose.yaml"))
    for name, svc in prisma_services(load(file)).items():
        accepted = env_names(SETTINGS[role(base[name]["command"])]) | LIBRARY_ENV
        unknown = set(svc.get("environment", {})) - accepted
        assert not unknown, f"{file}: {name} sets {unknown}, which its settings do not read"


def test_the_services_agree_on_urls_and_token() -> None:
    services = load("compose.yaml")["services"]
    gw = services["gateway"]["environment"]
    for name, port in (("embedder", 8001), ("sae", 8002), ("interpreter", 8003)):
        assert gw[f"PRISMA_{name.upper()}_URL"] == f"http://{name}:{port}"
        assert services[name]["command"][-1] == str(port)
        assert str(port) in " ".join(services[name]["healthcheck"]["test"])
    tokens = {svc["environment"]["PRISMA_SERVICE_TOKEN"] for svc in prisma_services(load("compose.yaml")).values()}
    assert len(tokens) == 1 and ":?" in tokens.pop(), "one required token, no default"


def test_naming_asks_the_pulled_ollama_model_by_default() -> None:
    from gateway.config import GatewaySettings

    services = load("compose.yaml")["services"]
    for name in ("gateway", "gateway-worker"):  # the API's job and the worker that runs it agree
        assert services[name]["environment"]["PRISMA_NAMING_BACKEND"] == "${PRISMA_NAMING_BACKEND:-ollama}"
    assert GatewaySettings(naming_backend="ollama").naming_backend == "ollama"
    interp = services["interpreter-worker"]["environment"]
    assert interp["PRISMA_INTERPRETER_OLLAMA_HOST"] == "http://ollama:11434"
    pulled = services["ollama-pull"]["entrypoint"][-1]
    assert pulled == interp["PRISMA_INTERPRETER_OLLAMA_MODEL"] == "${PRISMA_OLLAMA_MODEL:-llama3.2:3b}"


def test_health_checks_volumes_and_scaling() -> None:
    compose = load("compose.yaml")
    declared = set(compose["volumes"])
    for name, svc in compose["services"].items():
        if name not in ONE_SHOT:
            assert svc.get("healthcheck", {}).get("test"), f"{name} has no health check"
        for mount in svc.get("volumes", []):
            source = mount.split(":", 1)[0]
            assert source in declared, f"{name} mounts {source}, not a named volume"
        if name.endswith("-worker"):
            assert "container_name" not in svc and "ports" not in svc, f"{name} cannot be scaled"
    for name in ("postgres", "redis", "ollama"):
        assert compose["services"][name]["volumes"], f"{name} keeps its data in a named volume"
    assert [s for s, svc in compose["services"].items() if "ports" in svc] == ["gateway"]


def test_gpu_overlay_reserves_gpus_for_the_heavy_workers() -> None:
    gpu = load("compose.gpu.yaml")["services"]
    assert set(gpu) == {"embedder-worker", "sae-worker"}
    for svc in gpu.values():
        (device,) = svc["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
        assert "cu" in svc["build"]["args"]["TORCH_INDEX"].rsplit("/", 1)[1]


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="no docker-compose CLI")
@pytest.mark.parametrize("overlay", [None, "compose.gpu.yaml", "compose.s3.yaml"])
def test_docker_compose_config_validates(overlay: str | None, tmp_path: Path) -> None:
    files = ["-f", "compose.yaml"] + (["-f", overlay] if overlay else [])
    env = {"PATH": "/usr/bin:/bin", "PRISMA_SERVICE_TOKEN": "t", "POSTGRES_PASSWORD": "p",
           "ARTIFACT_ROOT": "s3://b/p", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"}
    out = subprocess.run(["docker-compose", *files, "config", "-q"], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr


# An exact release (postgres:16.15-bookworm), optionally with its digest; never a floating tag.
EXACT_IMAGE = re.compile(r"^[\w./-]+:\d+\.\d+(\.\d+)?(-[a-z0-9]+)*(@sha256:[0-9a-f]{64})?$")


def test_pulled_images_name_an_exact_release() -> None:
    """The images we pull name a release, so a pull a month later gets the same servers; the
    Dockerfile's base image too. (The overlays only rebuild the prisma image.)"""
    services = load("compose.yaml")["services"]
    pulled = {name: svc["image"] for name, svc in services.items() if "build" not in svc}
    assert set(pulled) == INFRA
    for name, image in pulled.items():
        assert EXACT_IMAGE.match(image), f"{name}: {image}"
    (base,) = re.findall(r"^FROM (\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert EXACT_IMAGE.match(base), base
