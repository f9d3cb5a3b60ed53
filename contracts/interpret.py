"""Interpreter service contracts: naming SAE features, scoring the names, jobs on the `interpreter` queue.

An *interpretation* is a label and a description for one feature, written by one back-end
from evidence (excerpts of activating documents, non-activating documents), scored on
held-out documents the back-end was never shown. Several are kept per feature; the one with
the best score is shown. Evidence is referred to by dataset positions, never by text.

Artifacts of a naming run, under `artifact_prefix`:
- `interpretations/shard-00000.jsonl`: one `FeatureInterpretations` a line, a batch of features
  per shard (the unit of checkpointing: a killed worker loses at most the batch in flight).
- `families.json`: `FamilyLabel` list, when families were given.
- `result.json`: `InterpretRunResult`, written last.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from contracts.artifacts import ArtifactInfo
from contracts.embed import Pooling
from contracts.model_allowlist import resolve_allowed
from contracts.runs import InterpretationOut
from contracts.sae import FeatureFamily

#: 'ollama': a model served by Ollama (the compose default); 'llamacpp': a GGUF model in-process
#: (SmolLM2-135M-Instruct by default); 'keywords': contrastive term statistics, no language model.
BackendName = Literal["ollama", "llamacpp", "keywords"]


class EvidenceConfig(BaseModel):
    """How many documents of each kind a feature is explained from and scored on."""

    model_config = ConfigDict(extra="forbid")

    activating: int = Field(default=12, ge=1, le=100, description="Activating excerpts shown to the back-end.")
    quantiles: int = Field(
        default=4, ge=1, le=20,
        description="Activation quantile bins the shown activating documents are drawn from evenly, "
        "the top bin first: a label must cover the feature's typical documents, not only its extremes.",
    )
    random_negatives: int = Field(default=6, ge=0, le=100, description="Random non-activating documents shown.")
    hard_negatives: int = Field(
        default=6, ge=0, le=100,
        description="Shown non-activating documents nearest (cosine of document embeddings) to the "
        "activating ones (see hard_negatives_from): what the label must exclude.",
    )
    hard_negatives_from: Literal["neighbours", "centroid"] = Field(
        default="neighbours",
        description="Where hard negatives are found: `neighbours`, the nearest non-activating documents of "
        "each of the strongest activating ones in turn; `centroid`, those nearest to their centroid.",
    )
    hard_negative_anchors: int = Field(
        default=10, ge=1, le=100,
        description="Strongest activating documents (never held out) whose neighbours are hard negatives.",
    )
    holdout_activating: int = Field(
        default=20, ge=1, le=1000,
        description="Activating documents held out for scoring (never shown). 20 is the brief's minimum; "
        "a feature firing on fewer than 2× this many documents gets half of them held out.",
    )
    holdout_non_activating: int = Field(
        default=20, ge=2, le=1000,
        description="Non-activating documents held out for scoring, half of them hard negatives.",
    )
    min_activating: int = Field(
        default=4, ge=2, le=100_000,
        description="Features firing on fewer documents are not named (too little evidence).",
    )
    excerpt_chars: int = Field(
        default=600, ge=50, le=20_000,
        description="Characters of an excerpt, centred on the chunk where the feature is strongest.",
    )
    selection_activating: int = Field(
        default=200, ge=2, le=1000,
        description="Shown (never held-out) activating documents, spread over the activation ranks, that "
        "candidate labels are compared on: the best candidate by embedding AUROC on these is kept.",
    )
    selection_hard_negatives: int = Field(
        default=60, ge=0, le=1000,
        description="Extra hard negatives (the next nearest after the shown ones, never held out) that "
        "candidates are compared on, with as many random non-activating documents: the held-out mix.",
    )
    seed: int = Field(default=0, description="Seeds sampling; the same seed gives the same evidence.")


class ScoringConfig(BaseModel):
    """Which scorers run and where the line between reliable and unreliable is."""

    model_config = ConfigDict(extra="forbid")

    embedding: bool = Field(default=True, description="Run the embedding scorer (no LLM; cheap).")
    detection: bool = Field(
        default=False,
        description="Run the detection scorer (one LLM call per held-out document; slow). Never with "
        "the keywords back-end, which has no model to judge with.",
    )
    embedding_threshold: float = Field(
        default=0.65, ge=0.0, le=1.0,
        description="AUROC below which a label is unreliable. Random labels of other features score "
        "about 0.5 (the control reports it); 0.65 is a clear margin above chance on 20 + 20 documents.",
    )
    detection_threshold: float = Field(
        default=0.65, ge=0.0, le=1.0, description="Balanced accuracy below which a label is unreliable.",
    )
    min_holdout_activating: int = Field(
        default=10, ge=1, le=1000,
        description="Held-out activating documents a score must rest on for the name to count as reliable. "
        "A feature firing on fewer than twice this many documents keeps its score but is marked unreliable: "
        "on 3 held-out documents a score of 1.0 says little (chance alone spreads AUROC by ±0.18 there).",
    )
    control: bool = Field(
        default=True, description="Score a random-label control (another feature's label) per feature.",
    )
    keep_candidates: int = Field(
        default=1, ge=1, le=8,
        description="Candidates of each back-end kept, the best by embedding AUROC on the evidence documents "
        "(never the held-out ones, so the held-out score stays an honest estimate). Without an embedder, "
        "the back-end's first ones.",
    )


class EvidenceIds(BaseModel):
    """Dataset positions a back-end was shown and the interpretation was scored on."""

    activating: list[int] = Field(description="Shown activating documents, strongest first.")
    random_negatives: list[int] = Field(default_factory=list)
    hard_negatives: list[int] = Field(default_factory=list)
    holdout_activating: list[int] = Field(default_factory=list, description="Scored on, never shown.")
    holdout_non_activating: list[int] = Field(default_factory=list, description="Scored on, never shown.")
    keywords: list[str] = Field(
        default_factory=list,
        description="The feature's most contrastive terms (activating vs non-activating documents), as written: "
        "shown under the name as its evidence, and given to a language model as hints. Term statistics, not text.",
    )
    near_misses: list[int] = Field(default_factory=list, description="Near misses contrasted with (never held out).")
    holdout_near_misses: list[int] = Field(default_factory=list, description="Near misses scored on, never shown.")
    near_miss_examples: list[str] = Field(default_factory=list, description="Held-out near misses' first 160 chars.")


HOLDS_ON = ("Units (segments, or documents without segments) of the naming corpus where the feature reaches the "
            "threshold and the name's words occur, estimated: the precision at the threshold times the feature's "
            "activations at or above it. Of features that would show one name, the one holding it on most keeps it.")


class Alternative(BaseModel):
    """Another phrase of the feature, scored and calibrated like its name: shown where another feature holds
    that name better (one meaning per name)."""

    label: str
    score: float | None = Field(default=None, description="The lower of its own held-out and near-miss AUROCs.")
    score_embedding: float | None = Field(default=None, description=(
        "Its own AUROC of cos(phrase, document) on the name's held-out documents (before 2026-11-28 the name's was "
        "used in its place)."))
    score_near_miss: float | None = None
    threshold: float | None = None
    reliable: bool | None = None
    holds_on: int | None = Field(default=None, description=HOLDS_ON)
    precision_curve: list[tuple[float, float, int]] = Field(default_factory=list, description=(
        "Its own (activation, precision, segments) points, on the name's calibration segments: shown with its "
        "threshold where it replaces the name."))


class Interpretation(BaseModel):
    """One name for one feature, as the gateway's `interpretations` table stores it."""

    feature: int = Field(ge=0, description="Latent index in the SAE.")
    label: str = Field(min_length=1, max_length=200, description="A short noun phrase.")
    description: str | None = Field(default=None, description="One or two sentences.")
    backend: BackendName
    model: str | None = Field(default=None, description="The language model, None for keywords.")
    prompt_version: str | None = Field(default=None, description="e.g. 'name_feature.v1'.")
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    evidence: EvidenceIds
    score_embedding: float | None = Field(default=None, description="AUROC of cos(label, document), held out.")
    score_evidence: float | None = Field(
        default=None, description="The same AUROC on the evidence documents it was chosen on (optimistic).",
    )
    score_detection: float | None = Field(default=None, description="Balanced accuracy of the LLM judge.")
    control_embedding: float | None = Field(default=None, description="The same scorer on another feature's label.")
    control_detection: float | None = None
    score: float | None = Field(default=None, description="The score best-of-n uses: detection, else embedding.")
    reliable: bool | None = Field(default=None, description="score ≥ threshold; None when unscored.")
    copies_input: bool = Field(
        default=False,
        description="The label holds a verbatim run of at least 6 words of one excerpt the back-end was shown: "
        "a copy, not a name. Kept and shown as such, but never preferred over a label that is not a copy.",
    )
    score_near_miss: float | None = Field(default=None, description="AUROC, held-out activating vs held-out near misses.")
    threshold: float | None = Field(default=None, description="Lowest activation above which the name holds (its "
                                    "words occur) on >= 80 % of the calibration segments; None: none does.")
    precision_curve: list[tuple[float, float, int]] = Field(default_factory=list,
                                                            description="(t, precision above t, segments above t).")
    calibrated_on: int = Field(default=0, description="Segments the precision curve was measured on.")
    calibration: Literal["sample", "strongest_and_sample"] | None = Field(
        default=None, description="What the curve counted: `strongest_and_sample`, the feature's strongest segments "
        "each and a weighted sample of the rest (since 2026-11-29); `sample`, a sample without the strongest (before).")
    holds_on: int | None = Field(default=None, description=HOLDS_ON)
    unreliable_reason: str | None = Field(default=None, description=(
        "Why the name is unreliable, in words (each test it failed); None when it is reliable or unscored."))
    alternatives: list[Alternative] = Field(default_factory=list, description="The feature's next phrases, scored.")


