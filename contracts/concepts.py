"""Wire schemas of concepts: a saved feature expression or a sparse probe on an SAE run, with
its held-out metrics, applied to the whole dataset and exported as CSV."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from contracts.labels import LabellingOut, QueueSeed

MAX_DOCUMENT_IDS = 200_000
MAX_WORDS_REGEX = 1_000  # characters of a concept's own regex baseline


class LabelClasses(BaseModel):
    """Classes from the dataset's document labels (the `labels` field of each document)."""

    model_config = ConfigDict(extra="forbid")

    positive: list[str] = Field(min_length=1, max_length=50,
                                description="A document with any of these labels is positive.")
    negative: list[str] = Field(default_factory=list, max_length=50,
                                description="A document with any of these is negative; empty: every document "
                                            "without a positive label. A document with both is left out.")


class DocumentClasses(BaseModel):
    """Classes listed document by document (the gateway's document ids)."""

    model_config = ConfigDict(extra="forbid")

    positive: list[int] = Field(min_length=1, max_length=MAX_DOCUMENT_IDS)
    negative: list[int] = Field(min_length=1, max_length=MAX_DOCUMENT_IDS)


class Examples(BaseModel):
    """Labelled documents that train a probe and evaluate any concept: `labels` or `documents`."""

    model_config = ConfigDict(extra="forbid")

    labels: LabelClasses | None = None
    documents: DocumentClasses | None = None
    test_fraction: float = Field(default=0.25, ge=0.1, le=0.5,
                                 description="Share held out (stratified) for the metrics; never trained on.")
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seed of the held-out split and of the CV folds.")
    words_regex: str | None = Field(
        default=None, min_length=1, max_length=MAX_WORDS_REGEX,
        description="Your own rule in words, scored beside the concept on the same held-out documents "
                    "(`baselines.words_regex`): a regular expression (the `regex` package's syntax, as Python's `re`), "
                    "searched case-insensitively in each document's text. A pattern that does not compile is a 422 "
                    "naming this field and the position; one that runs longer than the time allowed over the held-out "
                    "documents is reported as not scored, with the reason.")
    words_regex_match: Literal["positive", "negative"] = Field(
        default="positive",
        description="What a match of `words_regex` predicts: 'positive' (a pattern for the concept itself) or "
                    "'negative' (a pattern for what rules it out: `\\b(no|denies|without)\\b` for an affirmed "
                    "mention, `sospett|esclus` for a confirmed diagnosis).")

    @field_validator("words_regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                regex.compile(pattern, regex.IGNORECASE)
            except regex.error as exc:
                where = f" at position {exc.pos}" if exc.pos is not None else ""
                raise ValueError(f"does not compile{where}: {exc.msg}") from None
        return pattern

    @model_validator(mode="after")
    def one_source(self) -> Examples:
        if (self.labels is None) == (self.documents is None):
            raise ValueError("give exactly one of `labels` (document labels) or `documents` (document ids)")
        return self


class ConceptCreate(BaseModel):
    """POST /api/v1/concepts: a saved expression (`kind: expression`) or a probe (`kind: probe`)."""

    model_config = ConfigDict(extra="forbid")

    sae_run_id: int = Field(description="A succeeded SAE run: the features the concept is written in.")
    name: str = Field(min_length=1, max_length=200, description="Unique within the SAE run.")
    description: str | None = Field(default=None, max_length=2000)
    kind: Literal["expression", "probe"]
    seed: QueueSeed | None = Field(default=None, description=(
        "kind probe without `examples`: a concept to be labelled note by note; the queue starts from this seed "
        "(an expression such as `label:\"bronchiolite\"`, or a text query)."))
    expression: str | None = Field(default=None, max_length=4000,
                                   description="kind expression: e.g. `F12 > 0.3 AND NOT F40 > 0`.")
    examples: Examples | None = Field(default=None, description="A probe's training data (without it, the probe is "
                                                                "trained on the labels given note by note); for an "
                                                                "expression, optional: what it is evaluated against.")
    segment_words: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=2, max_length=60)]] | None = (
        Field(default=None, min_length=1, max_length=20,
              description="kind probe, on an SAE run with segment codes: a document's codes are the max over only "
                          "its segments (clauses) whose text contains one of these words (case-insensitive), e.g. "
                          "`[\"bronchiolit\"]`: the word finds the mention, the features read its status. The "
                          "whole note's codes are also tried beside them and kept where they cross-validate better "
                          "on the training split (`probe.context`)."))


class EvaluateRequest(BaseModel):
    """POST /api/v1/concepts/{id}/evaluate: metrics again, on the concept's examples or on these."""

    model_config = ConfigDict(extra="forbid")

    examples: Examples | None = None


class ConfusionMatrix(BaseModel):
    tp: int
    fp: int
    fn: int
    tn: int


class PrCurve(BaseModel):
    precision: list[float]
    recall: list[float]
    thresholds: list[float | None] = Field(description="Probability at each point; None at the recall-0 end.")
    average_precision: float | None


