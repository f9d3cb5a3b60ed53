"""Writers of the note's sections, reason to advice, each adding sentences to a draft."""

from __future__ import annotations

from gateway.demo.draft import DEPTH, Draft, active_mentions, mention_text
from gateway.demo.phrases import (
    ALLERGY,
    ALTERNATIVE,
    BARE,
    DURATION,
    FAMILY,
    GENERAL,
    GENERIC_ADVICE,
    HOME,
    INTRO,
    LABELLED,
    LABS,
    NORMAL,
    REASON,
    REASON_OTHER,
    REFERRAL,
    REMOTE,
    REMOTE_EXTRA,
    SECONDARY_ACTIVE,
    SENTENCE,
    SYMPTOMATIC,
    THERAPY,
    TIMELINE,
    WELL,
)
from gateway.demo.wording import capitalise, dec, fill, join_items, thousands


def write_reason(d: Draft) -> None:
    rng, p = d.rng, d.primary
    if p.status == "history":
        sx = d.ctx["other_reason"]
    else:
        sx = join_items(d.pick(p.cond.symptoms, rng.choice((1, 2, 2, 3))))
    if p.status == "history":
        templates = REASON_OTHER + (REASON[d.setting][:1] if d.setting != "ambulatorio" else ())
    else:
        templates = REASON[d.setting] + ("{sx} {dur}.",)
    template = rng.choice(templates)
    onset = p.cond.onset or DURATION
    dur = fill(rng.choice(onset), d.ctx) if p.status != "history" else ""
    code = rng.choice(("verde", "verde", "giallo", "bianco", "azzurro"))
    sentence = template.format_map({**d.ctx, "sx": sx, "dur": dur, "code": code})
    sentence = sentence.replace(" .", ".").replace("  ", " ")
    sentence = sentence.replace(". " + sx, ". " + capitalise(sx))
    if "{age}" not in template and rng.random() < 0.4:
        d.add("reason", rng.choice(INTRO))
    d.add("reason", sentence)
    if p.status != "history" and rng.random() < 0.25:
        d.mention("reason", p, REFERRAL)


def write_history(d: Draft) -> None:
    rng, p, depth = d.rng, d.primary, DEPTH[d.profile]
    if p.status != "history" and rng.random() < 0.35 + 0.3 * depth:
        for template in d.pick(TIMELINE, 1 + (depth >= 2)):
            s1, s2 = d.pick(p.cond.prodrome or p.cond.symptoms, 2)
            d.add("history", template.replace("{s1}", s1).replace("{s2}", s2))
        for template in d.pick(HOME, rng.randint(0, depth + 1)):
            d.add("history", template)
    if depth >= 2 and rng.random() < 0.7:
        write_physiological(d)
    if depth >= 2 and rng.random() < 0.6:
        for template in d.pick(FAMILY, rng.randint(1, 2)):
            d.add("history", template)
    past = [m for m in [p, *d.secondaries] if m.status == "history"]
    rng.shuffle(past)
    for m, template in zip(past, rng.sample(SENTENCE["history"], len(past))):
        d.mention("history", m, (template,))
    if not past and rng.random() < 0.2 + 0.25 * depth:
        d.add("history", rng.choice(REMOTE))
    if depth >= 2 and rng.random() < 0.3:
        d.add("history", rng.choice(REMOTE_EXTRA))
    if depth >= 1 and rng.random() < 0.35:
        d.add("history", rng.choice(ALLERGY))


def write_physiological(d: Draft) -> None:
    rng = d.rng
    sentences = [
        f"Nat{{o}} a termine (EG {rng.randint(37, 41)} sett.) da parto "
        f"{rng.choice(('eutocico', 'cesareo', 'spontaneo', 'cesareo elettivo'))}, "
        f"PN {rng.randint(2600, 4200)} g.",
        rng.choice(("Periodo neonatale regolare.", "Periodo perinatale nella norma.",
                    "Apgar 9/10.")),
        f"Allattamento {rng.choice(('materno esclusivo', 'artificiale', 'misto'))}.",
        rng.choice(("Vaccinazioni in regola.", "Vaccinazioni eseguite secondo calendario.",
                    "Vaccinazioni in corso secondo calendario.")),
        rng.choice(("Sviluppo psicomotorio regolare.", "Tappe dello sviluppo nella norma.")),
        f"Accrescimento regolare lungo il {rng.choice((10, 25, 50, 75, 90))}° percentile.",
    ]
    if d.age > 8:
        sentences.append(f"Svezzamento iniziato a {rng.randint(4, 7)} mesi.")
    for sentence in d.pick(sentences, rng.randint(2, len(sentences))):
        d.add("history", sentence)