class FeatureInterpretations(BaseModel):
    """Every interpretation of one feature, and which is shown."""

    feature: int
    n_activating: int = Field(description="Documents where the feature fires.")
    interpretations: list[Interpretation] = Field(default_factory=list)
    best: int | None = Field(default=None, description="Index into interpretations of the best-scoring one.")
    skipped: str | None = Field(default=None, description="Why the feature was not named (e.g. too rare).")
    errors: list[str] = Field(default_factory=list, description="Back-end failures after retries (typed, short).")
    keywords: list[str] = Field(default_factory=list, description="The feature's most contrastive terms (evidence).")


class CorpusRef(BaseModel):
    """Where a naming run reads its documents, vectors and codes (artifact URIs)."""

    model_config = ConfigDict(extra="forbid")

    snapshot_uri: str = Field(description="Dataset snapshot Parquet (position, doc_id, external_id, text, ...).")
    embeddings: list[str] = Field(min_length=1, description="Embedding shards .npy in order (unit-norm rows).")
    chunks: list[str] = Field(default_factory=list, description="Chunk shards .npz (CHUNK_ARRAYS); [] for none.")
    codes_csc_uri: str = Field(description="The SAE run's codes, CSC npz float32 [docs, n].")
    sae_uri: str | None = Field(
        default=None, description="The SAE folder (cfg.json): needed to find the strongest chunk.",
    )
    segments: list[str] = Field(
        default_factory=list,
        description="Segment shards .npz of the embedding run (SEGMENT_ARRAYS), with `segment_codes_uri`: the "
        "features are then named on segments (sentences), each segment a unit of evidence, instead of on "
        "whole documents. [] for documents.",
    )
    segment_codes_uri: str | None = Field(
        default=None, description="The SAE run's segment codes, CSR npz float32 [segments, n]; with `segments`.",
    )

    @model_validator(mode="after")
    def _segments_together(self) -> CorpusRef:
        if bool(self.segments) != bool(self.segment_codes_uri):
            raise ValueError("segments and segment_codes_uri: give both (naming on segments) or neither")
        return self