class F1Difference(BaseModel):
    """The concept's F1 minus a baseline's on the same held-out documents, with a paired bootstrap interval."""

    difference: float = Field(description="F1 of the concept minus F1 of this baseline (positive: the features win).")
    low: float = Field(description="Lower end of the interval: the (1 - level) / 2 quantile of the resampled "
                                   "differences.")
    high: float = Field(description="Upper end of the interval: the (1 + level) / 2 quantile.")
    level: float = Field(description="Coverage of the interval (0.95).")
    resamples: int = Field(description="Bootstrap resamples: each draws the held-out documents with replacement, "
                                       "the same draw for the concept and the baseline (paired), seeded by the "
                                       "examples' seed.")
    distinguishable: bool = Field(description="The interval excludes 0: the difference is more than the noise of "
                                              "this held-out split. False: on these documents neither is shown "
                                              "better.")


class BaselineFigures(BaseModel):
    precision: float
    recall: float
    f1: float
    confusion: ConfusionMatrix
    f1_difference: F1Difference | None = Field(
        default=None, description="This concept against this baseline, paired on the same held-out documents; None "
                                  "for figures stored before it was computed (evaluate again).")


class RegexBaseline(BaselineFigures):
    pattern: str = Field(description="The regex itself, matched case-insensitively anywhere in the text.")
    positive_coverage: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Share of the training split's positive documents whose text it matches. Below 0.1 the "
                    "label's name is not a word these texts use (`status:affirmed` -> `statu`), and the regex is "
                    "no comparison a user would make: the page says so. None for figures stored before it.")


class WordsRegexBaseline(BaselineFigures):
    pattern: str = Field(description="`examples.words_regex`, searched case-insensitively in each document's text.")
    match: Literal["positive", "negative"] = Field(description="What a match predicts (`examples.words_regex_match`).")


class TfidfBaseline(BaselineFigures):
    n_train: int = Field(description="Training-split texts it was fitted on.")
    C: float | None = Field(default=None, description="The logistic regression's inverse regularisation, chosen by "
                                                      "stratified 3-fold CV on F1 among 0.1, 1, 10, 100 and 1000 "
                                                      "(on at most 5,000 training texts). None for figures stored "
                                                      "before C was tuned (C = 1 then).")
    sampled: bool = Field(description="The training split had more than 50,000 documents: 50,000 of them, drawn "
                                      "with the examples' seed, were used.")


class TfidfSegmentsBaseline(TfidfBaseline):
    segment_words: list[str] = Field(description="The probe's segment words: each document's text here is its "
                                                 "segments that contain one of them.")


class DenseBaseline(BaselineFigures):
    n_train: int = Field(description="Training-split documents it was fitted on.")
    C: float = Field(description="The logistic regression's inverse regularisation, chosen by stratified 3-fold CV "
                                 "on F1 among 0.01 to 100 (on at most 5,000 training documents).")
    sampled: bool = False


class Baselines(BaseModel):
    """Words alone, on the concept's own held-out split (the same train/test documents as its
    metrics), scored with the same precision/recall/F1: whether the features beat the text."""

    regex: RegexBaseline | None = Field(
        default=None,
        description="A keyword regex written from the positive labels: for each label, the part before the first "
                    "`:`, split into words on `_` and spaces, lower-cased; each word's stem is its first max(5, "
                    "len - 3) characters (`bronchiolitis:confirmed` -> `bronchioli`); the pattern is the "
                    "alternation of the stems (regex-escaped, `|`-joined), and a held-out document is predicted "
                    "positive when it matches anywhere in its text, case-insensitively. None for examples given "
                    "by document ids (no label to write it from).")
    words_regex: WordsRegexBaseline | None = Field(
        default=None,
        description="Your own regex (`examples.words_regex`), on the same held-out documents. None without one, or "
                    "when it was not scored (`words_regex_skipped` says why).")
    words_regex_skipped: str | None = Field(
        default=None, description="Why `examples.words_regex` was not scored (it ran past its time), else None.")
    tfidf_lr: TfidfBaseline | None = Field(
        default=None,
        description="scikit-learn TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2, its words plus "
                    "`?`, `[` and `]` as terms) + "
                    "LogisticRegression(class_weight='balanced', solver='liblinear', C by CV: `C`), fitted on the "
                    "training split's texts only; None when no term occurs in two training documents.")
    dense_lr: DenseBaseline | None = Field(
        default=None,
        description="The embedding run's own document vectors (unit norm) + LogisticRegression(class_weight="
                    "'balanced', C by CV), fitted on the training split only: the ceiling the features approach (the "
                    "same information, unnamed). None for figures stored before it existed or with too few training "
                    "documents of a class.")
    tfidf_lr_segments: TfidfSegmentsBaseline | None = Field(
        default=None,
        description="A probe with `segment_words` only: the same TF-IDF + logistic regression, on the same "
                    "documents, fitted and scored on the text the probe reads: for each document, the text of its "
                    "segments that contain one of the words (case-insensitive, the same segments as the probe's "
                    "codes), joined with a space; a document without one has empty text. None for an "
                    "expression, an unscoped probe, figures stored before this baseline existed, or when no term "
                    "occurs in two training documents' segments.")


