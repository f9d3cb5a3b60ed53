"""Dataset uploads: the accepted file formats and where each part of a document is found."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DatasetFormat = Literal["csv", "jsonl", "zip"]
DATASET_FORMATS: tuple[DatasetFormat, ...] = ("csv", "jsonl", "zip")


class ColumnMapping(BaseModel):
    """Which CSV column or JSONL key holds each part of a document (ignored for zip uploads)."""

    # A misspelt option ("label" for "labels") must fail loudly, not be dropped.
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        default="text", min_length=1, description="Column or key holding the document text."
    )
    id: str | None = Field(
        default=None,
        min_length=1,
        description="Column or key holding the external id; None: 'id' if present, else no ids.",
    )
    labels: list[str] | None = Field(
        default=None,
        description=(
            "Columns or keys holding labels; None: 'labels' and/or 'label' if present. "
            "A cell may hold several labels joined by label_separator."
        ),
    )
    label_separator: str = Field(
        default="|", min_length=1, description="Separates several labels in one cell or string."
    )
    metadata: list[str] | None = Field(
        default=None,
        description="Columns or keys kept as metadata; None: every other one; []: none.",
    )

    @model_validator(mode="after")
    def _one_role_per_column(self) -> ColumnMapping:
        """A column cannot be both the text and an id, a label or metadata."""
        roles = [self.text, *([self.id] if self.id else []), *(self.labels or [])]
        roles += self.metadata or []
        repeated = sorted({name for name in roles if roles.count(name) > 1})
        if repeated:
            raise ValueError(f"columns mapped to more than one role: {', '.join(repeated)}")
        return self


__all__ = ["DATASET_FORMATS", "ColumnMapping", "DatasetFormat"]
