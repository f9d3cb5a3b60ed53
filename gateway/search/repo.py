"""Queries for search: the shown labels and families of an SAE run, and a cheap fingerprint of them."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gateway.domain.features.models import Family, FamilyMember, Feature, Interpretation


def shown_labels(session: Session, *, sae_run_id: int) -> dict[int, str]:
    """Feature index → the label shown for it (its best interpretation's), for named features."""
    stmt = (select(Feature.index, Interpretation.label)
            .join(Interpretation, Interpretation.id == Feature.best_interpretation_id)
            .where(Feature.sae_run_id == sae_run_id))
    return {int(i): label for i, label in session.execute(stmt)}


def family_members_of_run(session: Session, *, sae_run_id: int) -> dict[int, list[int]]:
    """Family id → its member feature indices (the parent first), for every family of the run."""
    out: dict[int, list[int]] = {fid: [] for fid in session.scalars(select(Family.id).where(Family.sae_run_id == sae_run_id))}
    stmt = (select(FamilyMember.family_id, FamilyMember.feature_index)
            .join(Family, Family.id == FamilyMember.family_id)
            .where(Family.sae_run_id == sae_run_id).order_by(FamilyMember.family_id, FamilyMember.id))
    for fid, index in session.execute(stmt):
        out[fid].append(int(index))
    return out


def labels_fingerprint(session: Session, *, sae_run_id: int) -> tuple[int, ...]:
    """Changes whenever a shown label or the families change: interpretations are only ever added,
    so a new best interpretation moves the count, sum or maximum of the best ids; families are
    replaced as a whole, with new ids."""
    best = session.execute(
        select(func.count(Feature.best_interpretation_id), func.coalesce(func.sum(Feature.best_interpretation_id), 0),
               func.coalesce(func.max(Feature.best_interpretation_id), 0))
        .where(Feature.sae_run_id == sae_run_id)).one()
    fams = session.execute(select(func.count(Family.id), func.coalesce(func.max(Family.id), 0))
                           .where(Family.sae_run_id == sae_run_id)).one()
    return tuple(int(v) for v in (*best, *fams))
