"""Filling phrase templates: per-note values, doses, ages, number formats, typos.

Phrases that only suit some ages ("poppate" for infants) are filtered here.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence

_AGE_BOUND_WORDS = (("poppat", 0, 18), ("nido", 0, 36), ("pannolin", 0, 36),
                    ("scuola dell'infanzia", 30, 72), ("fontanella", 0, 18), ("lattante", 0, 12),
                    ("scuola", 36, 999), ("sport", 60, 999), ("cefalea", 36, 999),
                    ("russamento", 24, 999), ("ricorrente", 36, 999))


@functools.lru_cache(maxsize=4096)
def _age_bounds(text: str) -> tuple[int, int]:
    """Ages in months [lo, hi) at which a phrase makes sense ("poppate" only for infants)."""
    bounds = [(lo, hi) for word, lo, hi in _AGE_BOUND_WORDS if word in text]
    return max((lo for lo, _ in bounds), default=0), min((hi for _, hi in bounds), default=999)


def suits_age(text: str, age: int) -> bool:
    lo, hi = _age_bounds(text)
    return lo <= age < hi


@functools.lru_cache(maxsize=16384)
def age_fitting(pool: tuple[str, ...], age: int) -> tuple[str, ...]:
    return tuple(t for t in pool if suits_age(t, age))


def fill(template: str, ctx: dict[str, str]) -> str:
    return template.format_map(ctx)


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def typos(text: str, rate: float, rng: random.Random) -> str:
    """Swap, drop or double one letter in a few plain lower-case words."""
    words = text.split(" ")
    for j, word in enumerate(words):
        if len(word) >= 5 and word.isalpha() and word.islower() and rng.random() < rate:
            k = rng.randrange(1, len(word) - 1)
            op = rng.randrange(3)
            if op == 0:
                word = word[:k] + word[k + 1] + word[k] + word[k + 2:]
            elif op == 1:
                word = word[:k] + word[k + 1:]
            else:
                word = word[:k] + word[k] + word[k:]
            words[j] = word
    return " ".join(words)


def dec(x: float, ctx: dict[str, str], digits: int = 1) -> str:
    return f"{x:.{digits}f}".replace(".", ctx["_sep"])


def thousands(x: int) -> str:
    return f"{x:,}".replace(",", ".")


_WEIGHT_KG = ((0, 3.4), (2, 5.3), (6, 7.6), (12, 9.4), (24, 12.0), (36, 14.2), (60, 18.3),
              (96, 25.5), (120, 31.5), (144, 38.0), (168, 48.0), (204, 58.0))


def median_weight(age: int) -> float:
    """Median weight in kg at an age in months, interpolated between growth-chart points."""
    for (a0, w0), (a1, w1) in zip(_WEIGHT_KG, _WEIGHT_KG[1:]):
        if age <= a1:
            return w0 + (w1 - w0) * (age - a0) / (a1 - a0)
    return _WEIGHT_KG[-1][1]


def _dose(kg: float, per_kg: float, cap: float, step: int = 10) -> str:
    return str(int(min(kg * per_kg, cap) // step * step) or step)


def note_context(sex: str, age: int, kg: float, rng: random.Random) -> dict[str, str]:
    """Per-note values that phrase templates fill in (doses scale with weight)."""
    ctx = {"_sep": "," if rng.random() < 0.7 else ".", "o": "o" if sex == "M" else "a"}
    ctx.update(
        side=rng.choice(("dx", "sx")), days=str(rng.randint(2, 5)),
        hours=str(rng.choice((6, 12, 24, 36, 48))), count=str(rng.randint(3, 10)),
        abx=str(rng.choice((5, 7, 10))), kg=dec(kg, ctx),
        o2=dec(rng.choice((0.5, 1, 1.5, 2)), ctx),
        pcm=_dose(kg, 15, 1000), ibu=_dose(kg, 10, 400), amox=_dose(kg, 30, 1000),
        amox50=_dose(kg, 25, 1000), amoxclav=_dose(kg, 40, 875), cefix=_dose(kg, 8, 400),
        ceftr=_dose(kg, 75, 2000, 50), clari=_dose(kg, 7.5, 500), pred=_dose(kg, 1, 40, 1),
        acic=_dose(kg, 20, 800), ml=str(rng.choice((50, 75, 100))),
        betam=dec(min(kg * 0.1, 4.0), ctx), desa=dec(min(kg * 0.15, 10.0), ctx),
        ond=dec(min(kg * 0.15, 4.0), ctx), adr=str(min(5, max(1, round(kg / 4)))),
        puff=str(min(10, 2 + int(kg // 10))), fev1=str(rng.randint(55, 78)),
        scorad=str(rng.randint(15, 60)), ige=str(rng.randint(150, 2400)),
        westley=str(rng.randint(1, 6)), minutes=str(rng.randint(1, 10)),
        tmax=dec(rng.uniform(38.3, 40.4), ctx),
        gen=rng.choice(("la madre", "il padre", "la mamma", "la nonna", "il papà")),
        gen_da=rng.choice(("dalla madre", "dal padre", "dai genitori", "dalla nonna")),
        bimbo=_child_word(sex, age, rng), age=age_text(age, rng),
    )
    return ctx


def _child_word(sex: str, age: int, rng: random.Random) -> str:
    if age < 12 and rng.random() < 0.6:
        return "lattante"
    if age >= 132 and rng.random() < 0.5:
        return "ragazzo" if sex == "M" else "ragazza"
    return rng.choice(("bambino", "bimbo", "pz")) if sex == "M" else rng.choice(
        ("bambina", "bimba", "pz"))


def age_text(months: int, rng: random.Random) -> str:
    if months < 24:
        return f"{months} {'mese' if months == 1 else 'mesi'}"
    years, rest = divmod(months, 12)
    if rest and years < 6 and rng.random() < 0.6:
        return f"{years} anni e {rest} {'mese' if rest == 1 else 'mesi'}"
    return f"{years} anni"


def join_items(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " e " + items[-1]
