"""The seeded demo corpus: reproducible, labelled consistently, varied, and realistic enough
that confirmed and suspected notes differ only in how certain the diagnosis is."""

from __future__ import annotations

import csv
import re
import statistics
from collections import Counter

import pytest

from gateway.demo.corpus import CSV_FIELDS, STATUSES, DemoNote, generate_notes, main, write_csv

# Surface names of each condition, written here independently of the generator's pools.
# Lower-case names match in any case; abbreviations only in upper case.
LEXICON = {
    "bronchiolitis": ("bronchiolite acuta", "bronchiolite"),
    "otitis": ("otite media acuta", "otite", "OMA"),
    "pneumonia": ("polmonite acquisita in comunità", "broncopolmonite", "polmonite"),
    "gastroenteritis": ("gastroenterite acuta", "gastroenterite", "GEA"),
    "asthma": ("asma bronchiale", "crisi asmatica", "riacutizzazione asmatica"),
    "dermatitis": ("dermatite atopica", "eczema atopico"),
    "pharyngitis": ("faringotonsillite streptococcica", "faringotonsillite", "tonsillite acuta"),
    "uti": ("infezione delle vie urinarie", "pielonefrite acuta", "IVU"),
    "croup": ("laringite acuta", "laringotracheite", "laringite ipoglottica", "croup"),
    "varicella": ("varicella",),
    "bronchitis": ("bronchite acuta", "bronchite", "tracheobronchite"),
    "conjunctivitis": ("congiuntivite batterica", "congiuntivite acuta", "congiuntivite"),
    "fever_no_source": ("febbre senza focolaio", "febbre senza segni di localizzazione"),
    "febrile_seizure": ("convulsione febbrile semplice", "convulsione febbrile",
                        "crisi convulsiva febbrile"),
}


def term_pattern(condition: str) -> str:
    names = (name if name.isupper() else f"(?i:{re.escape(name)})" for name in LEXICON[condition])
    return rf"\b(?:{'|'.join(names)})\b"


# How a careful reader tells the four statuses apart; {B} is the condition's name.
CUES = {
    "confirmed": (
        r"(?<!non )compatibile con {B}", r"diagnosi (?:confermata )?di {B}", r"depone per {B}",
        r"presenta {B}", r"tipico di {B}", r"{B} (?:in atto|confermat[ao]|\(diagnosi clinica\))",
        r"si associa {B}", r"(?<!esclude )concomitante {B}", r"associata {B}",
        r"quadro di {B}",
        r"(?:diagnosi|dx|conclusioni|conclusione diagnostica|in conclusione|diagnosi di "
        r"dimissione)\s*:?\s*{B}\s*(?:\.|$)",
    ),
    "suspected": (
        r"sospett[oa] (?:di )?{B}", r"probabile {B}", r"ipotesi (?:diagnostica: )?{B}",
        r"suggestivo di {B}", r"verosimile {B}", r"dubbio di {B}", r"possibile {B}",
        r"non si esclude (?:concomitante )?{B}", r"\?{B}", r"{B}\?", r"{B},? da confermare",
        r"{B} \(sospetto\)",
    ),
    "excluded": (
        r"esclus[ao] {B}", r"{B} esclus[ao]", r"non segni di {B}", r"(?<!non )si esclude {B}",
        r"non elementi suggestivi di {B}", r"negativi per {B}", r"non evidenza di {B}",
        r"non compatibile con {B}", r"\bnon {B}", r"non si ritiene presente {B}",
    ),
    "history": (
        r"pregress[ao] {B}", r"in anamnesi {B}", r"episodio di {B}", r"ricovero per {B}",
        r"storia di {B}", r"nel \d{4} {B}", r"avuto {B}", r"in passato per {B}",
    ),
}


def has_cue(text: str, condition: str, status: str) -> bool:
    term = term_pattern(condition)
    return any(re.search(cue.replace("{B}", term), text, re.IGNORECASE | re.MULTILINE)
               for cue in CUES[status])


def words(text: str) -> list[str]:
    return re.findall(r"[a-zàèéìòù]+", text.lower())


