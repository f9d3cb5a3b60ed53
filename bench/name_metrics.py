"""Issue #28's naming metrics for bench/names.py: near-miss AUROC, shared names, phrase names."""

from __future__ import annotations


def name_metrics(best: list, evidence_texts) -> dict:
    """Issue #28's: near-miss AUROC (top half), shared names among reliable ones, phrase names."""
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
