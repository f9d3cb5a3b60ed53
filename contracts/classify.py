"""Concepts in production: texts classified by a concept (`POST /api/v1/concepts/{id}/classify`) and encoded by
an SAE run (`POST /api/v1/sae-runs/{id}/encode`), each exactly as the run's pipeline treats a stored note."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_TEXTS = 256
"""Texts per call; each is bounded as an upload bounds a document (the gateway's max_document_bytes)."""


class TextsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    texts: list[str] = Field(min_length=1, max_length=MAX_TEXTS, description=(
        f"At most {MAX_TEXTS} notes, each not empty and at most the gateway's max_document_bytes of UTF-8 (an "
        "upload's bound for a document). Never stored nor logged; the call is audited by its count."))


class ClassifyRequest(TextsIn):
    """Texts to classify with a concept."""


class EncodeTextsRequest(TextsIn):
    """Texts to encode with an SAE run."""

    top: int = Field(default=10, ge=1, le=256, description="Features listed per text and per segment, strongest first.")


class Span(BaseModel):
    start: int = Field(description="Character offset in the text where the segment starts.")
    end: int = Field(description="One past its last character: text[start:end] is the segment.")


class ModelOut(BaseModel):
    """The model the SAE run's notes were embedded by (and these texts now)."""

    name: str = Field(description="The allowlist name (multilingual-e5-small by default).")
    precision: str = Field(description="fp32, bf16, fp16 or int8.")
    engine: str = Field(description="'torch', or 'ctranslate2' for int8 on CPU.")
    file_sha256: str | None = Field(description="SHA-256 of the shipped model file (None: a packaged model named "
                                    "by its version in `provenance`, or a local directory).")
    provenance: dict | None = Field(description="Where the model comes from, as the run recorded it (package, "
                                    "version, file hash, licences); the embedder here runs the same.")


class Evidence(BaseModel):
    """A feature that carried the decision."""

    index: int
    label: str | None = Field(description="The feature's shown name (None: unnamed).")
    reliable: bool | None = None
    activation: float = Field(description="Its activation where the concept read it (the note, or the scope).")
    weight: float | None = Field(description="The probe's weight on it (None for an expression).")
    contribution: float | None = Field(description="activation × weight, on the rows the probe reads (a readout "
                                       "trained on unit-norm rows reads the row at unit norm); None for an expression.")
    read_on: Literal["note", "scope"] = Field(description="'scope': a scoped probe's clauses that name its topic.")
    segment: Span | None = Field(description="The clause where it fires strongest (within the scope for 'scope'); "
                                 "None on a run without segment codes.")


class Classified(BaseModel):
    decision: bool = Field(description="Whether the concept selects the text.")
    score: float = Field(description="A probe's P(positive); an expression's score (as apply ranks its matches).")
    threshold: float | None = Field(description="A probe's threshold (decision: score >= it); None for an expression.")
    evidence: list[Evidence] = Field(description="A probe's features that pushed hardest toward its decision (the "
                                     "largest positive contributions for a yes, the most negative for a no), "
                                     "strongest first; an expression's features that fire, strongest first.")
    segment: Span | None = Field(default=None, description="An expression with SEGMENT(…): the clause it matched on.")
    scope: list[Span] | None = Field(default=None, description="A scoped probe: the clauses that name its topic "
                                     "(its segment_words), the only ones it reads ([]: none, scored on nothing).")


class ClassifyOut(BaseModel):
    concept_id: int
    concept_version: str = Field(description="Hash of the concept's definition, as its apply job names it.")
    kind: Literal["expression", "probe"]
    sae_run_id: int
    model: ModelOut
    items: list[Classified] = Field(description="One per text, in order.")


class EncodedFeature(BaseModel):
    index: int
    label: str | None
    reliable: bool | None = None
    activation: float


class EncodedSegment(BaseModel):
    start: int
    end: int
    features: list[EncodedFeature]


class EncodedText(BaseModel):
    n_active: int = Field(description="Features active on the text (as the run's codes count them).")
    features: list[EncodedFeature] = Field(description="The strongest `top`, as the run stores the note's codes.")
    segments: list[EncodedSegment] | None = Field(description="Each segment's strongest `top`, in text order; None "
                                                  "on a run without segment codes.")


class EncodeOut(BaseModel):
    sae_run_id: int
    model: ModelOut
    items: list[EncodedText] = Field(description="One per text, in order.")
