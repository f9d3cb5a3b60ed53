"""Wire schemas of `POST /api/v1/sae-runs/{id}/search`: one body per mode (discriminated by
`mode`), one answer per mode, and the 422 that says where an expression is wrong."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_TEXT_RESULTS = 1000  # text search ranks every document; pages reach this deep


class _Page(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=20, ge=1, le=200, description="Results per page.")
    offset: int = Field(default=0, ge=0, description="Results to skip.")


class ExpressionSearch(_Page):
    """Documents selected by a feature expression, e.g. `F12 > 0.3 AND NOT label:"suspected"`."""

    mode: Literal["expression"]
    expression: str = Field(min_length=1, max_length=10_000,
                            description="The expression (see README: feature expressions).")


class TextSearch(_Page):
    """The documents nearest to a text (cosine of embeddings), and the text's own features."""

    mode: Literal["text"]
    text: str = Field(min_length=1, max_length=10_000, description="The query, embedded like the documents.")
    top_features: int = Field(default=10, ge=0, le=64, description="How many of the query's features to name.")

    @model_validator(mode="after")
    def _within_depth(self) -> TextSearch:
        if self.offset + self.limit > MAX_TEXT_RESULTS:
            raise ValueError(f"offset + limit must be at most {MAX_TEXT_RESULTS} for text search")
        return self


class LabelSearch(_Page):
    """Features by their shown label and description: full-text words, or semantic similarity."""

    mode: Literal["label"]
    query: str = Field(min_length=1, max_length=500, description='Words (full text: each begins a word of the '
                       'label, or is one where quoted: "no" finds "no rash", not "normal") or a phrase (semantic).')
    method: Literal["fulltext", "semantic"] = Field(
        default="fulltext", description="fulltext: every word as a prefix (whole where quoted), names holding "
        "them as whole words first; semantic: cosine of embeddings.")


SearchRequest = Annotated[ExpressionSearch | TextSearch | LabelSearch, Field(discriminator="mode")]


class FeatureHit(BaseModel):
    """A feature with its activation in a document (or query), and its shown label."""

    index: int
    activation: float | None = Field(default=None, description="Activation here; None when only referenced.")
    label: str | None = Field(default=None, description="The best interpretation's label; None if unnamed.")
    reliable: bool | None = Field(default=None, description="False: the label does not predict the feature.")


class SegmentHit(BaseModel):
    """A segment (clause or sentence) of a document: the one that satisfied an expression's SEGMENT(…), or
    the one nearest a text search's query."""

    index: int = Field(description="The segment's row among the run's segments (the SAE run's segment codes' row).")
    start: int = Field(description="Its first character in the document's text (0-based).")
    end: int = Field(description="One past its last character.")


class DocumentHit(BaseModel):
    position: int = Field(description="0-based position in the dataset.")
    document_id: int | None
    external_id: str | None
    score: float = Field(description="expression: the expression's value; text: cosine similarity (ranked by documents "
                         "and segments: the mean of the document's and its best segment's).")
    excerpt: str = Field(description="The document's first characters, or those around `segment`.")
    excerpt_start: int = Field(default=0, description="Where the excerpt starts in the document's text.")
    segment: SegmentHit | None = Field(
        default=None, description="expression: the best-scoring segment that satisfied SEGMENT(…); text (ranked by "
        "documents and segments): the segment nearest the text; else None.")
    labels: list[str] = Field(default_factory=list)
    features: list[FeatureHit] = Field(
        default_factory=list, description="The expression's (or query's) features active in this document.")
    segment_features: list[FeatureHit] | None = Field(
        default=None, description="expression, when it matched through `segment`: the expression's features "
        "active in that segment, with their activation there (what SEGMENT(…) read); else None.")


class ExpressionResult(BaseModel):
    mode: Literal["expression"] = "expression"
    expression: str
    total: int = Field(description="Documents matching, over the whole dataset.")
    limit: int
    offset: int
    features: list[FeatureHit] = Field(description="The features the expression refers to, labels resolved.")
    items: list[DocumentHit]
    elapsed_ms: float = Field(description="Time to evaluate the expression over every document.")


