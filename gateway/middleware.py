"""Request ids and access logs (pure ASGI: no buffering of bodies)."""

from __future__ import annotations

import asyncio
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
