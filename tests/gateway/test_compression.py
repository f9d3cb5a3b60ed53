"""Responses are gzip-compressed when the client asks (every browser does), the same content once decoded, and
sent as they are when it does not ask or when they are small (the SAE run page's heatmaps are megabytes of SVG)."""

from __future__ import annotations

import gzip

import httpx
import pytest

from gateway.app import GZIP_MIN_BYTES

pytestmark = pytest.mark.anyio


async def raw_get(client: httpx.AsyncClient, path: str, **headers: str) -> tuple[httpx.Response, bytes]:
    """The response and its body as sent, not decoded by httpx."""
    async with client.stream("GET", path, headers=headers) as resp:
        return resp, b"".join([chunk async for chunk in resp.aiter_raw()])


@pytest.mark.parametrize("path", ["/api-docs/swagger-ui-bundle.js", "/api/v1/openapi.json"])
async def test_a_large_response_is_gzipped_when_asked_and_decodes_to_the_same(client: httpx.AsyncClient,
                                                                              auth: dict[str, str], path: str) -> None:
    plain, plain_body = await raw_get(client, path, **auth, **{"Accept-Encoding": "identity"})
    packed, packed_body = await raw_get(client, path, **auth, **{"Accept-Encoding": "gzip, deflate, br"})
    assert plain.status_code == packed.status_code == 200
    assert "content-encoding" not in plain.headers and len(plain_body) > GZIP_MIN_BYTES
    assert packed.headers["content-encoding"] == "gzip" and "Accept-Encoding" in packed.headers["vary"]
    assert gzip.decompress(packed_body) == plain_body
    assert len(packed_body) < len(plain_body) / 3
    assert packed.headers["content-type"] == plain.headers["content-type"]
    assert packed.headers["content-security-policy"] == plain.headers["content-security-policy"]


async def test_a_small_response_goes_as_it_is(client: httpx.AsyncClient) -> None:
    resp, body = await raw_get(client, "/health", **{"Accept-Encoding": "gzip"})
    assert resp.status_code == 200 and "content-encoding" not in resp.headers
    assert b'"status":"ok"' in body and len(body) < GZIP_MIN_BYTES