class TextResult(BaseModel):
    mode: Literal["text"] = "text"
    text: str
    total: int = Field(description="Documents ranked (every document of the run).")
    limit: int
    offset: int
    index: str = Field(description="exact (every document and segment scored), or the FAISS index kind: flat "
                       "(exact), hnsw or ivf.")
    ranked_by: Literal["documents", "documents and segments"] = Field(
        default="documents", description="documents: the cosine of each document's vector; documents and segments "
        "(a run with segments): the mean of that cosine and its best segment's, which each hit's `segment` is.")
    query_features: list[FeatureHit] = Field(description="The query's own strongest features.")
    items: list[DocumentHit]


class LabelHit(BaseModel):
    index: int
    label: str
    description: str | None
    score: float = Field(description="fulltext: rank (higher is better); semantic: cosine similarity.")
    interpretation_score: float | None = Field(description="How well the label predicts the feature.")
    reliable: bool | None
    density: float
    threshold: float | None = Field(default=None, description='Activation above which the name holds: label:"…" means above it.')
    notes: int | None = Field(default=None, description='Documents label:"…" selects (activation at or above the threshold).')


class LabelResult(BaseModel):
    mode: Literal["label"] = "label"
    query: str
    method: Literal["fulltext", "semantic"]
    total: int
    limit: int
    offset: int
    items: list[LabelHit]


SearchResponse = Annotated[ExpressionResult | TextResult | LabelResult, Field(discriminator="mode")]


class Candidate(BaseModel):
    index: int
    label: str


class SearchErrorOut(BaseModel):
    """A 422 from search: the sentence, and where and why, as far as known."""

    detail: str
    field: str | None = None
    locator: str | None = Field(default=None, description="'line 1, column 8' for expression errors.")
    line: int | None = None
    column: int | None = None
    expected: list[str] = Field(default_factory=list, description="What the grammar accepts at that place.")
    index: int | None = Field(default=None, description="A feature index out of range.")
    n_features: int | None = None
    candidates: list[Candidate] = Field(default_factory=list, description="Features an unknown label could mean, "
                                       "or that plain words typed as an expression could name.")


class ReadFeature(FeatureHit):
    """A feature active in a document or segment, as the document view lists it."""

    threshold: float | None = Field(default=None, description="Its shown name's calibrated threshold; None without one.")
    selected: bool | None = Field(
        default=None, description='Whether label:"…" selects it here: the activation reaches its shown name\'s '
        "threshold (any activation where the name has none); None where it is not named.")


class SegmentFeatures(BaseModel):
    """One segment (clause or sentence) of a document with the features active in it, strongest first."""

    index: int = Field(description="The segment's row among the run's segments (the SAE run's segment codes' row).")
    start: int = Field(description="Its first character in the document's text (0-based).")
    end: int = Field(description="One past its last character.")
    n_active: int = Field(description="Features active in the segment (at most the SAE's k).")
    features: list[ReadFeature] = Field(description="The strongest `per_segment` of them.")
    marked_activation: float | None = Field(
        default=None, description="The `mark` feature's activation in the segment (0 where silent); None without `mark`.")


class DocumentFeatures(BaseModel):
    """`GET /api/v1/sae-runs/{id}/documents/{document_id}`: one document as the SAE run reads it."""

    sae_run_id: int
    document_id: int
    position: int = Field(description="0-based position in the dataset: the document's row of the run's codes.")
    external_id: str | None
    text: str
    labels: list[str]
    n_active: int = Field(description="Features active in the document.")
    features: list[ReadFeature] = Field(description="The document's strongest `limit` features (its own codes; in a "
                                       "run with segments, each the max over its segments).")
    marked: ReadFeature | None = Field(
        default=None, description="The `mark` feature, named, with its activation in the document; None without `mark`.")
    n_segments: int | None = Field(description="The document's segments; None when the run has no segment codes.")
    segment_offset: int = Field(default=0, description="The first segment listed (segments are paged).")
    segments: list[SegmentFeatures] | None = Field(
        description="A page of its segments in order, each with its features; None when the run has no segment codes.")
