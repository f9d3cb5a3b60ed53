"""Naming metrics for bench/names.py: near-miss AUROC, shared names, phrase names; the fallback's names."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contracts.interpret import FeatureInterpretations


def name_metrics(best: list, evidence_texts) -> dict:
    """Near-miss AUROC (top half), shared names among reliable ones, phrase names."""
    import numpy as np

    from gateway.domain.features.names import NameChoice, distinct_names, shared_fraction
    from services.interpreter.phrases import is_phrase

    near = np.sort([b.score_near_miss for b in best if b.score_near_miss is not None])[::-1]
    labels = {i: b.label for i, b in enumerate(best)}
    reliable = {i for i, b in enumerate(best) if b.reliable}
    before = shared_fraction(labels, reliable)  # as named; then one meaning per name, as the run records them
    for i, alt in distinct_names([NameChoice(i, b.label, b.score, b.reliable, b.threshold,
                                             [a.model_dump() for a in b.alternatives], b.holds_on)
                                             for i, b in enumerate(best)]).items():
        labels[i] = alt["label"] if alt else labels[i]
        reliable = reliable - {i} if alt is None or not alt["reliable"] else reliable | {i}  # | : a name that failed gave way
    return {"near_miss_auroc_top_half": round(float(near[: max(1, len(near) // 2)].mean()), 4) if len(near) else None,
            "near_miss_scored": len(near), "shared_name_fraction_as_named": round(before, 4),
            "shared_name_fraction": round(shared_fraction(labels, reliable), 4),
            "phrase_fraction": round(float(np.mean([is_phrase(b.label, evidence_texts(b)) for b in best])), 4)
            if best else None,
            "with_threshold_fraction": round(float(np.mean([b.threshold is not None for b in best])), 4) if best else None}


def fallback(kw: list[FeatureInterpretations], llm: list[FeatureInterpretations]) -> list[FeatureInterpretations]:
    """Per feature, both back-ends' shown names and best-of-n between them (what the fallback shows)."""
    from services.interpreter.scoring import best_index

    out = []
    for a, b in zip(kw, llm):
        assert a.feature == b.feature
        interps = [*(a.interpretations[a.best:a.best + 1] if a.best is not None else []),
                   *(b.interpretations[b.best:b.best + 1] if b.best is not None else [])]
        out.append(a.model_copy(update={"interpretations": interps, "best": best_index(interps),
                                        "errors": a.errors + b.errors}))
    return out