def write_exam(d: Draft) -> None:
    rng, depth = d.rng, DEPTH[d.profile]
    findings: list[str] = []
    owned = {s for m in active_mentions(d) for s in m.cond.system.split()}
    if d.primary.status in ("confirmed", "suspected"):
        findings += d.pick(d.primary.cond.signs, rng.randint(1, 2) + min(depth, 2))
    for m in d.secondaries:
        if m.status == "confirmed" or (m.status == "suspected" and rng.random() < 0.5):
            findings += d.pick(m.cond.signs, 1)
    systems = [s for s in NORMAL if s not in owned]
    for system in d.pick(systems, rng.randint(1, 2) + depth):
        normal = [f for f in NORMAL[system] if d.age < 18 or "fontanella" not in f]
        findings.append(rng.choice(normal))
    rng.shuffle(findings)
    unwell = active_mentions(d) or d.primary.status == "excluded"
    d.add("exam", rng.choice(GENERAL if unwell else GENERAL[:WELL]) + ".")
    while findings:
        k = rng.randint(1, 3)
        d.add("exam", ", ".join(findings[:k]) + ".")
        findings = findings[k:]


def vital_signs(d: Draft, fever: float, distress: float) -> list[str]:
    rng, age = d.rng, d.age
    hr0, rr0 = ((130, 38) if age < 12 else (115, 30) if age < 36 else (100, 24) if age < 96
                else (88, 19))
    febrile = rng.random() < fever
    tc = rng.uniform(38.0, 40.2) if febrile else rng.uniform(36.1, 37.4)
    hr = round(hr0 + rng.gauss(0, 8) + max(0.0, tc - 37.0) * 10 + distress * rng.uniform(0, 25))
    rr = round(rr0 + rng.gauss(0, 3) + distress * rng.uniform(4, 22))
    spo2 = max(86, min(100, 100 - rng.randint(0, 3) - round(distress * rng.uniform(0, 8))))
    kg = d.ctx["kg"]
    items = [
        (0.9, rng.choice(("FC {} bpm", "FC {}/min", "FC: {}", "FC {}")).format(hr)),
        (0.8, rng.choice(("FR {} atti/min", "FR {}/min", "FR: {}", "FR {} apm")).format(rr)),
        (0.85, rng.choice(("SpO2 {}% in aa", "SpO2 {}% in a.a.", "Sat O2 {}%",
                           "SatO2 {}% in aria ambiente", "SpO2: {}%")).format(spo2)),
        (0.85, rng.choice(("TC {} °C", "TC {}°", "T {} °C", "TC ascellare {} °C",
                           "temp. {} °C")).format(dec(tc, d.ctx))),
        (0.6, rng.choice(("peso {} kg", "P {} kg", "peso: {} kg")).format(kg)),
        (0.3 if age >= 36 else 0.0, f"PA {rng.randint(90, 120)}/{rng.randint(50, 75)} mmHg"),
        (0.2, rng.choice(("refill < 2 sec", "CRT < 2\""))),
    ]
    chosen = [text for p, text in items if rng.random() < p]
    if rng.random() < 0.2:
        rng.shuffle(chosen)
    return chosen or [f"SpO2 {spo2}% in aa"]


def write_vitals(d: Draft) -> None:
    p = d.primary
    active = active_mentions(d)
    fever = max([m.cond.fever for m in active], default=0.1)
    distress = max([m.cond.distress for m in active], default=0.0)
    if p.status == "excluded":
        fever, distress = max(fever, p.cond.fever * 0.5), max(distress, 0.1)
    sep = d.rng.choice((", ", " - ", "; ", ", ", "  "))
    d.add("vitals", sep.join(vital_signs(d, fever, distress)).rstrip(".") + ".", filler=False)


def _labs(d: Draft) -> dict[str, str]:
    rng, ctx = d.rng, d.ctx
    bacterial = any(m.cond.key in ("pneumonia", "uti", "pharyngitis") for m in active_mentions(d))
    pcr = rng.uniform(1.5, 18.0) if bacterial else rng.uniform(0.1, 2.5)
    return {"gb": thousands(rng.randint(60, 250) * 100), "neu": str(rng.randint(30, 85)),
            "hb": dec(rng.uniform(10.5, 13.8), ctx), "plt": str(rng.randint(180, 520)),
            "pcr": dec(pcr, ctx, 2 if pcr < 1 else 1),
            "pct": dec(rng.uniform(0.05, 3.0 if bacterial else 0.4), ctx, 2),
            "glu": str(rng.randint(70, 110))}


