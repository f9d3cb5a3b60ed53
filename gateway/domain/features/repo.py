"""Queries on features and families."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import case, delete, func, insert, select
from sqlalchemy.orm import Session

from gateway.domain.features.models import Family, FamilyMember, Feature, Interpretation

SORTS = {
    "index": (Feature.index.asc(),),
    "density": (Feature.density.desc(),),
    "max_activation": (Feature.max_activation.desc(),),
    "mean_activation": (Feature.mean_activation.desc(),),
    # reliable names first (a perfect score on 3 held-out documents is not one), then the best
    # interpretation's held-out score; unnamed and unscored features last, densest first
    "score": (Interpretation.reliable.desc().nulls_last(), Interpretation.score.desc().nulls_last(),
              case((Interpretation.score.is_(None), Feature.density)).desc()),
}


def replace_features(session: Session, *, sae_run_id: int, rows: list[dict[str, Any]]) -> None:
    session.execute(delete(Feature).where(Feature.sae_run_id == sae_run_id))
    for start in range(0, len(rows), 2000):
        session.execute(insert(Feature), rows[start : start + 2000])


def contains_pattern(text: str) -> str:
    """A LIKE pattern matching `text` literally anywhere ('%' and '_' in it are not wildcards)."""
    escaped = text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


def list_features(
    session: Session, *, sae_run_id: int, sort: str, limit: int, offset: int, min_density: float | None = None,
    text: str | None = None, reliability: str | None = None,
) -> tuple[list[tuple[Feature, Interpretation | None]], int]:
    """Features with their best interpretation (None where not named yet), optionally only those
    whose shown label or description contains `text`, or of one `reliability`
    (reliable | unreliable | unnamed)."""
    where = [Feature.sae_run_id == sae_run_id]
    if min_density is not None:
        where.append(Feature.density >= min_density)
    if text:
        pattern = contains_pattern(text)
        where.append(Interpretation.label.ilike(pattern, escape="!") | Interpretation.description.ilike(pattern, escape="!"))
    if reliability == "reliable":
        where.append(Interpretation.reliable.is_(True))
    elif reliability == "unreliable":
        where.append(Interpretation.reliable.is_not(True) & Interpretation.id.is_not(None))
    elif reliability == "unnamed":
        where.append(Feature.best_interpretation_id.is_(None))
    joined = select(Feature, Interpretation).outerjoin(Interpretation, Interpretation.id == Feature.best_interpretation_id)
    stmt = joined.where(*where).order_by(*SORTS[sort], Feature.index).limit(limit).offset(offset)
    count = (select(func.count()).select_from(Feature)
             .outerjoin(Interpretation, Interpretation.id == Feature.best_interpretation_id).where(*where))
    total = session.scalar(count) or 0
    return [(f, best) for f, best in session.execute(stmt)], total


def get_feature(session: Session, *, sae_run_id: int, index: int) -> tuple[Feature, Interpretation | None] | None:
    stmt = (
        select(Feature, Interpretation)
        .outerjoin(Interpretation, Interpretation.id == Feature.best_interpretation_id)
        .where(Feature.sae_run_id == sae_run_id, Feature.index == index)
    )
    row = session.execute(stmt).first()
    return (row[0], row[1]) if row else None


def replace_families(session: Session, *, sae_run_id: int, families: list[dict[str, Any]]) -> int:
    """Store families (each: iteration, root_index, members [(index, parent_index, depth)])."""
    old = select(Family.id).where(Family.sae_run_id == sae_run_id)
    session.execute(delete(FamilyMember).where(FamilyMember.family_id.in_(old)))
    session.execute(delete(Family).where(Family.sae_run_id == sae_run_id))
    for fam in families:
        row = Family(sae_run_id=sae_run_id, iteration=fam["iteration"], root_index=fam["root_index"],
                     size=len(fam["members"]))
        session.add(row)
        session.flush()
        session.execute(insert(FamilyMember), [
            {"family_id": row.id, "feature_index": i, "parent_index": p, "depth": d} for i, p, d in fam["members"]
        ])
    return len(families)


def list_families(
    session: Session, *, sae_run_id: int, iteration: int | None = None, limit: int | None = None, offset: int = 0,
) -> list[Family]:
    """Families by iteration, largest first; one page of them when `limit` is given."""
    stmt = select(Family).where(Family.sae_run_id == sae_run_id)
    if iteration is not None:
        stmt = stmt.where(Family.iteration == iteration)
    stmt = stmt.order_by(Family.iteration, Family.size.desc(), Family.id).offset(offset)
    return list(session.scalars(stmt if limit is None else stmt.limit(limit)))


def family_counts(session: Session, *, sae_run_id: int) -> dict[int, int]:
    """How many families each iteration has."""
    stmt = (select(Family.iteration, func.count()).where(Family.sae_run_id == sae_run_id)
            .group_by(Family.iteration).order_by(Family.iteration))
    return {it: n for it, n in session.execute(stmt)}


def family_rank(session: Session, *, family: Family) -> int:
    """How many families of its run and iteration come before it in list_families' order."""
    before = (Family.size > family.size) | ((Family.size == family.size) & (Family.id < family.id))
    stmt = (select(func.count()).select_from(Family)
            .where(Family.sae_run_id == family.sae_run_id, Family.iteration == family.iteration, before))
    return session.scalar(stmt) or 0


