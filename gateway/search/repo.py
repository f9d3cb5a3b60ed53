"""Queries for search: an SAE run's shown labels and families (with a cheap fingerprint of them),
label full-text search, documents by position."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, column, func, literal_column, select, table, text, true
from sqlalchemy.orm import Session

from gateway.domain.datasets.models import Document
from gateway.domain.features.models import Family, FamilyMember, Feature, Interpretation
from gateway.search.label_rank import query_terms


def shown_labels(session: Session, *, sae_run_id: int) -> dict[int, str]:
    """Feature index → the label shown for it (its best interpretation's), for named features."""
    stmt = (select(Feature.index, Interpretation.label)
            .join(Interpretation, Interpretation.id == Feature.best_interpretation_id)
            .where(Feature.sae_run_id == sae_run_id))
    return {int(i): label for i, label in session.execute(stmt)}


def shown_thresholds(session: Session, *, sae_run_id: int) -> dict[int, float]:
    """Feature index → its shown name's calibrated threshold, for named features that have one."""
    stmt = (select(Feature.index, Interpretation.threshold)
            .join(Interpretation, Interpretation.id == Feature.best_interpretation_id)
            .where(Feature.sae_run_id == sae_run_id, Interpretation.threshold.is_not(None)))
    return {int(i): float(t) for i, t in session.execute(stmt)}


def reliable_features(session: Session, *, sae_run_id: int) -> frozenset[int]:
    """Indices of the features whose shown name is reliable."""
    stmt = (select(Feature.index).join(Interpretation, Interpretation.id == Feature.best_interpretation_id)
            .where(Feature.sae_run_id == sae_run_id, Interpretation.reliable.is_(True)))
    return frozenset(int(i) for i in session.scalars(stmt))


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
    best = (select(func.count(Feature.best_interpretation_id).label("n"),
                   func.coalesce(func.sum(Feature.best_interpretation_id), 0).label("total"),
                   func.coalesce(func.max(Feature.best_interpretation_id), 0).label("top"))
            .where(Feature.sae_run_id == sae_run_id).subquery())
    fams = (select(func.count(Family.id).label("n"), func.coalesce(func.max(Family.id), 0).label("top"))
            .where(Family.sae_run_id == sae_run_id).subquery())
    row = session.execute(select(best.c.n, best.c.total, best.c.top, fams.c.n, fams.c.top)
                          .select_from(best.join(fams, true()))).one()  # one row each: one round trip
    return tuple(int(v) for v in row)


# -- label search ------------------------------------------------------------------------------
# The document of an interpretation, spelled exactly as migration 0002's GIN index (so it is used).
PG_DOCUMENT = "to_tsvector('simple', interpretations.label || ' ' || coalesce(interpretations.description, ''))"


def search_labels(session: Session, *, sae_run_id: int, query: str, limit: int,
                  offset: int) -> tuple[list[tuple[Feature, Interpretation, float]], int]:
    """Features whose shown label or description holds every word of `query` (as a prefix, or whole
    where quoted: label_rank.query_terms), best match first: PostgreSQL full text (ts_rank), or SQLite
    FTS5 (bm25) in embedded mode."""
    terms = query_terms(query)
    if not terms:
        return [], 0
    base = (select(Feature, Interpretation)
            .join(Interpretation, Interpretation.id == Feature.best_interpretation_id)
            .where(Feature.sae_run_id == sae_run_id))
    if session.get_bind().dialect.name == "postgresql":
        words = " & ".join(t if exact else f"{t}:*" for t, exact in terms)  # quoted: the whole word
        tsquery = func.to_tsquery(literal_column("'simple'"), bindparam("q", words))
        rank = func.ts_rank(literal_column(PG_DOCUMENT), tsquery)
        stmt = base.add_columns(rank).where(literal_column(PG_DOCUMENT).op("@@")(tsquery)).order_by(rank.desc())
    else:
        fts = table("interpretations_fts", column("rowid"))
        rank = -func.bm25(literal_column("interpretations_fts"))  # bm25: lower is better
        words = " ".join(f'"{t}"' if exact else f'"{t}"*' for t, exact in terms)
        stmt = (base.add_columns(rank).join(fts, fts.c.rowid == Interpretation.id)
                .where(text("interpretations_fts MATCH :q").bindparams(q=words))
                .order_by(rank.desc()))
    total = session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery())) or 0
    rows = session.execute(stmt.order_by(Feature.index).limit(limit).offset(offset))
    return [(f, i, float(r)) for f, i, r in rows], total


def _named(sae_run_id: int, feature: Any) -> Any:
    """Every named feature of the run (`feature`: the Feature entity or one of its columns) with its shown
    interpretation, by index."""
    return (select(feature, Interpretation)
            .join(Interpretation, Interpretation.id == Feature.best_interpretation_id)
            .where(Feature.sae_run_id == sae_run_id).order_by(Feature.index))


def named_interpretations(session: Session, *, sae_run_id: int) -> list[tuple[int, Interpretation]]:
    """Every named feature's index with its shown interpretation, by index: the features' own rows (statistics and
    neighbours as JSON) not loaded."""
    return [(int(index), i) for index, i in session.execute(_named(sae_run_id, Feature.index))]


def named_features(session: Session, *, sae_run_id: int) -> list[tuple[Feature, Interpretation]]:
    """Every named feature of the run with its shown interpretation, by index."""
    return [(f, i) for f, i in session.execute(_named(sae_run_id, Feature))]


def documents_at(session: Session, *, dataset_id: int, positions: list[int]) -> dict[int, Document]:
    """Documents of a dataset by position (bounded IN lists)."""
    out: dict[int, Document] = {}
    for start in range(0, len(positions), 1000):
        stmt = select(Document).where(Document.dataset_id == dataset_id,
                                      Document.position.in_(positions[start:start + 1000]))
        out.update({d.position: d for d in session.scalars(stmt)})
    return out