class BackendOptions(BaseModel):
    """The back-end and how it is asked."""

    model_config = ConfigDict(extra="forbid")

    backend: BackendName = "keywords"
    model: str | None = Field(default=None, description="Override the service's model for this back-end: an "
                              "Ollama model tag, or for llamacpp a name of the allowlist (PRISMA_MODELS), never a path.")
    candidates: int = Field(default=3, ge=1, le=8, description="Candidate labels asked of an LLM; the scorer picks.")
    temperature: float = Field(default=0.3, ge=0.0, le=2.0)

    @field_validator("model")
    @classmethod
    def _llamacpp_model_by_name(cls, model: str | None, info: ValidationInfo) -> str | None:
        """A llamacpp model is a name of the allowlist, never a path (422 listing the names)."""
        if info.data.get("backend") == "llamacpp" and model is not None:
            resolve_allowed(model, kind="gguf")
        return model
    language: Literal["auto", "en", "it"] = Field(
        default="auto",
        description="Language an LLM writes names in: the corpus's ('auto': English or Italian, by which "
        "language's stop-words its documents use more), or the one given.",
    )


class LabelEmbedding(BaseModel):
    """How labels are embedded for the embedding scorer: as the run's documents were."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="default", description="The embedding run's model ('default', a path or a hub id).")
    pooling: Pooling = "mean"
    normalize: bool = True
    prompt_name: str | None = Field(default=None, max_length=50,
                                    description="The model's prompt for labels: 'query' for E5 (its documents went in "
                                    "as 'passage'); None for a model without prompts.")


class InterpretRequest(BaseModel):
    """`POST /interpret`: (re-)interpret one feature now."""

    model_config = ConfigDict(extra="forbid")

    corpus: CorpusRef
    label_embedding: LabelEmbedding | None = Field(
        default=None, description="None: the interpreter's configured embedding model, mean pooling.",
    )
    feature: int = Field(ge=0)
    backend: BackendOptions = Field(default_factory=BackendOptions)
    evidence: EvidenceConfig = Field(default_factory=EvidenceConfig)
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    control_labels: list[str] = Field(
        default_factory=list,
        description="Labels of other features for the random-label control; [] skips the control.",
    )


class InterpretResult(FeatureInterpretations):
    """The new interpretations of the feature (the gateway adds them to those it has)."""


class ReinterpretRequest(BackendOptions):
    """`POST /api/v1/sae-runs/{id}/features/{index}/interpretations`: name one feature again, now.

    The new names are scored on held-out documents, stored beside the feature's earlier ones, and
    the best-scoring of all is shown (best-of-n)."""

    detection: bool = Field(
        default=False, description="Also run the detection scorer (an LLM back-end judges each held-out document).",
    )

    @model_validator(mode="after")
    def _detection_needs_a_model(self) -> ReinterpretRequest:
        if self.detection and self.backend == "keywords":
            raise ValueError("detection: needs an LLM back-end (ollama or llamacpp), not keywords")
        return self


class ReinterpretOut(BaseModel):
    """What a re-interpretation added, and the feature's shown (best) interpretation after it."""

    feature: int
    created: list[InterpretationOut] = Field(description="The interpretations stored by this request.")
    best: InterpretationOut | None = Field(description="The feature's best interpretation now (maybe an earlier one).")
    errors: list[str] = Field(default_factory=list, description="Back-end failures after retries.")


