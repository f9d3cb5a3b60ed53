"""Seeded generator of the demo corpus: synthetic Italian paediatric visit notes with labels.

Every note has a primary condition with a status (confirmed, suspected, excluded, history);
about 30% also mention further conditions with their own status. Notes are composed from
interchangeable phrase pools, so a confirmed and a suspected note about the same condition
share their symptoms, signs, vitals and treatments and differ only in how certain the
diagnosis is: the case Prisma is built for. Nothing comes from real patients and no names
appear. Pure standard library: `random.Random(seed)` only, so one seed gives one corpus.

    python -m gateway.demo.corpus demo.csv --n 2000 --seed 0
"""

from __future__ import annotations

import argparse
import csv
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.demo.conditions import CONDITIONS, SETTINGS, STATUSES, Condition
from gateway.demo.course import lengthen, write_course
from gateway.demo.draft import DEPTH, Draft, largest_remainder, start_draft
from gateway.demo.phrases import ALLERGY, GENERIC_ADVICE, HEADERS, NORMAL, ORDER, ROUTINE
from gateway.demo.sections import (
    write_advice,
    write_diagnosis,
    write_exam,
    write_history,
    write_reason,
    write_tests,
    write_therapy,
    write_vitals,
)
from gateway.demo.wording import capitalise

CSV_FIELDS = (
    "id", "text", "labels", "condition", "status", "age_months", "sex", "visit_date", "setting",
)


@dataclass(frozen=True)
class DemoNote:
    """One synthetic visit note and its labels."""

    id: str  # "PED-000123"
    text: str  # the visit note, in Italian
    labels: list[str]  # "condition:status" per condition mentioned, the primary first
    condition: str  # primary condition, e.g. "bronchiolitis"
    status: str  # primary status: confirmed | suspected | excluded | history
    age_months: int
    sex: str  # "M" | "F"
    visit_date: str  # ISO date
    setting: str  # "pronto soccorso" | "ambulatorio" | "reparto"


def _render(d: Draft) -> str:
    """Lay the sections out in the note's style: headed blocks, inline headers, or prose."""
    rng = d.rng
    order = list(ORDER)
    if rng.random() < 0.4:  # vitals are often written before the examination
        order[2], order[3] = order[3], order[2]
    if rng.random() < 0.15:
        order[-2], order[-1] = order[-1], order[-2]
    present = [(key, d.sections[key]) for key in order if d.sections.get(key)]
    if d.style == "narrative":
        return _render_prose(d, present)
    upper = rng.random() < 0.4
    blocks = []
    for key, sentences in present:
        header = rng.choice(HEADERS[key])
        header = header.upper() if upper else header
        lines = any(s.startswith("- ") for s in sentences)
        body = "\n".join(sentences) if lines else " ".join(sentences).replace(" \n", "\n")
        if d.style == "headed":
            blocks.append(f"{header}:\n{body}" if rng.random() < 0.7 else f"{header}\n{body}")
        else:
            blocks.append(f"{header}:{chr(10) if lines else ' '}{body}")
    return ("\n\n" if d.style == "headed" else "\n").join(blocks)


def _render_prose(d: Draft, present: list[tuple[str, list[str]]]) -> str:
    paragraphs: list[list[str]] = [[]]
    for key, sentences in present:
        if key in ("exam", "course", "diagnosis") and paragraphs[-1]:
            paragraphs.append([])
        if key == "vitals" and d.rng.random() < 0.5:
            sentences = [f"Parametri: {sentences[0]}"] + sentences[1:]
        if key == "exam" and d.rng.random() < 0.4:
            sentences = [f"All'EO: {sentences[0][:1].lower()}{sentences[0][1:]}"] + sentences[1:]
        paragraphs[-1].extend(s.removeprefix("- ") for s in sentences)
    return "\n".join(" ".join(p) for p in paragraphs if p)


def _write(d: Draft) -> None:
    rng, depth = d.rng, DEPTH[d.profile]
    write_reason(d)
    write_history(d)
    write_exam(d)
    if rng.random() < 0.8 + 0.05 * depth:
        write_vitals(d)
    write_tests(d)
    write_course(d)
    write_diagnosis(d)
    write_therapy(d)
    write_advice(d)
    if d.profile == "very_long":
        lengthen(d, rng.randint(620, 950))
    _pad(d, rng.randint(40, 55))


def _pad(d: Draft, min_words: int) -> None:
    """Top up a terse note with the routine sentences a real one would still carry."""
    rng = d.rng
    fillers = [lambda: write_vitals(d) if "vitals" not in d.sections else None,
               lambda: d.add("history", rng.choice(ALLERGY))
               if not any("llergi" in s for s in d.sections.get("history", [])) else None,
               lambda: d.add("exam", rng.choice(NORMAL["heart"]) + "."),
               lambda: d.add("history", " ".join(d.pick(ROUTINE, 2))),
               lambda: d.add("advice", capitalise(rng.choice(GENERIC_ADVICE)) + ".")
               if d.primary.status != "history" else None]
    for filler in fillers:
        if d.words >= min_words:
            return
        filler()


def _note(index: int, cond: Condition, status: str, rng: random.Random) -> DemoNote:
    d = start_draft(cond, status, rng)
    _write(d)
    mentions = [d.primary, *d.secondaries]
    return DemoNote(
        id=f"PED-{index + 1:06d}",
        text=_render(d),
        labels=[f"{m.cond.key}:{m.status}" for m in mentions],
        condition=cond.key,
        status=status,
        age_months=d.age,
        sex="M" if d.ctx["o"] == "o" else "F",
        visit_date=d.ctx["date"],
        setting=d.setting,
    )


def generate_notes(n: int = 2000, seed: int = 0) -> Iterator[DemoNote]:
    """Yield `n` labelled notes; the same (n, seed) always yields the same notes.

    Primary (condition, status) pairs are allotted by largest remainder, so the label mix is
    exact for any n (2,000 notes: 176 confirmed and 176 suspected bronchiolitis), then shuffled.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    plan = largest_remainder(n)
    rng.shuffle(plan)
    for index, (cond, status) in enumerate(plan):
        yield _note(index, cond, status, rng)


def write_csv(path: str | Path, n: int = 2000, seed: int = 0) -> Path:
    """CSV with header id,text,labels,condition,status,age_months,sex,visit_date,setting;
    labels joined by '|'. UTF-8, csv module quoting."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_FIELDS)
        for note in generate_notes(n, seed):
            writer.writerow([note.id, note.text, "|".join(note.labels), note.condition,
                             note.status, note.age_months, note.sex, note.visit_date,
                             note.setting])
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the seeded Prisma demo corpus as CSV.")
    parser.add_argument("out", type=Path, help="output CSV path")
    parser.add_argument("--n", type=int, default=2000, help="number of notes (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    path = write_csv(args.out, n=args.n, seed=args.seed)
    print(f"wrote {args.n} notes to {path}")
    return 0


__all__ = [
    "CONDITIONS", "CSV_FIELDS", "SETTINGS", "STATUSES", "DemoNote", "generate_notes",
    "main", "write_csv",
]

if __name__ == "__main__":
    raise SystemExit(main())
