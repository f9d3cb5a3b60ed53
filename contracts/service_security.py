"""What every service app (embedder, SAE, interpreter) agrees on about its bearer token.

Shared here because services import `contracts` and never each other's code. A service without a
token accepts any caller, so it may only listen on loopback: `check_bind` refuses to start it on
another address, and `loopback_request` lets an app refuse a request that reached it through a
non-loopback interface anyway (uvicorn started by hand). Tokens are compared as UTF-8 bytes in
constant time, so any header value, non-ASCII included, is a plain mismatch (401), never a 500.
"""

from __future__ import annotations

import hmac
import ipaddress

#: FastAPI keyword arguments of every service app: no /docs, /redoc or /openapi.json.
NO_DOCS = {"docs_url": None, "redoc_url": None, "openapi_url": None}


class InsecureBind(RuntimeError):
    """A service asked to listen on a non-loopback address without a token."""


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or 'localhost'; a name or any other address is not."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(service: str, host: str, token: str | None) -> None:
    """Raise InsecureBind (a sentence saying what to set) for a tokenless service off loopback."""
    if not token and not is_loopback(host):
        raise InsecureBind(
            f"refusing to serve the {service} service on {host} without a token: anyone who can reach it could "
            f"call it. Set PRISMA_SERVICE_TOKEN (or PRISMA_{service.upper()}_SERVICE_TOKEN), e.g. "
            f"$(openssl rand -hex 32), the same for the gateway and the workers; or listen on 127.0.0.1.")


def loopback_request(server: tuple[str, int | None] | None) -> bool:
    """Whether a request's ASGI `server` (the local address it arrived on) is loopback. An in-process
    transport names a service instead of an address ('http://embedder'): that is not a network."""
    if not server:
        return True
    try:
        return ipaddress.ip_address(server[0].strip("[]")).is_loopback
    except ValueError:
        return True


def token_matches(authorization: str | None, token: str) -> bool:
    """Whether an `Authorization: Bearer <token>` header value carries `token`."""
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8", "surrogatepass"), token.encode("utf-8"))


def authorized(authorization: str | None, token: str | None, server: tuple[str, int | None] | None) -> bool:
    """The service check: with a token, the header must carry it; without one, only loopback callers."""
    if token is None:
        return loopback_request(server)
    return token_matches(authorization, token)