class InterpretRunPayload(BaseModel):
    """The `interpret_run` job: name every feature (or `features`) of an SAE run."""

    model_config = ConfigDict(extra="forbid")

    run_id: int | str = Field(description="The gateway's SAE run id (for logs and progress).")
    corpus: CorpusRef
    artifact_prefix: str = Field(min_length=1, description="Store prefix for shards and result.")
    features: list[int] | None = Field(default=None, description="Feature indices; None: every feature.")
    backends: list[BackendOptions] = Field(
        default_factory=lambda: [BackendOptions()], min_length=1,
        description="Each back-end adds its interpretations; best-of-n picks among all.",
    )
    evidence: EvidenceConfig = Field(default_factory=EvidenceConfig)
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    label_embedding: LabelEmbedding | None = Field(
        default=None, description="How the scorer embeds labels: as the SAE run's embedding run meets a query (its "
        "model, pooling and query prompt). None: the interpreter's configured embedding model, mean pooling.",
    )
    batch_features: int = Field(default=64, ge=1, le=10_000, description="Features per checkpoint shard.")
    order: Literal["index", "browse"] = Field(
        default="browse",
        description="Which features are named first when `features` is None: `browse`, the order the features "
        "page lists them by default (densest first: the ones a person meets first and whose names rest on the "
        "most held-out documents); `index`, by latent index.",
    )
    limit: int | None = Field(
        default=None, ge=1,
        description="Name only the first this many features in that order; the rest are named on demand "
        "(re-interpret). None: all of them.",
    )
    keywords_fallback: bool = Field(
        default=True,
        description="When no `keywords` back-end is listed, add one: its term lists stay the fallback where the "
        "language model fails, and best-of-n shows them where the model's name scores worse.",
    )
    families: list[FeatureFamily] = Field(default_factory=list, description="Families to name after features.")

    @model_validator(mode="after")
    def _no_keyword_detection(self) -> InterpretRunPayload:
        if self.scoring.detection and all(b.backend == "keywords" for b in self.backends):
            raise ValueError("scoring.detection needs an LLM back-end (ollama or llamacpp)")
        return self


class FamilyLabel(BaseModel):
    iteration: int
    parent: int
    children: list[int]
    label: str
    description: str | None = None
    backend: BackendName
    model: str | None = None


class InterpretRunResult(BaseModel):
    run_id: int | str
    n_features: int = Field(description="Features asked for.")
    n_named: int = Field(description="Features with at least one interpretation.")
    n_skipped: int = Field(description="Too rare, or every back-end failed.")
    shards: list[ArtifactInfo] = Field(description="interpretations/shard-*.jsonl in order.")
    families: ArtifactInfo | None = None
    seconds: float = Field(description="Wall time of this invocation.")
    features_per_min: float = Field(description="Features named per minute in this invocation.")
    mean_score: float | None = Field(default=None, description="Mean best score over named features.")
    unreliable_fraction: float | None = Field(default=None, description="Share of named features marked unreliable.")
    resumed_batches: int = Field(default=0, description="Shards found complete and kept.")