@pytest.fixture(scope="module")
def notes() -> list[DemoNote]:
    return list(generate_notes(2000, seed=0))


def test_same_seed_gives_byte_identical_csv(tmp_path):
    first = write_csv(tmp_path / "a.csv", n=2000, seed=0).read_bytes()
    second = write_csv(tmp_path / "b.csv", n=2000, seed=0).read_bytes()
    assert first == second


def test_different_seed_gives_different_corpus(tmp_path):
    first = write_csv(tmp_path / "a.csv", n=200, seed=0).read_bytes()
    second = write_csv(tmp_path / "b.csv", n=200, seed=1).read_bytes()
    assert first != second


def test_count_and_ids():
    assert list(generate_notes(0)) == []
    assert len(list(generate_notes(7, seed=3))) == 7
    ids = [note.id for note in generate_notes(2000)]
    assert len(set(ids)) == 2000
    assert all(re.fullmatch(r"PED-\d{6}", i) for i in ids)
    with pytest.raises(ValueError):
        list(generate_notes(-1))


def test_every_status_and_many_conditions(notes):
    assert {n.status for n in notes} == set(STATUSES)
    conditions = Counter(n.condition for n in notes)
    assert len(conditions) >= 10
    assert set(conditions) == set(LEXICON)
    assert min(conditions.values()) >= 40


def test_bronchiolitis_confirmed_and_suspected_counts(notes):
    counts = Counter(n.status for n in notes if n.condition == "bronchiolitis")
    assert counts["confirmed"] >= 150
    assert counts["suspected"] >= 150


def test_label_mix_is_exact_for_any_seed():
    for seed in (1, 2):
        counts = Counter((n.condition, n.status) for n in generate_notes(2000, seed=seed))
        assert counts["bronchiolitis", "confirmed"] == counts["bronchiolitis", "suspected"] == 176


def test_labels_are_consistent_with_condition_and_status(notes):
    for note in notes:
        assert note.labels[0] == f"{note.condition}:{note.status}"
        pairs = [label.split(":") for label in note.labels]
        assert all(status in STATUSES for _, status in pairs)
        assert all(condition in LEXICON for condition, _ in pairs)
        assert len({condition for condition, _ in pairs}) == len(pairs)


def test_secondary_conditions_in_about_a_third_of_notes(notes):
    with_secondary = [n for n in notes if len(n.labels) > 1]
    assert 0.2 <= len(with_secondary) / len(notes) <= 0.4
    secondary = Counter(label.split(":")[1] for n in with_secondary for label in n.labels[1:])
    assert secondary["excluded"] + secondary["history"] > 0.6 * sum(secondary.values())
    assert secondary["confirmed"] > 0 and secondary["suspected"] > 0


def test_labelled_conditions_are_named_and_no_others(notes):
    for note in notes:
        labelled = {label.split(":")[0] for label in note.labels}
        for condition in LEXICON:
            named = re.search(term_pattern(condition), note.text) is not None
            assert named == (condition in labelled), (note.id, condition, note.text)


def test_every_label_is_decidable_from_its_phrasing(notes):
    for note in notes:
        for label in note.labels:
            condition, status = label.split(":")
            assert has_cue(note.text, condition, status), (note.id, label, note.text)


def test_suspected_and_excluded_notes_carry_no_confirmation(notes):
    for note in notes:
        if note.status in ("suspected", "excluded", "history"):
            assert not has_cue(note.text, note.condition, "confirmed"), (note.id, note.text)
        if note.status in ("confirmed", "suspected"):
            assert not has_cue(note.text, note.condition, "excluded"), (note.id, note.text)


