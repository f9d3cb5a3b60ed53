"""A note being written: its mentions and facts, and how they are drawn from the seed."""

from __future__ import annotations

import calendar
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway.demo.conditions import CONDITIONS, SETTINGS, STATUSES, Condition
from gateway.demo.phrases import OTHER_VISITS
from gateway.demo.wording import (
    age_fitting,
    age_text,
    capitalise,
    fill,
    median_weight,
    note_context,
    suits_age,
    typos,
)


@dataclass
class Mention:
    """A condition as one note names it, with its status."""

    cond: Condition
    status: str
    term: str
    ending: str  # "a" | "o": agreement of participles with the term


@dataclass
class Draft:
    """A note being written: its facts, its style, and its sections as lists of sentences."""

    rng: random.Random
    ctx: dict[str, str]
    age: int
    setting: str
    profile: str  # short | medium | long | very_long
    style: str  # headed | inline | narrative
    typo_rate: float
    primary: Mention
    secondaries: list[Mention]
    sections: dict[str, list[str]] = field(default_factory=dict)
    words: int = 0  # running word count of the sections

    def add(self, section: str, sentence: str, *, filler: bool = True) -> None:
        """Append a sentence; filler (not a status cue) may carry typos."""
        text = capitalise(fill(sentence, self.ctx))
        if filler and self.typo_rate:
            text = typos(text, self.typo_rate, self.rng)
        self.sections.setdefault(section, []).append(text)
        self.words += text.count(" ") + 1

    def pick(self, pool: Sequence[str], k: int) -> list[str]:
        """Up to k distinct phrases from the pool that suit the child's age."""
        fitting = age_fitting(tuple(pool), self.age)
        return self.rng.sample(fitting, min(k, len(fitting)))

    def mention(self, section: str, m: Mention, pool: Sequence[str]) -> None:
        ctx = {**self.ctx, **_episode_ctx(self, m)} if m.status == "history" else self.ctx
        self.add(section, mention_text(self.rng.choice(pool), m, ctx), filler=False)


def mention_text(template: str, m: Mention, ctx: dict[str, str]) -> str:
    return template.format_map({**ctx, "c": m.term, "C": capitalise(m.term), "x": m.ending})


def largest_remainder(n: int) -> list[tuple[Condition, str]]:
    """Primary (condition, status) cells with counts proportional to weight × P(status)."""
    cells = [(c, s, n * c.weight * p) for c in CONDITIONS for s, p in zip(STATUSES, c.statuses)
             if p > 0]
    counts = [int(share) for _, _, share in cells]
    by_remainder = sorted(range(len(cells)), key=lambda j: (counts[j] - cells[j][2], j))
    for j in by_remainder[: n - sum(counts)]:
        counts[j] += 1
    return [(c, s) for (c, s, _), k in zip(cells, counts) for _ in range(k)]


def _age(cond: Condition, status: str, rng: random.Random) -> int:
    lo, mode, hi = cond.ages
    if status == "history":  # the episode lies in the past: the child is older now
        return rng.randint(max(lo + 4, 6), min(hi + 72, 204))
    return max(lo, min(hi, round(rng.triangular(lo, hi, mode))))


def _episode_age(cond: Condition, age: int, rng: random.Random) -> int:
    lo, mode, hi = cond.ages
    return max(lo, min(hi, age - 2, round(rng.triangular(lo, hi, mode))))


def _visit_date(cond: Condition, rng: random.Random) -> tuple[int, str]:
    year = rng.randint(2019, 2024)
    month = rng.choice(cond.season) if cond.season and rng.random() < 0.75 else rng.randint(1, 12)
    day = rng.randint(1, calendar.monthrange(year, month)[1])
    return year, f"{year:04d}-{month:02d}-{day:02d}"


def _make_mention(cond: Condition, status: str, rng: random.Random) -> Mention:
    term, gender = rng.choice(cond.terms)
    return Mention(cond, status, term, "a" if gender == "f" else "o")


def _secondaries(primary: Condition, age: int, rng: random.Random) -> list[Mention]:
    """About 30% of notes mention other conditions, mostly excluded or past history."""
    count = 0 if rng.random() < 0.70 else (1 if rng.random() < 0.85 else 2)
    chosen: list[Mention] = []
    for _ in range(count):
        status = rng.choices(STATUSES, weights=(0.12, 0.08, 0.45, 0.35))[0]
        taken = {primary.key} | {m.cond.key for m in chosen}
        eligible = [c for c in CONDITIONS if c.secondary and c.key not in taken
                    and _fits(c, status, age)]
        related = [c for c in eligible if c.key in primary.related]
        pool = related if related and rng.random() < 0.7 else eligible
        if pool:
            chosen.append(_make_mention(rng.choice(pool), status, rng))
    return chosen


def _fits(cond: Condition, status: str, age: int) -> bool:
    lo, _, hi = cond.ages
    if status == "history":
        return age >= lo + 4
    return lo <= age <= hi and cond.statuses[STATUSES.index(status)] > 0


def active_mentions(draft: Draft) -> list[Mention]:
    """Mentions the child has now (confirmed or suspected), primary first."""
    return [m for m in [draft.primary, *draft.secondaries] if m.status in ("confirmed",
                                                                          "suspected")]


DEPTH = {"short": 0, "medium": 1, "long": 2, "very_long": 3}  # detail by length profile
_PROFILES = ("short", "medium", "long", "very_long")
_STYLES = {"short": (0.0, 0.6, 0.4), "medium": (0.35, 0.4, 0.25), "long": (0.55, 0.35, 0.1),
           "very_long": (0.6, 0.35, 0.05)}


def start_draft(cond: Condition, status: str, rng: random.Random) -> Draft:
    sex = rng.choice("MF")
    age = _age(cond, status, rng)
    year, visit_date = _visit_date(cond, rng)
    profile = rng.choices(_PROFILES, weights=(0.22, 0.5, 0.23, 0.05))[0]
    weights = (0.15, 0.8, 0.05) if status == "history" else cond.settings
    setting = rng.choices(SETTINGS, weights=weights)[0]
    if profile == "very_long" and status == "history":  # a routine visit stays short
        profile = "long"
    if profile == "very_long" and rng.random() < 0.6:  # long notes are mostly ward notes
        setting = "reparto"
    kg = median_weight(age) * rng.uniform(0.85, 1.15)
    ctx = note_context(sex, age, kg, rng)
    visits = [v for v in OTHER_VISITS if suits_age(v[0], age)]
    other_reason, other_conclusion, urgent = rng.choice(visits)
    if status == "history" and not urgent:
        setting = "ambulatorio"
    ctx.update(year=str(year), date=visit_date, other_reason=fill(other_reason, ctx),
               other_conclusion=fill(other_conclusion, ctx))
    style = rng.choices(("headed", "inline", "narrative"), weights=_STYLES[profile])[0]
    typo_rate = 0.0 if rng.random() < 0.4 else rng.uniform(0.005, 0.03)
    primary = _make_mention(cond, status, rng)
    return Draft(rng, ctx, age, setting, profile, style, typo_rate, primary,
                 _secondaries(cond, age, rng))


def _episode_ctx(d: Draft, m: Mention) -> dict[str, str]:
    episode = _episode_age(m.cond, d.age, d.rng)
    years_ago = max(0, (d.age - episode) // 12)
    return {"ep": age_text(episode, d.rng), "year": str(int(d.ctx["year"]) - years_ago)}
