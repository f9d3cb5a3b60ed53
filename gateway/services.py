"""HTTP clients for the embedder, SAE and interpreter services.

Distributed mode: real HTTP to the configured base URLs. Embedded mode: the same requests go
through an in-process ASGI transport of each service's real app, so one code path serves both.
"""

from __future__ import annotations

import importlib
from typing import Any

import httpx

from gateway.config import GatewaySettings

SERVICE_NAMES = ("embedder", "sae", "interpreter")


class ServiceUnavailable(RuntimeError):
    """A service could not be reached (down, refused, timed out)."""

    def __init__(self, service: str, reason: str) -> None:
        super().__init__(f"the {service} service is unavailable: {reason}")
        self.service = service


class ServiceError(RuntimeError):
    """A service answered with an error status; `status_code` and `detail` are passed on."""

    def __init__(self, service: str, status_code: int, detail: Any) -> None:
        super().__init__(f"the {service} service answered {status_code}: {detail}")
        self.service, self.status_code, self.detail = service, status_code, detail


class ServiceClients:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self._clients: dict[str, httpx.AsyncClient] = {}

    def base_url(self, service: str) -> str | None:
        return getattr(self.settings, f"{service}_url")

    def client(self, service: str) -> httpx.AsyncClient:
        if service not in SERVICE_NAMES:
            raise ValueError(f"unknown service {service!r}")
        if service not in self._clients:
            headers = {}
            if self.settings.service_token:
                headers["Authorization"] = f"Bearer {self.settings.service_token}"
            url = self.base_url(service)
            if url:
                self._clients[service] = httpx.AsyncClient(base_url=url, headers=headers, timeout=120.0)
            else:
                app = importlib.import_module(f"services.{service}.app").create_app(
                    self._embedded_settings(service), **self._embedded_peers(service))
                transport = httpx.ASGITransport(app=app)
                self._clients[service] = httpx.AsyncClient(
                    transport=transport, base_url=f"http://{service}", headers=headers, timeout=None
                )
        return self._clients[service]

    def _embedded_peers(self, service: str) -> dict[str, Any]:
        """In-process clients a service app calls: the interpreter embeds labels through the embedder."""
        return {"embedder": self.client("embedder")} if service == "interpreter" else {}

    def _embedded_settings(self, service: str) -> Any:
        """The service's own settings, with the gateway's artifact root: one store in one process."""
        config = importlib.import_module(f"services.{service}.config")
        cls = type(config.get_settings())
        return cls(artifact_root=self.settings.artifact_root)

    async def post(self, service: str, path: str, json: Any) -> Any:
        try:
            resp = await self.client(service).post(path, json=json)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.RemoteProtocolError) as exc:
            raise ServiceUnavailable(service, type(exc).__name__) from exc
        if resp.status_code >= 400:
            try:
                detail = resp.json().get("detail", resp.text)
            except ValueError:
                detail = resp.text
            if resp.status_code >= 500:
                raise ServiceUnavailable(service, f"status {resp.status_code}")
            raise ServiceError(service, resp.status_code, detail)
        return resp.json()

    async def aclose(self) -> None:
        for c in self._clients.values():
            await c.aclose()
        self._clients.clear()
