"""The one error of the concepts domain: bad input, answered as a 4xx that names the field."""

from __future__ import annotations

from typing import Any


class ConceptInputError(Exception):
    """`field` is a dotted path into the request (`expression`, `examples.labels.positive.0`);
    `extra` carries what the client needs to fix it (line and column, candidates)."""

    def __init__(self, message: str, *, field: str, status_code: int = 422, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message, self.field, self.status_code, self.extra = message, field, status_code, extra or {}
