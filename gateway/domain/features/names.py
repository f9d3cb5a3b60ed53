"""One meaning per name: within a run, no two reliable features show the same name.

Features whose shown names fold to the same text are ranked by how much of what the name describes each
holds it on (`holds_on`: the units where the feature reaches its threshold and the name's words occur, at
the threshold's precision of 80 % or more), then by score, the lower threshold and index; the first keeps
it, each other one shows its first alternative phrase (stored with the name, scored and calibrated like it)
that is reliable and not taken, else keeps its name marked unreliable ("shared"). Coverage first: the
search `label:"bronchiolite"` must lead to the feature that fires on most bronchiolitis mentions, not to one
that holds the word on a thin top slice of its activations (on the demo's clause SAE, a "bronco-" feature
scoring 0.97 held it on about 170 of the 554 bronchiolitis clauses, another scoring 0.94 on about 550). Names
recorded before `holds_on` existed have none and rank by score alone, after those that have it.

A feature whose own name does not hold (unreliable: at no activation do its words occur in 80 % of its
segments, say) while one of its alternatives does shows that alternative instead, ranked with the reliable
names by the alternative's `holds_on` and score: "bronchiolite acuta" holding nowhere and "bronchiolite"
holding above 0.12 show "bronchiolite". Pure: the recording job and bench/status.py both call `distinct_names`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

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
    holds_on: int | None = None


def fold(label: str) -> str:
    return " ".join(label.casefold().split())


class _Shown(NamedTuple):
    """What a feature competes with for a name: its own reliable name, or its best reliable alternative."""

    label: str
    score: float | None
    threshold: float | None
    promoted: dict | None  # the alternative shown in its name's place; None: its own name
    holds_on: int | None

    def rank(self, feature: int) -> tuple[float, float, float, int]:
        """Most segments held on first (none: after all that have a count), then score, lower threshold, index."""
        return (-(self.holds_on if self.holds_on is not None else -1), -(self.score or 0.0),
                self.threshold if self.threshold is not None else 1e9, feature)


def distinct_names(choices: list[NameChoice]) -> dict[int, dict | None]:
    """Feature → the alternative it shows instead of its name (a dict of `alternatives`), or None where it
    keeps its name but loses its reliability; features that keep their name are absent."""
    def shown(c: NameChoice) -> _Shown | None:
        if c.reliable:
            return _Shown(c.label, c.score, c.threshold, None, c.holds_on)
        alt = max((a for a in c.alternatives if a.get("reliable")), default=None,  # ties (before alternatives were
                  key=lambda a: (a.get("score") or 0.0, a.get("holds_on") or -1))  # scored on their own): coverage
        return None if alt is None else _Shown(alt["label"], alt.get("score"), alt.get("threshold"), alt,
                                               alt.get("holds_on"))

    ranked = [(c, s) for c in choices if (s := shown(c)) is not None]
    taken: set[str] = set()
    order = sorted(ranked, key=lambda cs: cs[1].rank(cs[0].feature))
    changes: dict[int, dict | None] = {}
    for c, won in order:
        if fold(won.label) not in taken:
            taken.add(fold(won.label))
            if won.promoted is not None:
                changes[c.feature] = won.promoted
            continue
        alt = next((a for a in c.alternatives if a.get("reliable") and fold(a["label"]) not in taken), None)
        if alt is not None:
            changes[c.feature] = alt
            taken.add(fold(alt["label"]))
        elif c.reliable:
            changes[c.feature] = None
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
