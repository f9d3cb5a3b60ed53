"""Day by day: the course on the ward, in PS or at home, and the long anamnesis of very long
notes."""

from __future__ import annotations

from gateway.demo.draft import DEPTH, Draft
from gateway.demo.phrases import (
    DAY,
    HOME_DAY,
    HOME_EVENT,
    HOME_EXTRA,
    PAST_EVENTS,
    SOCIAL,
    WARD,
    WARD_OWN,
    WARD_RESP,
)
from gateway.demo.sections import vital_signs, write_physiological
from gateway.demo.wording import age_text, dec, median_weight


def _ward_events(d: Draft, k: int) -> list[str]:
    rng, cond = d.rng, d.primary.cond
    pool = list(WARD)
    if "resp" in cond.system or "airway" in cond.system:
        pool += WARD_RESP
    if d.setting != "reparto":  # hours in PS or a check-up, not a night on the ward
        pool = [e for e in pool if not any(w in e for w in ("notte", "sonno", "giro", "24 ore"))]
    events = d.pick(pool, rng.randint(1, 3 if k > 1 else 2))
    if d.primary.status in ("confirmed", "suspected") and rng.random() < 0.7:
        own = rng.choice(WARD_OWN).format(symptom=rng.choice(cond.symptoms),
                                          sign=rng.choice(cond.signs),
                                          therapy=rng.choice(cond.therapy))
        events.insert(rng.randint(0, len(events)), own)
    return events


def _ward_day(d: Draft, k: int) -> None:
    rng = d.rng
    signs = vital_signs(d, 0.2, 0.2)
    vitals = rng.sample(signs, min(2, len(signs)))
    if d.setting == "reparto":
        label = rng.choice(DAY).format(k=k)
    elif d.setting == "pronto soccorso":
        label = f"Rivalutazione dopo {k * 2} ore"
    else:
        label = f"Controllo a {k * 2} giorni"
    measured = ", ".join(vitals).rstrip(".")
    d.add("course", f"{label}: {', '.join(_ward_events(d, k))}; {measured}.")


def _home_days(d: Draft, days: int) -> list[str]:
    rng, lines = d.rng, []
    for k in range(1, days + 1):
        cond = d.primary.cond
        event = rng.choice(HOME_EVENT).replace("{s}", rng.choice(cond.prodrome or cond.symptoms))
        extra = ", ".join(d.pick(HOME_EXTRA, rng.randint(1, 3)))
        lines.append(f"{rng.choice(HOME_DAY).format(k=k)} {event}; {extra}.")
    return lines


def write_course(d: Draft) -> None:
    rng, depth = d.rng, DEPTH[d.profile]
    if d.setting == "reparto" and rng.random() < 0.3 * depth:
        for k in range(1, rng.randint(2, 4)):
            _ward_day(d, k)
    elif d.setting == "pronto soccorso" and rng.random() < 0.1 + 0.1 * depth:
        _ward_day(d, 1)


def _past_event_lines(d: Draft) -> list[str]:
    rng, lines = d.rng, []
    for event in d.pick(PAST_EVENTS, rng.randint(4, 12)):
        at = rng.randint(1, max(1, d.age - 1))
        lines.append((at, f"{rng.choice(('A', 'All età di', 'Verso'))} {age_text(at, rng)}: "
                          f"{event}.".replace("All età", "All'età")))
    return [text for _, text in sorted(lines)]


def _growth_lines(d: Draft) -> list[str]:
    rng, lines = d.rng, []
    for at in sorted(rng.sample(range(1, d.age + 1), min(d.age, rng.randint(3, 6)))):
        kg = dec(median_weight(at) * rng.uniform(0.9, 1.1), d.ctx)
        lines.append(f"Controllo a {age_text(at, rng)}: peso {kg} kg, "
                     f"{'lunghezza' if at < 24 else 'altezza'} "
                     f"{round(50 + 25 * (at / 12) ** 0.6)} cm, {rng.choice((10, 25, 50, 75))}° pc.")
    return lines


def _social_lines(d: Draft) -> list[str]:
    rng = d.rng
    school = ("dell'infanzia" if d.age < 72 else "primaria" if d.age < 132
              else "secondaria di primo grado")
    values = {"sib": str(rng.randint(2, 14)), "school": school,
              "pet": rng.choice(("un cane", "un gatto", "nessuno", "un criceto")),
              "sport": rng.choice(("nuoto", "calcio", "danza", "pallavolo", "judo")),
              "sleep": str(rng.randint(8, 12)), "floor": str(rng.randint(1, 6))}
    return [t.format_map({**d.ctx, **values}) for t in d.pick(SOCIAL, rng.randint(2, 5))]


def lengthen(d: Draft, target_words: int) -> None:
    """Grow a long note with a detailed anamnesis (and a diary on the ward) past the target."""
    rng = d.rng
    if not any(s.startswith("Nat") for s in d.sections.get("history", [])):
        write_physiological(d)
    blocks = [("Anamnesi patologica remota: ", _past_event_lines(d)),
              ("Crescita: ", _growth_lines(d)), ("Anamnesi sociale: ", _social_lines(d))]
    if d.primary.status != "history":
        blocks.append(("Decorso a domicilio: ", _home_days(d, rng.randint(3, 6))))
    rng.shuffle(blocks)
    for title, lines in blocks:
        if lines and d.style != "narrative":
            lines[0] = "\n" + title + lines[0]
        for line in lines:
            d.add("history", line)
    day = len(d.sections.get("course", []))
    while d.words < target_words and day < (14 if d.setting == "reparto" else 5):
        day += 1
        _ward_day(d, day)
