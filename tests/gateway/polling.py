"""Waiting for a run or a job through the API, as a client would."""

from __future__ import annotations

import asyncio

TERMINAL = ("succeeded", "failed", "cancelled")


async def wait_done(client, auth: dict, path: str, timeout: float = 300) -> dict:  # noqa: ANN001
    """GET `path` until its `status` is terminal; returns the last answer."""
    async with asyncio.timeout(timeout):
        while True:
            obj = (await client.get(path, headers=auth)).json()
            if obj["status"] in TERMINAL:
                return obj
            await asyncio.sleep(0.2)
