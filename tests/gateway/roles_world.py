"""The permission tests' world: two projects, a user of each role with a key, and one small dataset of
`alpha` with a row for each object derived from it (no embedding, no training)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from contracts.embed import EmbeddingRunSpec
from gateway.domain.auth import accounts
from gateway.domain.auth import repo as auth_repo
from gateway.domain.auth.service import create_key

CALLERS = ("admin", "editor", "viewer", "read_only", "other", "none")


@dataclass
class World:
    """Two projects, a user of each role, their keys, and one small dataset of `alpha` with a row for
    each object derived from it."""

    keys: dict[str, str]
    ids: dict[str, object]
    fresh: dict[str, Callable[[], object]] = field(default_factory=dict)


def _objects(session, project_id: int) -> dict[str, object]:  # noqa: ANN001
    from gateway.domain.concepts.models import Concept
    from gateway.domain.datasets.models import Dataset, Document
    from gateway.domain.features.models import Family, FamilyMember
    from gateway.domain.jobs.models import Job
    from gateway.domain.runs.models import EmbeddingRun, SaeRun

    ds = Dataset(name="notes", format="csv", n_documents=1, project_id=project_id)
    session.add(ds)
    session.flush()
    doc = Document(dataset_id=ds.id, position=0, external_id="A1", text="wheezing infant", n_chars=15)
    spec = EmbeddingRunSpec().model_dump(mode="json")  # what the dashboard's embed form asks: found, not started
    emb = EmbeddingRun(dataset_id=ds.id, model=spec["model"], spec=spec, status="queued")
    session.add_all([doc, emb])
    session.flush()
    sae = SaeRun(embedding_run_id=emb.id, status="queued", n_latents=8, k=2, d=4)
    session.add(sae)
    session.flush()
    family = Family(sae_run_id=sae.id, iteration=0, root_index=0, size=1)
    session.add(family)
    session.flush()
    session.add(FamilyMember(family_id=family.id, feature_index=0, parent_index=None, depth=0))
    concept = Concept(sae_run_id=sae.id, name="c", kind="expression", expression="F1 > 0", features=[1])
    job = Job(id=f"embedding_run-{uuid.uuid4().hex[:20]}", kind="embedding_run", queue="gateway",
              status="succeeded", payload={"run_id": emb.id}, project_id=project_id)
    session.add_all([concept, job])
    session.flush()
    return {"dataset_id": ds.id, "document_id": doc.id, "embedding_run_id": emb.id, "sae_run_id": sae.id,
            "concept_id": concept.id, "job_id": job.id, "index": 0, "project_id": project_id,
            "family_id": family.id}


def build_world(factory) -> World:  # noqa: ANN001
    from gateway.db import session_scope
    from gateway.domain.datasets.models import Dataset

    with session_scope(factory) as session:
        alpha = accounts.create_project(session, name="alpha")
        beta = accounts.create_project(session, name="beta")
        keys = {"admin": create_key(session, name="k-admin")[1]}
        for caller, role, project in (("editor", "editor", alpha), ("viewer", "viewer", alpha),
                                      ("other", "editor", beta)):
            user = accounts.create_user(session, name=f"u-{caller}", role=role)
            auth_repo.add_membership(session, user_id=user.id, project_id=project.id)
            keys[caller] = create_key(session, name=f"k-{caller}", user=user)[1]
        editor = auth_repo.user_by_name(session, name="u-editor")
        keys["read_only"] = create_key(session, name="k-read-only", user=editor, read_only=True)[1]
        ids = _objects(session, alpha.id)
        alpha_id = alpha.id

    def fresh_dataset() -> int:
        with session_scope(factory) as session:
            ds = Dataset(name="to delete", format="csv", n_documents=0, project_id=alpha_id)
            session.add(ds)
            session.flush()
            return ds.id

    def fresh_concept() -> int:
        from gateway.domain.concepts.models import Concept

        with session_scope(factory) as session:
            concept = Concept(sae_run_id=ids["sae_run_id"], name=f"to delete {uuid.uuid4().hex[:8]}", kind="expression",
                              expression="F1 > 0", features=[1])
            session.add(concept)
            session.flush()
            return concept.id

    def fresh_key() -> int:
        with session_scope(factory) as session:
            return create_key(session, name=f"k-{uuid.uuid4().hex[:8]}")[0].id

    def fresh_member() -> int:
        with session_scope(factory) as session:
            user = accounts.create_user(session, name=f"m-{uuid.uuid4().hex[:8]}", role="viewer")
            auth_repo.add_membership(session, user_id=user.id, project_id=alpha_id)
            return user.id

    return World(keys, ids, {"dataset_id": fresh_dataset, "concept_id": fresh_concept, "key_id": fresh_key,
                             "user_id": fresh_member})