def test_confirmed_and_suspected_bronchiolitis_share_vocabulary(notes):
    def document_frequency(status: str) -> dict[str, float]:
        group = [n for n in notes if n.condition == "bronchiolitis" and n.status == status]
        counts = Counter(w for n in group for w in set(words(n.text)))
        return {w: c / len(group) for w, c in counts.items()}

    confirmed, suspected = document_frequency("confirmed"), document_frequency("suspected")
    common = {w for w in confirmed.keys() | suspected.keys()
              if max(confirmed.get(w, 0), suspected.get(w, 0)) >= 0.1}
    def differs(word: str) -> bool:
        low, high = sorted((confirmed.get(word, 0), suspected.get(word, 0)))
        return low < 0.5 * high and high - low >= 0.08

    differing = {w for w in common if differs(w)}
    assert len(common) > 150
    assert len(differing) < 0.12 * len(common), sorted(differing)
    # What differs is the certainty wording and test results, not the clinical picture.
    assert {"sospetto", "confermata", "positivo"} <= differing
    assert not {"tosse", "rientramenti", "sibili", "crepitii", "lavaggi"} & differing


def test_confirmed_and_suspected_bronchiolitis_have_the_same_vitals(notes):
    def mean_spo2(status: str) -> float:
        values = [int(v) for n in notes if n.condition == "bronchiolitis" and n.status == status
                  for v in re.findall(r"(?:SpO2|Sat ?O2):? (\d+)%", n.text)]
        assert len(values) > 100
        return statistics.mean(values)

    assert abs(mean_spo2("confirmed") - mean_spo2("suspected")) < 1.0


def test_notes_are_varied_not_templated(notes):
    texts = [n.text for n in notes]
    assert len(set(texts)) == len(texts)
    skeletons = {re.sub(r"\d+", "#", t) for t in texts}
    assert len(skeletons) == len(texts)
    first_sentences = {re.split(r"(?<=[.?])\s", t, maxsplit=1)[0] for t in texts}
    assert len(first_sentences) > 0.7 * len(texts)
    openings = Counter(" ".join(t.split()[:5]) for t in texts)
    assert len(openings) > 0.5 * len(texts) and openings.most_common(1)[0][1] < 0.05 * len(texts)
    trigrams = [tuple(ws[i:i + 3]) for ws in map(words, texts) for i in range(len(ws) - 2)]
    assert len(set(trigrams)) / len(trigrams) > 0.12


def test_no_template_leftovers(notes):
    for note in notes:
        assert not re.search(r"[{}]|\.\.(?!\.)| ,|\?\.", note.text), note.text


def test_diagnosis_phrasing_varies_per_status(notes):
    for status in ("confirmed", "suspected", "excluded", "history"):
        group = [n for n in notes if n.status == status]
        sentences = Counter()
        for note in group:
            for pattern in CUES[status]:
                regex = pattern.replace("{B}", term_pattern(note.condition))
                if re.search(regex, note.text, re.IGNORECASE | re.MULTILINE):
                    sentences[pattern] += 1
        assert len(sentences) >= 6, (status, sentences)


def test_italian_clinical_language_and_abbreviations(notes):
    stopwords = {"di", "con", "per", "il", "la", "in", "da", "non", "e", "del", "della", "nella",
                 "nel", "a", "al", "alla", "dei", "delle", "le", "senza", "su", "tra", "dopo"}
    clinical = {"anamnesi", "obiettivo", "obiettività", "condizioni", "generali", "diagnosi",
                "terapia", "parametri", "motivo", "visita", "esami", "indicazioni", "torace",
                "addome", "febbre", "tosse", "controllo", "quadro", "norma", "vigile"}
    for note in notes:
        vocabulary = set(words(note.text))
        assert len(stopwords & vocabulary) >= 1 and len((stopwords | clinical) & vocabulary) >= 3
    assert statistics.median(len(stopwords & set(words(n.text))) for n in notes) >= 5
    for abbreviation in ("aa", "pz", "EO", "FC", "FR", "SpO2", "TC", "RSV", "PCR", "PLS", "PS",
                         "MV", "MT", "SRO", "Rx"):
        share = sum(bool(re.search(rf"\b{abbreviation}\b", n.text)) for n in notes) / len(notes)
        assert share >= 0.01, abbreviation
    for treatment in ("salbutamolo", "amoxicillina", "paracetamolo", "SRO", "lavaggi nasali",
                      "O2 terapia", "desametasone", "betametasone"):
        assert any(treatment in n.text for n in notes), treatment


