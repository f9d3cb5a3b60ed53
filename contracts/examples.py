"""A feature's documents to show a person (the interpreter's `POST /examples`): activating ones across
activation quantiles, and near misses."""

from __future__ import annotations

from pydantic import BaseModel, Field

from contracts.interpret import CorpusRef


class ExamplesRequest(BaseModel):
    """A feature's documents to show a person: activating ones across quantiles, and near misses."""

    corpus: CorpusRef
    feature: int = Field(ge=0, description="Latent index in the SAE.")
    activating: int = Field(default=12, ge=1, le=50, description="Activating documents, spread over quantiles.")
    quantiles: int = Field(default=4, ge=1, le=10, description="Equal-rank activation bins sampled from.")
    near_misses: int = Field(default=6, ge=0, le=50,
                             description="Non-activating documents nearest to the activating ones' centroid.")
    seed: int = Field(default=0, description="The same seed gives the same documents.")


class Example(BaseModel):
    position: int = Field(description="Row in the dataset snapshot.")
    doc_id: int = Field(description="The gateway's document id.")
    activation: float = Field(description="The feature's activation on the document (0 for a near miss).")
    quantile: int | None = Field(default=None, description="Activation bin, 0 = strongest; None for a near miss.")
    span: tuple[int, int] | None = Field(
        default=None, description="[start, end) characters of the chunk where the feature is strongest; None: one chunk.",
    )
    similarity: float | None = Field(default=None, description="Near misses: cosine to the activating documents' mean, both centred on the corpus's mean vector.")


class FeatureExamples(BaseModel):
    feature: int
    n_activating: int = Field(description="Documents where the feature fires.")
    activating: list[Example] = Field(default_factory=list, description="Strongest first.")
    near_misses: list[Example] = Field(default_factory=list, description="Nearest first.")
