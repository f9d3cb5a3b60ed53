"""Errors of run creation: a 4xx that names the field at fault."""

from __future__ import annotations


class RunInputError(ValueError):
    def __init__(self, message: str, *, field: str, status_code: int = 422, locator: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field, self.status_code, self.locator = message, field, status_code, locator
