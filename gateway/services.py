"""HTTP clients for the embedder, SAE and interpreter services.

Distributed mode: real HTTP to the configured base URLs, through aiohttp (a third of httpx's CPU
per request here: under load the gateway spent a quarter of its time in httpx). Embedded mode:
the same requests go through httpx's in-process ASGI transport of each service's real app, so
one code path serves both.
"""

from __future__ import annotations

import asyncio
import json as jsonlib
from typing import Any

import aiohttp
import httpx

from gateway import embedded
from gateway.config import GatewaySettings
from gateway.embedded import SERVICE_NAMES


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
        # aiohttp sessions belong to the event loop that made them: one per (service, loop).
        self._sessions: dict[tuple[str, int], tuple[asyncio.AbstractEventLoop, aiohttp.ClientSession]] = {}

    def base_url(self, service: str) -> str | None:
        return getattr(self.settings, f"{service}_url")

    def client(self, service: str) -> httpx.AsyncClient:
        if service not in SERVICE_NAMES:
            raise ValueError(f"unknown service {service!r}")
        if service not in self._clients:
            headers = self._headers()
            url = self.base_url(service)
            if url:
                self._clients[service] = httpx.AsyncClient(base_url=url, headers=headers, timeout=120.0)
            else:
                app = embedded.service_app(service, self._embedded_settings(service), **self._embedded_peers(service))
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
        return embedded.service_settings(service, artifact_root=self.settings.artifact_root)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.service_token}"} if self.settings.service_token else {}

    def _session(self, service: str, url: str) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        found = self._sessions.get((service, id(loop)))
        if found is None or found[0] is not loop or found[1].closed:
            session = aiohttp.ClientSession(base_url=url, headers=self._headers(),
                                            timeout=aiohttp.ClientTimeout(total=120), json_serialize=jsonlib.dumps)
            found = self._sessions[(service, id(loop))] = (loop, session)
        return found[1]

    async def post(self, service: str, path: str, json: Any) -> Any:
        if service not in SERVICE_NAMES:
            raise ValueError(f"unknown service {service!r}")
        url = self.base_url(service)
        if url:
            try:
                async with self._session(service, url).post(path, json=json) as resp:
                    status, body = resp.status, await resp.read()
            except (TimeoutError, aiohttp.ClientConnectionError) as exc:  # refused, reset, timed out
                raise ServiceUnavailable(service, type(exc).__name__) from exc
        else:
            try:
                answer = await self.client(service).post(path, json=json)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.RemoteProtocolError) as exc:
                raise ServiceUnavailable(service, type(exc).__name__) from exc
            status, body = answer.status_code, answer.content
        if status >= 400:
            text = body.decode("utf-8", "replace")
            try:
                detail = jsonlib.loads(body).get("detail", text)
            except (ValueError, AttributeError):
                detail = text
            if status >= 500:
                raise ServiceUnavailable(service, f"status {status}")
            raise ServiceError(service, status, detail)
        return jsonlib.loads(body)

    async def aclose(self) -> None:
        for c in self._clients.values():
            await c.aclose()
        self._clients.clear()
        loop = asyncio.get_running_loop()
        for key, (owner, session) in list(self._sessions.items()):
            if owner is loop:
                await session.close()
            del self._sessions[key]
