"""Naming feature families (parent and children, services/sae/families.py) from their members' labels."""

from __future__ import annotations

from collections.abc import Sequence

from contracts.interpret import FamilyLabel
from contracts.sae import FeatureFamily
from services.interpreter.backends.base import Backend, BackendError, FamilyNamer, FamilyRequest, with_retries


async def name_families(families: Sequence[FeatureFamily], labels: dict[int, str], namer: FamilyNamer, *,
                        backend: Backend, retries: int = 2) -> list[FamilyLabel]:
    """A label per family from its parent's and children's labels; unnamed members are left out,
    and a family whose parent has no label gets none."""
    out: list[FamilyLabel] = []
    for fam in families:
        if fam.parent not in labels:
            continue
        request = FamilyRequest(labels[fam.parent], [labels[c] for c in fam.children if c in labels])
        try:
            result = await with_retries(lambda _i, r=request: namer.name_family(r), retries=retries, backoff_s=0.5)
        except BackendError:
            continue
        cand = result.candidates[0]
        out.append(FamilyLabel(iteration=fam.iteration, parent=fam.parent, children=fam.children,
                               label=cand.label, description=cand.description, backend=backend.name,
                               model=result.model))
    return out

