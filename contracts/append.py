"""Notes joining a dataset after its runs were trained: the append's answer, and a run's extension."""

from __future__ import annotations

from pydantic import BaseModel, Field

from contracts.artifacts import ArtifactInfo
from contracts.sae import StatsConfig


class AppendOut(BaseModel):
    dataset_id: int
    added: int = Field(description="Documents added by this request.")
    n_documents: int = Field(description="The dataset's documents now.")
    first_position: int = Field(description="Position of the first added document; the others follow it.")


class ExtendRequest(BaseModel):
    batch_documents: int = Field(default=256, ge=1, le=4096,
                                 description="New documents embedded and encoded per checkpointed batch.")


class ExtendOut(BaseModel):
    sae_run_id: int
    job_id: str
    from_documents: int = Field(description="Documents the run's codes hold before the extension.")
    to_documents: int = Field(description="Documents they will hold after it (the dataset's count now).")


class RunCoverage(BaseModel):
    """Which of its dataset's documents an SAE run has codes for (GET /sae-runs/{id} only)."""

    trained_documents: int = Field(description="Documents the SAE learned from (the dataset's first ones).")
    encoded_documents: int = Field(description="Documents the run's codes hold: search and concepts read these.")
    dataset_documents: int = Field(description="The dataset's documents now.")
    added_since_training: int = Field(description="Documents appended to the dataset after the SAE was trained.")
    not_encoded: int = Field(description="Documents with no codes yet: POST /sae-runs/{id}/extend encodes them.")


class SaeRestatsPayload(BaseModel):
    """The SAE service's `sae_restats` job: the statistics of a run's codes, computed again over all of them."""

    codes_csr: ArtifactInfo
    sae_uri: str = Field(description="The folder of cfg.json + sae.safetensors (its decoder gives the neighbours).")
    stats: StatsConfig
    tau: float = Field(description="The run's family threshold (heatmaps order by it).")
    artifact_prefix: str


class SaeRestatsResult(BaseModel):
    stats: ArtifactInfo
    cooccurrence: ArtifactInfo
    activation_similarity: ArtifactInfo
    heatmaps: ArtifactInfo
