"""The job registry: every job kind the gateway runs, and the stage handler that runs it.

Each handler is the gateway's side of one pipeline stage. This module imports the stages; the
stages and the runner import nothing of it (the worker and the app hand `HANDLERS` to the runner).
"""

from __future__ import annotations

from gateway.domain.concepts import apply
from gateway.domain.features import interpret
from gateway.domain.jobs.runner import Handler
from gateway.domain.runs import embedding, extend, sae, sae_import

HANDLERS: dict[str, Handler] = {
    embedding.KIND: embedding.embedding_run_handler,
    sae.KIND: sae.sae_run_handler,
    sae_import.KIND: sae_import.sae_import_handler,
    interpret.KIND: interpret.interpret_handler,
    apply.KIND: apply.apply_handler,
    extend.KIND: extend.sae_extend_handler,
}