class ConceptMetrics(BaseModel):
    """Held-out figures for the positive class."""

    precision: float
    recall: float
    f1: float
    confusion: ConfusionMatrix
    n_test: int = Field(description="Held-out documents.")
    n_test_positive: int
    n_train: int = Field(description="Documents the probe was trained on (0 for an expression).")
    n_excluded: int = Field(default=0, description="Labelled both positive and negative: left out.")
    pr_curve: PrCurve | None = Field(default=None, description="Probes only: scores are probabilities.")
    evaluated_at: datetime
    baselines: Baselines | None = Field(default=None, description="Words alone on the same split (stored figures "
                                                                  "only; see ConceptOut.baselines).")


class NamedWeight(BaseModel):
    index: int
    weight: float
    label: str | None = Field(description="The feature's shown name, if it has one.")
    reliable: bool | None = Field(description="Whether that name predicts its feature (None: not scored).")


class ProbeOut(BaseModel):
    C: float = Field(description="Inverse regularisation chosen by cross-validation.")
    cv_f1: float | None = Field(description="Mean cross-validated F1 at that C, on the training split (None: too few "
                                            "labels to cross-validate).")
    cv_labels: int | None = Field(default=None, description=(
        "Training labels the cross-validated F1 is of: all of them, or, past 20,000, the one fold the "
        "candidates were scored on (each fitted once on the other folds; the chosen one then on all)."))
    readout: Literal["l1", "row_l2"] = Field(default="l1", description=(
        "l1: L1 logistic regression on the codes; row_l2: codes at unit norm per note, L2 logistic regression. The "
        "one with the better cross-validated F1 on the training labels (with its C)."))
    intercept: float
    threshold: float = Field(description="Probability at or above which a document matches.")
    n_features: int = Field(description="Features with a non-zero weight.")
    converged: bool
    weights: list[NamedWeight] = Field(description="Non-zero weights, largest magnitude first.")
    segment_words: list[str] | None = Field(default=None, description="The probe reads only the segments naming "
                                                                      "one of these words (None: every segment).")
    context: Literal["document"] | None = Field(default=None, description=(
        "'document': a scoped probe that also reads the whole note's features (`context_weights`), chosen over the "
        "segments alone by a higher cross-validated F1 on the training split; None: the segments alone."))
    context_weights: list[NamedWeight] = Field(default_factory=list, description=(
        "With context: non-zero weights of the features read on the whole note, largest magnitude first."))


class AppliedOut(BaseModel):
    job_id: str | None
    status: str | None = Field(description="The apply job's status; None when never applied.")
    n_matches: int | None = None
    n_documents: int | None = None
    export_url: str | None = Field(default=None, description="CSV of the matches, once applied.")
    trained_on: dict | None = Field(default=None, description="The labels the applied probe was trained on: count "
                                                              "and hash (a concept trained on its label set).")


class ConceptOut(BaseModel):
    id: int
    sae_run_id: int
    name: str
    description: str | None
    kind: str = Field(description="expression | probe")
    expression: str | None
    examples: Examples | None
    metrics: ConceptMetrics | None = Field(description="None when the concept has no labelled examples.")
    baselines: Baselines | None = Field(
        default=None, description="What words alone reach on the same held-out split as `metrics` (a keyword regex "
                                  "from the positive labels, TF-IDF + logistic regression on the whole text and, "
                                  "for a scoped probe, on its segments); None without metrics.")
    probe: ProbeOut | None
    features: list[NamedWeight] = Field(default_factory=list,
                                        description="Expression: the features it refers to (weight 1).")
    applied: AppliedOut
    seed: QueueSeed | None = Field(default=None, description="Where the labelling queue starts.")
    labelling: LabellingOut | None = Field(default=None, description=(
        "The probe trained on the label set: labels so far, the estimate of F1, the learning curve beside TF-IDF, "
        "the features that carry it; None until it is first trained."))
    created_at: datetime


class StrongestWords(BaseModel):
    """The words-alone baseline with the highest held-out F1 on the concept's split, against the concept."""

    method: Literal["regex", "words_regex", "tfidf_lr", "tfidf_lr_segments"] = Field(description="A key of `Baselines`.")
    f1: float
    f1_difference: F1Difference | None = Field(description="The concept minus it, paired on the same held-out "
                                                           "documents (None: stored before it was computed).")


class ConceptSummary(BaseModel):
    id: int
    sae_run_id: int
    name: str
    kind: str
    f1: float | None
    words: StrongestWords | None = Field(default=None, description=(
        "What words alone reach at best on the same split (the list's 'features against words'); None without "
        "metrics or baselines."))
    n_matches: int | None
    created_at: datetime


class ConceptList(BaseModel):
    items: list[ConceptSummary]
    total: int
