"""How a text (a search query, a feature's label) is embedded to meet an embedding run's vectors.

An embedded run answers with its own model and pooling. An imported run's vectors were made
elsewhere: a text meets them only through the `query_model` named at import (an embedder model
that makes the same vectors); without one, text search, semantic label search and naming are
refused with a 409 that says why, before any work starts.
"""

from __future__ import annotations

from typing import Any

from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.models import EmbeddingRun

IMPORTED = "imported"
"""The pooling recorded on an imported run (its model is recorded as `imported:<name>`)."""


class NoQueryModel(RunInputError):
    """The run's vectors were imported without a model that embeds texts like them."""

    def __init__(self, run: EmbeddingRun) -> None:
        super().__init__(
            f"query_model: embedding run {run.id} holds imported vectors ({run.model}) and no query model, so no "
            "text can be embedded to meet them: text search, semantic label search and naming need one; import "
            "the vectors again with query_model (the embedder model that made them)",
            field="query_model", status_code=409)
        self.run_id = run.id


UNIT_NORM_TOLERANCE = 1e-3
"""Vectors imported "as given" whose norms all lie within this of 1 count as unit norm (float32 rounding,
a file's own float16 rounding): their queries are scaled to unit norm as well."""


def queries_unit_norm(normalize: bool, norm_min: float | None, norm_max: float | None) -> bool:
    """Whether a query meets an import's stored vectors at unit norm: scaled at import (`normalize`), or
    every norm uploaded within UNIT_NORM_TOLERANCE of 1 (vectors exported from a run, imported as given)."""
    norms = (norm_min, norm_max)
    return normalize or (None not in norms and all(abs(n - 1.0) <= UNIT_NORM_TOLERANCE for n in norms))


def is_imported(run: EmbeddingRun) -> bool:
    return run.pooling == IMPORTED


def query_embedding(run: EmbeddingRun) -> dict[str, Any]:
    """The embedder's request fields (model, pooling, normalize, prompt) that embed a query or a label
    to meet the run's documents: with a model that has prompts (E5: the run's documents went in as
    'passage: …'), the 'query' prompt, as the model card asks. Raises NoQueryModel (409) for
    imported vectors without a query model."""
    if not is_imported(run):
        prompt = {"prompt_name": "query"} if (run.spec or {}).get("prompt_name") else {}
        return {"model": run.model, "pooling": run.pooling, "normalize": run.normalize, **prompt}
    spec = run.spec or {}
    if not spec.get("query_model"):
        raise NoQueryModel(run)
    prompt = {"prompt_name": spec["query_prompt_name"]} if spec.get("query_prompt_name") else {}
    # the stored vectors' norm, not only the import's `normalize`: unit vectors imported as given meet unit queries
    normalize = spec.get("query_normalize")
    if normalize is None:  # imported before spec.query_normalize was recorded: the norms the result recorded
        result = run.result or {}
        normalize = queries_unit_norm(run.normalize, result.get("norm_min"), result.get("norm_max"))
    return {"model": spec["query_model"], "pooling": spec.get("query_pooling", "mean"), "normalize": normalize,
            **prompt}
