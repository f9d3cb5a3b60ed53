"""SAE service contracts: training config, job payload and result, statistics and families.

The model is the TopK sparse autoencoder of Gao et al. (2024) as EleutherAI's sparsify
implements it; the families are those of O'Neill et al. (2024). Every default says why.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from contracts.artifacts import ArtifactInfo
from contracts.packed import PackedArray


MAX_SAMPLES = 4_000_000
"""The default bound on the samples an SAE trains on (see SaeConfig.max_samples)."""
LR_REFERENCE_BATCH = 256
"""The largest batch at which the default learning rate is sparsify's rule; larger batches scale it linearly."""


class SaeConfig(BaseModel):
    """How one TopK SAE is trained. `validate_for_dim(d)` adds the checks that need `d`."""

    model_config = ConfigDict(extra="forbid")

    expansion_factor: int = Field(
        default=8, ge=1, le=256,
        description="Latents per input dimension, n = expansion_factor × d. 8 gives n = 3,072 for "
        "MiniLM (d = 384): enough features for a corpus of ~10^5 documents without most of them dying.",
    )
    k: int = Field(
        default=32, ge=1, le=4096,
        description="Active latents per document (L0). 32 is sparsify's default and the paper's setting; "
        "it must be at most n.",
    )
    k_aux: int | None = Field(
        default=None, ge=1, le=65_536,
        description="Dead latents used by the AuxK loss; None means d // 2, the heuristic of Gao et al. "
        "appendix B.1 that sparsify hard-codes.",
    )
    aux_alpha: float = Field(
        default=1 / 32, ge=0.0, le=10.0,
        description="Weight α of the AuxK loss. 1/32 is the value of Gao et al.; 0 disables AuxK.",
    )
    dead_after_samples: int | None = Field(
        default=None, ge=1, le=10**12,
        description="A latent is dead once it has not fired for this many training samples. None means "
        "one epoch of the training split: sparsify's 10M tokens is far more than a document collection "
        "holds, and a latent that fires on no document of a full pass is dead for this corpus "
        "(its expected firings per epoch are k·N/n, e.g. 27 for N = 2,600, k = 32, n = 3,072).",
    )
    lr: float | None = Field(
        default=None, gt=0.0, le=1.0,
        description="Adam learning rate; None: sparsify's rule 2e-4 / sqrt(n / 2^14) (the update size kept "
        "across widths), times rows / 256 where a batch as trained (batch_size clipped to the training "
        "split) has more than 256 rows: 512 rows take half the steps of 256, each twice as large.",
    )
    lr_warmup_steps: int = Field(
        default=100, ge=0, le=10_000_000,
        description="Linear warm-up steps, then linear decay to 0 at the last step, as sparsify's Adam "
        "schedule; 100 (not sparsify's 1,000) because document runs have a few thousand steps.",
    )
    batch_size: int = Field(
        default=256, ge=1, le=65_536,
        description="Rows per step; clipped to the training split's size. 512 rows at twice the rate train "
        "the same samples in 0.5-0.8 of the time with a lower held-out FVU, but on E3C the probe read their "
        "codes less well with 50-400 labels (bench/studies/results/sae-batch-en.json): a choice for speed.",
    )
    epochs: int = Field(
        default=50, ge=1, le=100_000,
        description="Passes over the training split when max_steps is None, up to max_samples. Document corpora "
        "are small (10^3 to 10^6 rows), so an SAE needs many passes to converge.",
    )
    max_samples: int | None = Field(
        default=MAX_SAMPLES, ge=1, le=10**12,
        description="With max_steps None, training stops after this many samples (rows seen, repeats counted) "
        "even if the epochs are not done: 4,000,000, about 50 epochs of 80,000 clauses. On real clinical cases "
        "(E3C, 77,000 clauses) the held-out FVU of the default SAE went 0.33 / 0.27 / 0.21 / 0.18 at 0.25 / "
        "0.5 / 1 / 2 million samples (bench/studies/results/sae-samples.json); without a bound, 200,000 notes' "
        "clauses would take 350 million samples (hours on a CPU). None: the epochs alone.",
    )
    max_steps: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Total optimiser steps; overrides epochs when set.",
    )
    seed: int = Field(
        default=0, ge=0, le=2**32 - 1, description="Seeds the initialisation, the hold-out split and the data order.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="'auto' uses CUDA when present, else the CPU.",
    )
    precision: Literal["auto", "fp32", "bf16"] = Field(default="auto", description="The training step's encoder matmul: "
        "'bf16' under autocast (weights, decode, backward, Adam and codes stay fp32); 'auto': bf16 on a CPU with native "
        "bf16 (AVX512-BF16, AMX), else fp32. The result records what ran.")
    b_dec_init: Literal["mean", "geometric_median"] = Field(default="mean", description="Initial decoder bias b_d: "
        "the data mean (sparsify's choice, cheap) or the geometric median (Gao et al.; robust to outlying documents, "
        "on at most 10,000 samples).")
    checkpoint_every_steps: int = Field(default=1000, ge=1, le=10_000_000, description="Steps between checkpoints; a "
        "killed worker loses at most this many steps. sparsify's save_every: with 12,288 latents on 2 CPU cores 1,000 "
        "steps take about 36 s and a checkpoint (weights and Adam state, 113 MB) about 0.5 s, so 200 would add 8 %.")
    holdout_fraction: float = Field(default=0.1, gt=0.0, lt=0.5, description="Share of documents held out of "
                                    "training for the final FVU and explained variance.")
    train_on: Literal["auto", "documents", "segments", "segments_and_documents"] = Field(
        default="auto",
        description="Vectors the SAE is trained on: the document vectors, the segment (clause) "
        "vectors of an embedding run made with `segments`, or both. Segments are ~15 times more rows "
        "than documents and each carries one statement, so features of one mention's status can form; "
        "the held-out documents' vectors of the same kind give the FVU. 'auto' (the default): "
        "`segments_and_documents` when the embedding run has segments, else `documents`.",
    )
    document_codes: Literal["auto", "document_vector", "max_over_segments"] = Field(
        default="auto",
        description="A document's codes: its own vector encoded, or the row-wise max of its segments' "
        "codes (a feature is as active in a note as in its most active clause; needs segments). "
        "Either way the document codes are the CSR/CSC matrices search and probes read. 'auto' (the "
        "default): `max_over_segments` when the embedding run has segments, else `document_vector`.",
    )

    @property
    def uses_segments(self) -> bool:
        """Whether this config needs segment vectors ('auto' never does: it follows the run)."""
        return self.train_on in ("segments", "segments_and_documents") or self.document_codes == "max_over_segments"

    def resolved(self, has_segments: bool) -> "SaeConfig":
        """'auto' made explicit for an embedding run with or without segments: with them, trained on segments and
        documents, a document's codes the max over its segments (SEGMENT(...) expressions, clause probes and
        names read on clauses need those); without, the document vectors."""
        train_on = self.train_on if self.train_on != "auto" else (
            "segments_and_documents" if has_segments else "documents")
        codes = self.document_codes if self.document_codes != "auto" else (
            "max_over_segments" if has_segments else "document_vector")
        return self.model_copy(update={"train_on": train_on, "document_codes": codes})

    def num_latents(self, d: int) -> int:
        """n, the number of latents for input dimension `d`."""
        return self.expansion_factor * d

    def resolved_k_aux(self, d: int) -> int:
        return self.k_aux if self.k_aux is not None else max(1, d // 2)

    def resolved_lr(self, d: int, batch_rows: int | None = None) -> float:
        """The learning rate; `batch_rows` is the batch as trained (the config's, clipped to the training split)."""
        if self.lr is not None:
            return self.lr
        rows = self.batch_size if batch_rows is None else batch_rows
        return 2e-4 / math.sqrt(self.num_latents(d) / 2**14) * max(1.0, rows / LR_REFERENCE_BATCH)

    def validate_for_dim(self, d: int) -> "SaeConfig":
        """Check what needs d (k ≤ n, k_aux ≤ n); raises a ValidationError located at the field."""
        n = self.num_latents(d)
        errors = [
            InitErrorDetails(
                type=PydanticCustomError("exceeds_latents", "{field} = {value} exceeds n = {n}",
                                         {"field": field, "value": value, "n": n}),
                loc=(field,), input=value,
            )
            for field, value in (("k", self.k), ("k_aux", self.k_aux))
            if value is not None and value > n
        ]
        if errors:
            raise ValidationError.from_exception_data("SaeConfig", errors)
        return self


class StatsConfig(BaseModel):
    """Per-feature and pairwise statistics of the encoded documents."""

    model_config = ConfigDict(extra="forbid")

    histogram_bins: int = Field(
        default=20, ge=2, le=256,
        description="Bins of each feature's activation histogram, from 0 to its max activation.",
    )
    top_m: int = Field(
        default=10, ge=1, le=256,
        description="Neighbours kept per feature (most co-occurring, most decoder-similar): what a "
        "feature page shows.",
    )
    store_min_cnorm: float = Field(
        default=0.01, ge=0.0, le=1.0,
        description="Pairs (i, j) of C and D are stored when C_norm[i, j] or C_norm[j, i] reaches this. "
        "Each row of C_norm sums to at most k - 1, so a row keeps at most (k - 1) / 0.01 pairs: memory "
        "stays O(n·k) whatever N is. 0 stores every co-occurring pair.",
    )
    heatmap_size: int = Field(
        default=64, ge=2, le=512,
        description="Features in each heatmap (densest, most connected): readable as a grid of cells.",
    )
    eps: float = Field(
        default=1e-8, gt=0.0, le=1.0, description="ε in C_norm[i, j] = C[i, j] / (f_i + ε).",
    )
    block_latents: int = Field(
        default=2048, ge=1, le=1_048_576,
        description="Latents (rows of C) computed per block; bounds the memory of the sparse products.",
    )


class FamiliesConfig(BaseModel):
    """Feature families of O'Neill et al. (2024), with one τ for every iteration."""

    model_config = ConfigDict(extra="forbid")

    tau: float = Field(
        default=0.1, gt=0.0, le=1.0,
        description="C_norm threshold for an edge. 0.1 is the paper's value; the same τ is used at every "
        "iteration (the reference code mixes 0.1 and 0.07 by accident).",
    )
    iterations: int = Field(
        default=3, ge=1, le=20,
        description="Rounds of 'find families, remove their parents, rebuild the tree'. 3 reveals two "
        "levels of sub-families below the top one, as in the paper's figures.",
    )
    min_family_size: int = Field(
        default=2, ge=2, le=100_000,
        description="Smallest family kept, parent included; 2 means a parent with at least one child.",
    )


class SaeTrainPayload(BaseModel):
    """The `sae_train` job: train one SAE on one embedding run, then encode, count and group."""

    model_config = ConfigDict(extra="forbid")

    run_id: int | str = Field(description="The gateway's SAE run id (for logs and progress).")
    embeddings: list[ArtifactInfo] = Field(
        min_length=1,
        description="npy shards, float32 [docs, d], concatenated in order: row r of the result is "
        "document r of the embedding run.",
    )
    artifact_prefix: str = Field(
        min_length=1, description="Store key under which every artifact of this run is written.",
    )
    segments: list[ArtifactInfo] = Field(
        default_factory=list,
        description="The embedding run's segment shards (npz, contracts.embed.SEGMENT_ARRAYS) in order; "
        "needed when the config trains on segments or pools their codes.",
    )
    config: SaeConfig = Field(default_factory=SaeConfig)
    stats: StatsConfig = Field(default_factory=StatsConfig)
    families: FamiliesConfig = Field(default_factory=FamiliesConfig)

    @model_validator(mode="after")
    def _segments_when_used(self) -> "SaeTrainPayload":
        self.config = self.config.resolved(bool(self.segments))  # 'auto' follows the shards given
        if self.config.uses_segments and not self.segments:
            raise ValueError("segments: the config trains on or pools segments, but no segment shards were given")
        return self


class SaeImportPayload(SaeTrainPayload):
    """Analyse an SAE trained elsewhere: no training; `config` gives only the hold-out split."""

    source_prefix: str = Field(
        min_length=1, description="Store folder holding the uploaded sparsify-format cfg.json and sae.safetensors."
    )


class SaeSweepPayload(BaseModel):
    """Several SAEs (k / expansion factors) on one embedding run, as one request."""

    model_config = ConfigDict(extra="forbid")

    run_ids: list[int | str] = Field(min_length=1, description="One SAE run id per config.")
    embeddings: list[ArtifactInfo] = Field(min_length=1, description="As in SaeTrainPayload.")
    segments: list[ArtifactInfo] = Field(default_factory=list, description="As in SaeTrainPayload.")
    artifact_prefix: str = Field(min_length=1, description="Each run writes under <prefix>/<run_id>.")
    configs: list[SaeConfig] = Field(min_length=1, description="One config per run id, in order.")
    stats: StatsConfig = Field(default_factory=StatsConfig)
    families: FamiliesConfig = Field(default_factory=FamiliesConfig)

    @model_validator(mode="after")
    def _same_length(self) -> "SaeSweepPayload":
        if len(self.run_ids) != len(self.configs):
            raise ValueError("configs: needs exactly one config per run id")
        return self

    def payloads(self) -> list[SaeTrainPayload]:
        return [
            SaeTrainPayload(
                run_id=rid, embeddings=self.embeddings, segments=self.segments,
                artifact_prefix=f"{self.artifact_prefix}/{rid}",
                config=cfg, stats=self.stats, families=self.families,
            )
            for rid, cfg in zip(self.run_ids, self.configs)
        ]


class SaeMetrics(BaseModel):
    """Reconstruction quality on the held-out documents (never trained on)."""

    fvu: float = Field(description="Fraction of variance unexplained, Σ‖x - x̂‖² / Σ‖x - mean(x)‖².")
    explained_variance: float = Field(description="1 - fvu.")
    mse: float = Field(description="Mean squared error per coordinate.")
    l0: float = Field(description="Mean number of non-zero latents per document.")
    dead_fraction: float = Field(
        description="Share of latents that fire on no document of the whole run (train and hold-out).",
    )


class LossPoint(BaseModel):
    """One training step's figures (on its batch)."""

    step: int
    loss: float = Field(description="fvu + α·auxk.")
    fvu: float
    explained_variance: float
    dead_fraction: float = Field(description="Share of latents past dead_after_samples.")
    l0: float


class SaeArtifacts(BaseModel):
    cfg: ArtifactInfo = Field(description="cfg.json, sparsify's layout plus a 'prisma' block.")
    weights: ArtifactInfo = Field(description="sae.safetensors: encoder.weight, encoder.bias, W_dec, b_dec.")
    codes_csr: ArtifactInfo = Field(description="scipy.sparse CSR npz, float32 [docs, n].")
    codes_csc: ArtifactInfo = Field(description="The same matrix as CSC, for per-feature columns.")
    stats: ArtifactInfo = Field(description="npz of per-feature statistics and neighbours.")
    cooccurrence: ArtifactInfo = Field(description="CSR npz of C = AᵀA (pruned, see StatsConfig).")
    activation_similarity: ArtifactInfo = Field(description="CSR npz of D = BᵀB, C's pattern.")
    heatmaps: ArtifactInfo = Field(description="JSON: ordered feature lists and their submatrices.")
    families: ArtifactInfo = Field(description="JSON list of families with their iteration.")
    loss_curve: ArtifactInfo = Field(description="JSON list of LossPoint, every step.")
    segment_codes: ArtifactInfo | None = Field(
        default=None,
        description="With segments: CSR npz float32 [segments, n], each segment's top-k codes, rows in "
        "the order of `segments`.",
    )
    segments: ArtifactInfo | None = Field(
        default=None,
        description="With segments: npz of `position` int64 [S] (the document), `char_start`, `char_end` "
        "int32 [S] (the segment's span in its text), one row per row of segment_codes.",
    )


class SaeTrainResult(BaseModel):
    run_id: int | str
    d: int = Field(description="Input dimension.")
    num_latents: int = Field(description="n.")
    num_documents: int
    metrics: SaeMetrics
    loss_curve: list[LossPoint] = Field(description="At most 2,000 points, evenly decimated.")
    artifacts: SaeArtifacts
    steps_done: int
    resumed_from_step: int = Field(description="0 for a fresh run.")
    seconds: float = Field(description="Wall time of training in this attempt.")
    samples_per_s: float = Field(description="Training samples per second in this attempt.")
    num_families: int
    segment_words: int = Field(default=0, description="Words the segments were read by (the embedding run's "
                               "word_states; a segment's codes the max over its words'); 0: none.")
    precision: Literal["fp32", "bf16"] | None = Field(default=None, description="SaeConfig.precision as the "
        "machine that trained resolved it; None for an imported SAE or an older result.")


class EncodeRequest(BaseModel):
    """`POST /encode`: query vectors through a stored SAE."""

    model_config = ConfigDict(extra="forbid")

    vectors: list[list[float]] = Field(min_length=1, max_length=4096, description="[m, d] vectors.")
    sae_uri: str = Field(min_length=1, description="URI of the SAE's folder (holding cfg.json).")


class FeatureActivation(BaseModel):
    index: int
    activation: float


class EncodeResponse(BaseModel):
    features: list[list[FeatureActivation]] = Field(
        description="Per vector, its non-zero top-k latents, strongest first.",
    )


class CodesRequest(BaseModel):
    """`POST /codes`: vectors through a stored SAE exactly as a run encodes its documents (encode_all)."""

    model_config = ConfigDict(extra="forbid")

    vectors: PackedArray = Field(description="float32 or float16 [m, d] (float16: a run's segment vectors).")
    sae_uri: str = Field(min_length=1, description="URI of the SAE's folder (holding cfg.json).")


class CodesResponse(BaseModel):
    """The codes as CSR arrays: row i's features are indices[indptr[i]:indptr[i + 1]] (ascending)."""

    n_features: int = Field(description="The SAE's latents n.")
    indptr: PackedArray = Field(description="int64 [m + 1].")
    indices: PackedArray = Field(description="int32 [nnz].")
    data: PackedArray = Field(description="float32 [nnz]: activations, all > 0.")


class FeatureFamily(BaseModel):
    """A parent feature and the features below it in the oriented maximum spanning tree."""

    iteration: int = Field(ge=0, description="0 for the first tree; i after i rounds of parent removal.")
    parent: int = Field(description="The root: the densest feature of its tree branch.")
    children: list[int] = Field(description="Descendants of the parent, depth-first order.")
    edges: list[tuple[int, int]] = Field(description="Tree edges (parent, child), denser to sparser.")
