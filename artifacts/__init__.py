"""The artifact store: immutable bulk files addressed by fsspec URI, written atomically."""

from artifacts.store import ArtifactStore, ArtifactWriter

__all__ = ["ArtifactStore", "ArtifactWriter"]
