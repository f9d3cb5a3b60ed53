"""Cue regexes per E3C language, written once from each language's common negation and hedging words (never
tuned on any split): a sentence is `not_actual` when it contains a cue. bench/real_text.py scores them as the
`regex` baseline; bench/labelling.py seeds its queue with the negation words alone (what a user would type
first for "negated or not a fact").

Word lists: the usual clinical negation triggers (NegEx's and its translations' first entries) and hedges
(possible, probable, suspected, may, if), no more.
"""

from __future__ import annotations

import re

NEGATION = {
    "en": r"no|not|without|denie[sd]|deny|negative|absence|absent|ruled out|rule out|excluded|free of|neither|nor|"
          r"never|none|cannot",
    "es": r"no|sin|niega|negó|negaba|negativ[oa]s?|ausencia|ausentes?|descart\w*|ni|ningún|ninguna?|nunca|"
          r"tampoco|excluid[oa]s?",
    "fr": r"pas|ne|sans|aucune?|absence|absente?s?|négati(?:f|ve|fs|ves)|ni|jamais|exclue?s?|éliminée?s?|"
          r"nié|niait|rien",
    "eu": r"ez|ezta|gabe|gaberik|ezezko\w*|negatibo\w*|inolako|baztert\w*|ukat\w*|ausentzi\w*|inoiz",
}
HEDGING = {
    "en": r"possib\w*|probab\w*|suspect\w*|suspicio\w*|may|might|could|likely|unlikely|suggest\w*|consistent with|"
          r"compatible with|if|whether|suspicious|differential|risk of|prevent\w*|prophyla\w*",
    "es": r"posib\w*|probab\w*|sospech\w*|podría|puede|pueden|sugest\w*|sugier\w*|compatible|si|riesgo de|"
          r"diagnóstico diferencial|prevenir|profila\w*|valorar",
    "fr": r"possib\w*|probab\w*|suspi\w*|suspect\w*|évoqu\w*|pourrai\w*|peut|peuvent|suggér\w*|compatible|si|"
          r"hypothèse|éventuel\w*|risque de|prévenir|prophyla\w*|diagnostic différentiel",
    "eu": r"posib\w*|litekeen\w*|baliteke|susmo\w*|susmagarri\w*|agian|ziurrenik|iradok\w*|bateragarri\w*|"
          r"arrisku\w*|prebenit\w*|profilaxi\w*|diagnostiko diferentzial\w*",
}
ELIDED = {"en": r"\w+n['’]t(?!\w)", "es": r"(?!x)x", "fr": r"(?<!\w)n['’]", "eu": r"(?!x)x"}
"""Negations glued to a word: English "don't", French "n'a" (no match for the others)."""
CUES = {lang: re.compile(rf"(?<!\w)(?:{NEGATION[lang]}|{HEDGING[lang]})(?!\w)|{ELIDED[lang]}", re.IGNORECASE)
        for lang in NEGATION}
NEGATION_CUES = {lang: re.compile(rf"(?<!\w)(?:{words})(?!\w)|{ELIDED[lang]}", re.IGNORECASE)
                 for lang, words in NEGATION.items()}


def cue_regex(lang: str, text: str) -> int:
    """1 (not_actual) when the text holds a negation or hedging cue of the language."""
    return int(bool(CUES[lang].search(text)))


def negation_hits(lang: str, text: str) -> int:
    """How many negation cues the text holds (a keyword seed's score)."""
    return len(NEGATION_CUES[lang].findall(text))


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " Prints each language's patterns "
                                     "(measures and writes nothing), or scores one text with --lang.")
    parser.add_argument("--lang", choices=sorted(CUES))
    parser.add_argument("text", nargs="?")
    args = parser.parse_args()
    if args.lang and args.text:
        print({"not_actual": cue_regex(args.lang, args.text), "negation_cues": negation_hits(args.lang, args.text)})
        return
    for lang, pattern in CUES.items():
        print(f"{lang}: {pattern.pattern}")


if __name__ == "__main__":
    main()
