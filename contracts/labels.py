"""Wire schemas of a concept's labels: the label set, the queue that hands out the next notes, and the probe
retrained on the labels with its estimate of F1 and its learning curve."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LabelClass = Literal["positive", "negative", "skip"]
MAX_QUEUE_BATCH = 50
MAX_IMPORT_ROWS = 200_000


class QueueSeed(BaseModel):
    """Where the queue starts while one class has no label: a feature expression (`label:"bronchiolite"` is one)
    or a text query; its best hits are handed out first, with a share of its near misses."""

    model_config = ConfigDict(extra="forbid")

    expression: str | None = Field(default=None, min_length=1, max_length=4000,
                                   description='e.g. `label:"bronchiolite"` or `F12 > 0.3 AND NOT F40 > 0`.')
    text: str | None = Field(default=None, min_length=1, max_length=2000,
                             description="A text query, embedded like the notes: the nearest notes are the hits.")

    @model_validator(mode="after")
    def one_kind(self) -> QueueSeed:
        if (self.expression is None) == (self.text is None):
            raise ValueError("give exactly one of `expression` or `text`")
        return self


class LabelPut(BaseModel):
    """PUT /concepts/{id}/labels/{document_id}."""

    model_config = ConfigDict(extra="forbid")

    label: LabelClass
    lease_id: int | None = Field(default=None, description="The queue's lease this answers (from POST .../queue); "
                                                           "an unknown or expired one is a 409.")


class LabelOut(BaseModel):
    document_id: int
    external_id: str | None = None
    position: int
    label: LabelClass
    source: str = Field(description="queue | api | import | examples (a concept made from a label column or ids)")
    reason: str | None = Field(description="Why the queue handed the note out: seed | near_miss | uncertain | random.")
    set_by: str
    set_at: datetime


class LabelEventOut(BaseModel):
    label: LabelClass | None = Field(description="After the change; None: removed.")
    previous: LabelClass | None
    action: str = Field(description="set | delete | undo | import")
    set_by: str
    set_at: datetime


class LabelDetail(LabelOut):
    history: list[LabelEventOut] = Field(description="Every change to this note's label, oldest first.")


class LabelCounts(BaseModel):
    positive: int = 0
    negative: int = 0
    skip: int = 0
    random: int = Field(default=0, description="Labelled notes (positive or negative) the queue drew at random.")


class LabelList(BaseModel):
    items: list[LabelOut]
    total: int
    counts: LabelCounts


class QueueRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = Field(default=10, ge=1, le=MAX_QUEUE_BATCH, description="How many notes to hand out.")
    seed: QueueSeed | None = Field(default=None, description="Replaces the concept's seed (kept for later batches).")


class QueueItem(BaseModel):
    document_id: int
    external_id: str | None
    position: int
    reason: Literal["seed", "near_miss", "uncertain", "random"]
    lease_id: int
    probability: float | None = Field(description="The current probe's P(positive); None before it is trained.")


class QueueBatch(BaseModel):
    batch_id: int
    phase: Literal["seed", "probe", "random"] = Field(
        description="seed: the seed's hits and near misses; probe: the probe's uncertain notes, spread; random: "
                    "neither exists yet")
    policy: dict = Field(description="The shares, the seed and the probe version this batch was picked with.")
    expires_at: datetime = Field(description="The leases end then: until then nobody else is handed these notes.")
    items: list[QueueItem]
    remaining: int = Field(description="Notes of the dataset neither labelled nor leased to someone else.")


class Estimate(BaseModel):
    f1: float
    low: float
    high: float
    n: int = Field(description="Labels it is computed on (the random share's, for basis random).")
    level: float
    basis: Literal["random", "cross_validation"] = Field(
        description="random: F1 over every note nobody labelled, estimated from the queue's random share (once it "
                    "holds 20 labels) with the probe's own predictions over those notes (prediction-powered: "
                    "unbiased, narrower than the random labels alone); cross_validation: out-of-fold predictions "
                    "over every label (the queue picks hard notes, so it leans low)")


class CurvePoint(BaseModel):
    labels: int
    features: float | None = Field(description="Cross-validated F1 of the probe on the first `labels` labels.")
    tfidf: float | None = Field(description="The same for TF-IDF + logistic regression on their text.")


class Carrier(BaseModel):
    index: int
    label: str | None
    weight: float


class LabellingOut(BaseModel):
    """The probe trained on the concept's labels, and how good it already is."""

    version: int = Field(description="Increases with every retraining.")
    readout: str | None = Field(default=None, description="The readout cross-validation chose: row_l2 or l1.")
    tried: dict[str, float] = Field(default_factory=dict, description="Each readout and C tried: its pooled "
                                                                      "out-of-fold F1 on the labels.")
    trained_on: dict = Field(description="count, hash (SHA-256 of the sorted (document_id, label) pairs), at")
    segment_words: list[str] | None = Field(default=None, description=(
        "The probe reads only each note's clauses that contain one of these words (None: whole notes)."))
    counts: LabelCounts
    estimate: Estimate | None = Field(description="None until both classes have at least 2 labels.")
    estimate_cv: Estimate | None = Field(default=None, description="Cross-validation over every label, always.")
    curve: list[CurvePoint]
    carriers: list[Carrier] = Field(description="The features that carry the probe: largest positive weights, named.")
    seconds: float = Field(description="Time the retraining took.")
    stale: bool = Field(default=False, description="Labels changed since this training.")


class ImportResult(BaseModel):
    imported: int
    unchanged: int