def families_by_id(session: Session, *, family_ids: list[int]) -> list[Family]:
    return list(session.scalars(select(Family).where(Family.id.in_(family_ids)).order_by(Family.iteration, Family.id)))


def family_members(session: Session, *, family_ids: list[int]) -> dict[int, list[FamilyMember]]:
    out: dict[int, list[FamilyMember]] = {fid: [] for fid in family_ids}
    stmt = select(FamilyMember).where(FamilyMember.family_id.in_(family_ids)).order_by(FamilyMember.id)
    for m in session.scalars(stmt):
        out[m.family_id].append(m)
    return out


def families_of_feature(session: Session, *, sae_run_id: int, index: int) -> list[int]:
    stmt = (
        select(FamilyMember.family_id).join(Family, Family.id == FamilyMember.family_id)
        .where(Family.sae_run_id == sae_run_id, FamilyMember.feature_index == index).order_by(FamilyMember.family_id)
    )
    return list(session.scalars(stmt))


def features_by_index(session: Session, *, sae_run_id: int, indices: list[int]) -> dict[int, tuple[Feature, Interpretation | None]]:
    out: dict[int, tuple[Feature, Interpretation | None]] = {}
    for start in range(0, len(indices), 1000):  # bounded IN lists
        stmt = (
            select(Feature, Interpretation)
            .outerjoin(Interpretation, Interpretation.id == Feature.best_interpretation_id)
            .where(Feature.sae_run_id == sae_run_id, Feature.index.in_(indices[start : start + 1000]))
        )
        out.update({f.index: (f, best) for f, best in session.execute(stmt)})
    return out


def labels_by_index(session: Session, *, sae_run_id: int, indices: list[int]) -> dict[int, tuple[str, bool | None]]:
    """index → (shown label, reliable) of the named features among `indices`: two columns a row, not the features'
    statistics and the names' evidence (a concept whose readout weighs all of a 12,288-feature run's features lists
    them on every read)."""
    out: dict[int, tuple[str, bool | None]] = {}
    for start in range(0, len(indices), 1000):  # bounded IN lists
        stmt = (
            select(Feature.index, Interpretation.label, Interpretation.reliable)
            .join(Interpretation, Interpretation.id == Feature.best_interpretation_id)
            .where(Feature.sae_run_id == sae_run_id, Feature.index.in_(indices[start : start + 1000]))
        )
        out.update({index: (label, reliable) for index, label, reliable in session.execute(stmt)})
    return out


def set_best_interpretation(session: Session, *, feature: Feature) -> None:
    """Best-of-n: the interpretation with the highest score (unscored ones last, newest first on ties)."""
    set_best_interpretations(session, [feature])


def set_best_interpretations(session: Session, features: Sequence[Feature], *, per_query: int = 1000) -> None:
    """`set_best_interpretation` for many features, one query per `per_query` of them (a naming run's
    shard recorded in a handful of round trips, not two per feature)."""
    best: dict[int, int] = {}
    for i in range(0, len(features), per_query):
        ids = [f.id for f in features[i:i + per_query]]
        stmt = (select(Interpretation.feature_id, Interpretation.id).where(Interpretation.feature_id.in_(ids))
                .order_by(Interpretation.feature_id, Interpretation.score.is_(None), Interpretation.score.desc(),
                          Interpretation.id.desc()))
        for feature_id, interp_id in session.execute(stmt):
            best.setdefault(feature_id, interp_id)
    for f in features:
        f.best_interpretation_id = best.get(f.id)


def interpretations_of(session: Session, *, feature_id: int) -> list[Interpretation]:
    stmt = (select(Interpretation).where(Interpretation.feature_id == feature_id)
            .order_by(Interpretation.score.is_(None), Interpretation.score.desc(), Interpretation.id.desc()))
    return list(session.scalars(stmt))