def test_ages_fit_the_condition(notes):
    assert all(0 < n.age_months <= 216 for n in notes)
    bronchiolitis = [n.age_months for n in notes
                     if n.condition == "bronchiolitis" and n.status != "history"]
    assert max(bronchiolitis) < 24
    assert statistics.median(bronchiolitis) <= 10
    asthma = [n.age_months for n in notes if n.condition == "asthma" and n.status != "history"]
    assert min(asthma) >= 36
    for note in notes:
        for label in note.labels:
            if label == "bronchiolitis:confirmed" or label == "bronchiolitis:suspected":
                assert note.age_months < 24, note.id


def test_vitals_are_plausible(notes):
    def values(pattern: str) -> list[float]:
        return [float(v.replace(",", ".")) for n in notes for v in re.findall(pattern, n.text)]

    spo2 = values(r"(?:SpO2|Sat ?O2):? (\d+)%")
    heart = values(r"\bFC:? (\d+)")
    temperature = values(r"\b(?:TC|T|temp\.|TC ascellare) (\d+[.,]\d)")
    assert len(spo2) > 500 and len(heart) > 500 and len(temperature) > 500
    assert 85 <= min(spo2) and max(spo2) <= 100
    assert 50 <= min(heart) and max(heart) <= 220
    assert 35.5 <= min(temperature) and max(temperature) <= 41.0
    assert any(t >= 38.5 for t in temperature) and any(t < 37.5 for t in temperature)


def test_lengths_range_and_some_notes_exceed_a_256_token_window(notes):
    lengths = sorted(len(n.text.split()) for n in notes)
    assert lengths[len(lengths) // 20] >= 35
    assert 70 <= statistics.median(lengths) <= 250
    assert sum(length > 600 for length in lengths) >= 0.01 * len(notes)
    assert lengths[-1] < 1500


def test_some_words_carry_typos(notes):
    vocabulary = Counter(w for n in notes for w in words(n.text))
    frequent = {w for w, c in vocabulary.items() if c >= 30 and len(w) >= 6}
    rare = {w for w, c in vocabulary.items() if c <= 3}

    def variants(word: str) -> set[str]:
        drops = {word[:i] + word[i + 1:] for i in range(len(word))}
        swaps = {word[:i] + word[i + 1] + word[i] + word[i + 2:] for i in range(len(word) - 1)}
        doubles = {word[:i] + word[i] + word[i:] for i in range(len(word))}
        return (drops | swaps | doubles) - {word}

    misspelt = {v for w in frequent for v in variants(w) & rare}
    assert len(misspelt) >= 30


def test_no_patient_names(notes):
    names = r"\b(?:Marco|Giulia|Luca|Sofia|Alessandro|Francesco|Giorgia|Matteo|Lorenzo|Aurora|" \
            r"Leonardo|Andrea|Gabriele|Martina|Chiara|Sara|Giuseppe|Maria|Anna|Paolo|Rossi|" \
            r"Bianchi|Russo|Ferrari|Esposito)\b"
    assert not any(re.search(names, n.text) for n in notes)


def test_csv_round_trip(tmp_path, notes):
    path = write_csv(tmp_path / "demo" / "corpus.csv")
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == CSV_FIELDS
        rows = list(reader)
    assert len(rows) == len(notes)
    for row, note in zip(rows, notes):
        assert row["id"] == note.id and row["text"] == note.text
        assert row["labels"].split("|") == note.labels
        assert (row["condition"], row["status"]) == (note.condition, note.status)
        assert int(row["age_months"]) == note.age_months
        assert (row["sex"], row["visit_date"], row["setting"]) == (
            note.sex, note.visit_date, note.setting)
    assert {r["sex"] for r in rows} == {"M", "F"}
    assert all(re.fullmatch(r"20(?:19|2[0-4])-\d\d-\d\d", r["visit_date"]) for r in rows)


def test_command_line(tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert main([str(out), "--n", "25", "--seed", "4"]) == 0
    assert out.read_bytes() == write_csv(tmp_path / "again.csv", n=25, seed=4).read_bytes()
    assert "25 notes" in capsys.readouterr().out