def write_tests(d: Draft) -> None:
    rng, p, depth = d.rng, d.primary, DEPTH[d.profile]
    pool = {"confirmed": p.cond.proof, "suspected": p.cond.pending,
            "excluded": p.cond.negative}.get(p.status, ())
    chance = 0.85 if p.status == "excluded" else 0.3 + 0.15 * depth
    if pool and rng.random() < chance:
        d.add("tests", rng.choice(pool), filler=False)
    for m in d.secondaries:
        if m.status == "confirmed" and m.cond.proof and rng.random() < 0.4:
            d.add("tests", rng.choice(m.cond.proof), filler=False)
    if rng.random() < 0.1 + 0.2 * depth:
        labs = _labs(d)
        for template in d.pick(LABS, rng.randint(1, 3)):
            d.add("tests", template.format_map(labs), filler=False)


def _primary_diagnosis(d: Draft) -> None:
    rng, p = d.rng, d.primary
    if p.status == "history":
        d.add("diagnosis", d.ctx["other_conclusion"])
        return
    if rng.random() < 0.5 and p.status in BARE:
        bare = mention_text(rng.choice(BARE[p.status]), p, d.ctx)
        labelled = [t for t in LABELLED if "dimissione" not in t or d.setting == "reparto"]
        template = "{b}." if d.style != "narrative" else rng.choice(labelled)
        d.add("diagnosis", template.replace("{b}", bare).replace("?.", "?"), filler=False)
    else:
        d.mention("diagnosis", p, SENTENCE[p.status])
    if p.status == "excluded" and not any(m.status == "confirmed" for m in d.secondaries):
        alt = rng.choice(p.cond.alternatives)
        d.add("diagnosis", rng.choice(ALTERNATIVE).replace("{alt}", alt))


def write_diagnosis(d: Draft) -> None:
    rng = d.rng
    _primary_diagnosis(d)
    for m in d.secondaries:
        if m.status in SECONDARY_ACTIVE:
            d.mention("diagnosis", m, SECONDARY_ACTIVE[m.status] + SENTENCE[m.status])
        elif m.status == "excluded":
            where = rng.choice(("diagnosis", "diagnosis", "tests", "exam"))
            if m.cond.negative and rng.random() < 0.5:
                d.add(where, rng.choice(m.cond.negative), filler=False)
            d.mention(where, m, SENTENCE["excluded"])


def write_therapy(d: Draft) -> None:
    rng, p, depth = d.rng, d.primary, DEPTH[d.profile]
    items: list[str] = []
    if p.status in ("confirmed", "suspected"):
        items += d.pick(p.cond.therapy, rng.randint(1, 2) + (depth >= 2))
    elif p.status == "excluded" and rng.random() < 0.7:
        items += d.pick(SYMPTOMATIC, 1)
    for m in d.secondaries:
        if m.status == "confirmed":
            items += d.pick(m.cond.therapy, 1)
    if not items:
        if p.status == "excluded":
            d.add("therapy", rng.choice(("Nessuna terapia specifica.", "Non necessaria terapia.",
                                         "Solo terapia sintomatica al bisogno.")))
        return
    templates = [t for t in THERAPY if ("PS" not in t or d.setting == "pronto soccorso")
                 and (":" not in t or d.style == "narrative")]
    if d.style != "narrative" and rng.random() < 0.3:
        for item in items:
            d.add("therapy", f"- {item}")
    else:
        d.add("therapy", rng.choice(templates).replace("{list}", "; ".join(items)))


def write_advice(d: Draft) -> None:
    rng, p, depth = d.rng, d.primary, DEPTH[d.profile]
    if p.status == "history" or rng.random() > 0.35 + 0.25 * depth:
        return
    own = d.pick(p.cond.advice, rng.randint(1, 1 + depth)) if p.status != "excluded" else []
    items = own + d.pick(GENERIC_ADVICE, rng.randint(0 if own else 1, 1 if own else 2))
    if d.style != "narrative" and rng.random() < 0.4:
        for item in items:
            d.add("advice", f"- {item}")
    else:
        leads = ("Si consiglia: {}.", "Indicazioni: {}.", "Si raccomanda: {}.")
        lead = rng.choice(leads) if d.style == "narrative" else "{}."
        d.add("advice", lead.format("; ".join(items)))
