"""Job kinds and their handlers; each handler is the gateway's side of one pipeline stage.

Stage modules add themselves to HANDLERS when imported; `registered()` imports them all,
lazily, so that this module imports none of them at load time (no import cycles).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.domain.jobs.runner import Handler

HANDLERS: dict[str, Handler] = {}


def registered() -> dict[str, Handler]:
    import gateway.domain.concepts.apply  # noqa: F401
    import gateway.domain.features.interpret  # noqa: F401
    import gateway.domain.runs.embedding  # noqa: F401
    import gateway.domain.runs.sae  # noqa: F401
    import gateway.domain.runs.sae_import  # noqa: F401

    return HANDLERS
