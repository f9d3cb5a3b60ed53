"""Job kinds and their handlers; each handler is the gateway's side of one pipeline stage."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.domain.jobs.runner import Handler

HANDLERS: dict[str, Handler] = {}
