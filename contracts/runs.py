"""Wire schemas of embedding runs, SAE runs, features and families (the gateway's view;
the services' contracts are contracts.embed and contracts.sae)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from contracts.append import RunCoverage
from contracts.embed import EmbeddingRunSpec
from contracts.sae import FamiliesConfig, SaeConfig, StatsConfig


class EmbeddingRunCreate(EmbeddingRunSpec):
    """POST /api/v1/embedding-runs: which dataset, and how to embed it."""

    dataset_id: int = Field(description="The dataset to embed.")


class EmbeddingRunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    dataset_id: int
    status: str = Field(description="queued | running | succeeded | failed | cancelled")
    job_id: str | None
    model: str
    model_path: str | None
    pooling: str
    normalize: bool
    max_length: int | None
    dim: int | None
    n_documents: int | None
    n_chunks: int | None
    n_tokens: int | None
    docs_per_s: float | None
    spec: dict[str, Any]
    result: dict[str, Any] | None = Field(description="The embedder's EmbedJobResult (shards, histogram, timings).")
    created_at: datetime
    finished_at: datetime | None


class EmbeddingRunPage(BaseModel):
    items: list[EmbeddingRunOut]
    total: int


# --- SAE runs -------------------------------------------------------------------------------


class SaeRunCreate(BaseModel):
    """POST /api/v1/sae-runs: one SAE, or a sweep (several configs) on one embedding run."""

    model_config = ConfigDict(extra="forbid")

    embedding_run_id: int = Field(description="A succeeded embedding run: the SAE's training data.")
    config: SaeConfig | None = Field(default=None, description="One SAE; default: SaeConfig() when `sweep` is empty.")
    sweep: list[SaeConfig] = Field(
        default_factory=list, max_length=16,
        description="Several SAEs (e.g. k or expansion factors) trained one after the other, compared side by side.",
    )
    stats: StatsConfig = Field(default_factory=StatsConfig)
    families: FamiliesConfig = Field(default_factory=FamiliesConfig)

    def configs(self) -> list[SaeConfig]:
        return ([self.config] if self.config else []) + list(self.sweep) or [SaeConfig()]


class TrainingText(BaseModel):
    """How much text the SAE learned from, against what real clinical text showed it needs."""

    documents: int = Field(description="Documents it was trained and encoded on.")
    characters: int = Field(description="Their characters.")
    enough_characters: int = Field(description="On real clinical cases the probe's F1 with 100 labels kept rising "
                                   "until the SAE had read this many characters.")
    enough: bool
    advice: str | None = Field(default=None, description="When it read less: what that costs and what to do.")


class SaeRunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    embedding_run_id: int
    sweep_id: str | None
    status: str
    job_id: str | None
    config: dict[str, Any]
    d: int | None
    n_latents: int | None
    k: int | None
    imported: bool
    metrics: dict[str, Any] | None = Field(description="Held-out FVU, explained variance, dead fraction, L0, MSE.")
    loss_curve: list[Any] | None = Field(default=None, description="Per step (decimated): loss, fvu, explained variance, dead fraction, l0.")
    training_text: TrainingText | None = Field(default=None, description="How much text it learned from, and whether "
                                               "that is enough (GET /sae-runs/{id} only).")
    coverage: RunCoverage | None = Field(default=None, description="Documents learned from, encoded, and appended to "
                                         "the dataset since (GET /sae-runs/{id} only).")
    precision: str | None = Field(default=None, description="What the training steps' encoder matmul ran in (fp32 or bf16; "
                                  "config.precision resolved by the machine that trained); None before it finished, or "
                                  "for an imported SAE.")
    segment_words: int = Field(default=0, description="Words the segments were read by: the SAE trained on them and a "
                               "segment's codes are the max over its words' (the embedding run's word_states); 0: each "
                               "segment read by its own vector, or not finished.")
    created_at: datetime
    finished_at: datetime | None


class SaeRunList(BaseModel):
    items: list[SaeRunOut]
    total: int


class Neighbour(BaseModel):
    index: int
    value: float


class FeatureOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    index: int = Field(description="Latent index, 0-based.")
    density: float = Field(description="Share of documents where it fires.")
    mean_activation: float = Field(description="Mean over the documents where it fires.")
    max_activation: float
    label: str | None = Field(default=None, description="Best-scoring interpretation's label, when named.")
    score: float | None = Field(default=None, description="That label's held-out score (AUROC or balanced accuracy).")
    reliable: bool | None = Field(default=None, description="Whether the score reaches the threshold; an unreliable label is not a fact.")
    threshold: float | None = Field(
        default=None, description='The activation above which the name holds with precision >= 0.8: what label:"…" means.')
    skip_reason: str | None = Field(
        default=None, description="Why the last naming job gave it no name (too rare, no separating phrase, ...).")
    unreliable_reason: str | None = Field(
        default=None, description="Why its name is unreliable, in words (the tests it failed, or that another feature "
                                  "holds the name better); None when reliable, unnamed or named before reasons were kept.")


class FeaturePage(BaseModel):
    items: list[FeatureOut]
    total: int
    limit: int
    offset: int


class InterpretationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    label: str
    description: str | None
    backend: str
    model: str | None
    prompt_version: str | None
    score_embedding: float | None = Field(description="AUROC of cos(label, document) on held-out documents.")
    score_detection: float | None = Field(description="Balanced accuracy of the LLM judge on held-out documents.")
    score: float | None
    reliable: bool | None
    threshold: float | None = Field(
        default=None, description="Lowest activation above which the name holds (its words occur) on >= 80 % of the "
        "calibration segments; None: at no activation. label:\"…\" in an expression means above it.")
    evidence: dict[str, Any] = Field(description="Dataset positions shown and scored on (never text).")
    created_at: datetime

    @computed_field(description="(activation t, precision of the name above t, segments above t), t descending.")
    @property
    def precision_curve(self) -> list[tuple[float, float, int]]:
        return [tuple(p) for p in self.evidence.get("precision_curve") or []]  # type: ignore[misc]

    @computed_field(description="Segments of the naming corpus where the feature reaches the threshold and the name "
                    "holds, estimated (the precision at the threshold times the activations that reach it): of "
                    "features that would show one name, the one holding it on most keeps it. None without a threshold "
                    "or for names stored before it was kept.")
    @property
    def holds_on(self) -> int | None:
        return self.evidence.get("holds_on")

    @computed_field(description="What the threshold's precision curve counted: `strongest_and_sample` (the feature's "
                    "strongest segments each, and a weighted sample of the rest; names made since 2026-11-29) or "
                    "`sample` (a sample without the strongest); None for names stored before it was kept.")
    @property
    def calibration(self) -> str | None:
        return self.evidence.get("calibration")

    @computed_field(description="AUROC of the name, held-out activating segments vs held-out near misses.")
    @property
    def score_near_miss(self) -> float | None:
        return self.evidence.get("score_near_miss")

    @computed_field(description="The start of a few near misses the name was scored against (weak activations, "
                    "segments of co-firing features).")
    @property
    def near_misses(self) -> list[str]:
        return list(self.evidence.get("near_miss_examples") or [])

    @computed_field(description="The feature's next phrases, scored and calibrated; one replaces the name where a "
                    "feature that holds the name better shows it.")
    @property
    def alternatives(self) -> list[dict[str, Any]]:
        return list(self.evidence.get("alternatives") or [])

    @computed_field(description="The feature's most contrastive terms, the evidence the name was written from "
                    "(shown under it); [] for names stored before they were kept.")
    @property
    def keywords(self) -> list[str]:
        return list(self.evidence.get("keywords") or [])

    @computed_field(description="The label holds 6 or more words verbatim from one excerpt it was named from: "
                    "a copy, never preferred over another name.")
    @property
    def copies_input(self) -> bool:
        return bool(self.evidence.get("copies_input", False))


class FeatureDetail(FeatureOut):
    histogram: list[int] = Field(description="Documents per activation bin, equal bins over [0, max_activation].")
    cooccurring: list[Neighbour] = Field(description="Top features by C_norm[i, j] = C[i, j] / f_i.")
    decoder_similar: list[Neighbour] = Field(description="Top features by decoder cosine similarity.")
    families: list[int] = Field(default_factory=list, description="Ids of the families it belongs to.")


class FamilyMemberOut(BaseModel):
    index: int
    parent_index: int | None
    depth: int


class FamilyOut(BaseModel):
    id: int
    iteration: int
    root_index: int = Field(description="Feature index of the family's parent (its root).")
    size: int
    label: str | None = Field(None, description="The family's name, from its members' names; null until named.")
    members: list[FamilyMemberOut] = Field(description="The root first, then each member with its parent and depth.")


class FamilyPage(BaseModel):
    items: list[FamilyOut] = Field(description="By iteration, then largest first.")
    total: int = Field(description="Families of the run (of the iteration asked for, if one was).")
    limit: int
    offset: int
