"""Request ids and access logs, concurrency, security headers (pure ASGI: no buffering of bodies)."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.logging import request_id_var

log = logging.getLogger("prisma.access")
_VALID_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestIdMiddleware:
    """Takes a sane `X-Request-ID` or makes one, logs the request (method, path, status, ms)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if _VALID_ID.match(incoming) else uuid.uuid4().hex[:16]
        token = request_id_var.set(rid)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", rid.encode()))
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            # The path only, never the query string: it may hold search text.
            log.info(
                "request",
                extra={"method": scope["method"], "path": scope["path"], "status": status,
                       "ms": round((time.perf_counter() - started) * 1000, 1)},
            )
            request_id_var.reset(token)


class ConcurrencyLimitMiddleware:
    """At most `limit` requests inside the app at once; the others wait their turn (never refused).

    A request can hold two pooled database connections at once (its session, and a worker
    thread's); with more requests in flight than the pool holds, every one of them waited for a
    connection until the pool timed out (seen with 50 clients). `/health` is never held back.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.slots = asyncio.Semaphore(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/health":
            await self.app(scope, receive, send)
            return
        async with self.slots:
            await self.app(scope, receive, send)


# The dashboard loads only its own files (vendored htmx, prisma.js, prisma.css): no inline script or
# style, no eval, no framing. SVG charts are inline markup, not images.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),  # search URLs carry query text
)
HSTS = (b"strict-transport-security", b"max-age=31536000")


def is_loopback_request(scope: Scope) -> bool:
    """Whether the client asked for a loopback host (the Host header, else the server address)."""
    host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
    if host.startswith("["):
        name = host[1:host.find("]")]
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if not name:
        name = (scope.get("server") or ("", 0))[0] or ""
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class SecurityHeadersMiddleware:
    """CSP, no framing, nosniff and no referrer on every response; HSTS on https; the session cookie
    marked Secure per request when `cookie_secure` is None: always, except plain http to loopback
    (`prisma serve` on 127.0.0.1), where a browser would have no https to send it over."""

    def __init__(self, app: ASGIApp, *, cookie_name: str, cookie_secure: bool | None) -> None:
        self.app = app
        self.cookie_prefix = cookie_name.encode() + b"="
        self.cookie_secure = cookie_secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        https = scope.get("scheme") == "https"
        mark_secure = self.cookie_secure is None and (https or not is_loopback_request(scope))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.setdefault("headers", [])
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in SECURITY_HEADERS if h[0] not in present)
                if https and HSTS[0] not in present:
                    headers.append(HSTS)
                if mark_secure:
                    message["headers"] = [self._secure(name, value) for name, value in headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _secure(self, name: bytes, value: bytes) -> tuple[bytes, bytes]:
        if name.lower() == b"set-cookie" and value.startswith(self.cookie_prefix) and b"; secure" not in value.lower():
            return name, value + b"; secure"
        return name, value
