"""Every ORM model, imported once so that `Base.metadata` is complete (Alembic, tests)."""

from gateway.db import Base
from gateway.domain.artifacts.models import Artifact
from gateway.domain.auth.models import ApiKey, AuditEvent, Membership, Project, User
from gateway.domain.concepts.models import Concept
from gateway.domain.datasets.models import Dataset, Document
from gateway.domain.features.models import Family, FamilyMember, Feature, Interpretation
from gateway.domain.jobs.models import Job
from gateway.domain.labels.models import ConceptLabel, LabelBatch, LabelEvent, LabelLease
from gateway.domain.runs.models import EmbeddingRun, SaeRun

__all__ = [
    "ApiKey", "Artifact", "AuditEvent", "Base", "Concept", "ConceptLabel", "Dataset", "Document", "EmbeddingRun",
    "Family", "FamilyMember", "Feature", "Interpretation", "Job", "LabelBatch", "LabelEvent", "LabelLease", "Membership",
    "Project", "SaeRun", "User",
]
