"""What a demo condition is: its statuses, settings and the fields of its phrase pools."""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = ("confirmed", "suspected", "excluded", "history")
SETTINGS = ("pronto soccorso", "ambulatorio", "reparto")


@dataclass(frozen=True)
class Condition:
    """One condition and the phrase pools its notes are built from."""

    key: str
    terms: tuple[tuple[str, str], ...]  # (Italian name, grammatical gender "m" | "f")
    weight: float  # share of primary notes
    statuses: tuple[float, float, float, float]  # P(status) as primary, in STATUSES order
    ages: tuple[int, int, int]  # (min, mode, max) age in months of an active episode
    season: tuple[int, ...]  # calendar months of its epidemic season; () for none
    settings: tuple[float, float, float]  # P(setting) in SETTINGS order
    system: str  # organ systems (space-separated) whose normal findings its signs replace
    fever: float  # probability of fever when active
    distress: float  # 0..1 respiratory distress when active: lowers SpO2, raises FR
    symptoms: tuple[str, ...]
    signs: tuple[str, ...]
    proof: tuple[str, ...]  # findings that confirm it (confirmed notes only)
    pending: tuple[str, ...]  # work-up still open (suspected notes only)
    negative: tuple[str, ...]  # findings that rule it out (excluded mentions only)
    therapy: tuple[str, ...]
    advice: tuple[str, ...]
    alternatives: tuple[str, ...]  # unlabelled diagnosis given when it is excluded
    related: tuple[str, ...] = ()  # conditions often mentioned alongside
    secondary: bool = True  # may appear as a secondary mention
    prodrome: tuple[str, ...] = ()  # symptoms for a day-by-day history; () means `symptoms`
    onset: tuple[str, ...] = ()  # when the complaint began; () means the usual durations


WINTER = (11, 12, 1, 2, 3)
