"""Artifact descriptors exchanged between the services and the gateway's catalogue."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ArtifactInfo(BaseModel):
    """One immutable file in the artifact store."""

    uri: str = Field(description="fsspec URI, e.g. file:///data/artifacts/runs/3/emb-00000.npy")
    size: int = Field(ge=0, description="Size in bytes.")
    sha256: str = Field(min_length=64, max_length=64, description="Hex SHA-256 of the bytes.")
    kind: str = Field(default="blob", description="What it holds: snapshot, embeddings, sae, ...")
