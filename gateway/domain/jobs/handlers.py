"""Job kinds and their handlers; each handler is the gateway's side of one pipeline stage."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.domain.jobs.runner import Handler

HANDLERS: dict[str, Handler] = {}


def _register() -> None:
    # Each stage's module adds its handler to HANDLERS when imported.
    import gateway.domain.runs.embedding  # noqa: F401


_register()
