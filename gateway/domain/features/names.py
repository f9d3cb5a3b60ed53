"""One meaning per name: within a run, no two reliable features show the same name.

Features whose shown names fold to the same text are ranked by how well the name holds (score, then the
lower threshold, then index); the first keeps it, each other one shows its first alternative phrase
(stored with the name, scored and calibrated like it) that is reliable and not taken, else keeps its
name marked unreliable ("shared"). Pure: the recording job and bench/status.py both call `distinct_names`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SHARED_NAME = "another feature holds this name better and none of this one's other phrases holds"
"""Why a feature that keeps a name another holds better is unreliable (its `unreliable_reason`)."""


@dataclass
class NameChoice:
    """One feature's shown name and its alternatives, each a dict with label, score, threshold, reliable."""

    feature: int
    label: str
    score: float | None
    reliable: bool | None
    threshold: float | None = None
    alternatives: list[dict] = field(default_factory=list)


def fold(label: str) -> str:
    return " ".join(label.casefold().split())


def distinct_names(choices: list[NameChoice]) -> dict[int, dict | None]:
    """Feature → the alternative it shows instead of its name (a dict of `alternatives`), or None where it
    keeps its name but loses its reliability; features that keep their name are absent."""
    reliable = [c for c in choices if c.reliable]
    taken: set[str] = set()
    order = sorted(reliable, key=lambda c: (-(c.score or 0.0), c.threshold if c.threshold is not None else 1e9,
                                            c.feature))
    changes: dict[int, dict | None] = {}
    for c in order:
        if fold(c.label) not in taken:
            taken.add(fold(c.label))
            continue
        alt = next((a for a in c.alternatives if a.get("reliable") and fold(a["label"]) not in taken), None)
        changes[c.feature] = alt
        if alt is not None:
            taken.add(fold(alt["label"]))
    return changes


def shared_fraction(labels: dict[int, str], reliable: set[int]) -> float:
    """Share of reliable features whose shown name another reliable feature shows too."""
    names = [fold(labels[f]) for f in reliable if f in labels]
    if not names:
        return 0.0
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return sum(counts[n] > 1 for n in names) / len(names)
