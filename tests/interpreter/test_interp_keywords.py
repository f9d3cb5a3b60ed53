"""The keywords back-end on a hand-made corpus where the right term is known (English and Italian)."""

from __future__ import annotations

import numpy as np
import pytest

from services.interpreter.backends.base import BackendOutputError, NamingRequest
from services.interpreter.backends.keywords import KeywordsBackend, TermIndex, log_odds_z
from services.interpreter.backends.words import fold, terms

IT_POS = [
    "Lattante con bronchiolite confermata, saturazione 92%, ricovero in pediatria.",
    "Diagnosi di bronchiolite: dispnea e rantoli; l'attività respiratoria è aumentata.",
    "Bronchiolite da VRS nell'ospedale di zona, ossigenoterapia per due giorni.",
    "Seconda bronchiolite dell'inverno, alimentazione ridotta, idratazione.",
]
IT_NEG = [
    "Otite media acuta, dolore all'orecchio, amoxicillina per sette giorni.",
    "Visita di controllo: crescita regolare, attività fisica adeguata.",
    "Faringite streptococcica con febbre, tampone positivo.",
    "Gastroenterite con vomito, idratazione orale, dieta leggera.",
]
EN_POS = [
    "Seizures in children with epilepsy were reduced by valproate.",
    "Refractory epilepsy: a new anticonvulsant lowered seizure frequency.",
    "Epilepsy surgery outcomes in temporal lobe seizures.",
]
EN_NEG = [
    "Breast cancer screening with mammography in older women.",
    "Hypertension treatment in elderly adults with diuretics.",
    "Asthma exacerbations in children treated with inhaled steroids.",
]


def test_tokeniser_folds_accents_drops_stop_words_and_elisions():
    assert fold("Attività") == "attivita"
    got = terms("Nell'attività dell'ospedale; la febbre")
    # stop-words inside a phrase only, never first or last; punctuation ends a phrase
    assert got == ["attivita", "ospedale", "attivita dell ospedale", "febbre"]
    assert "terapia intensiva" in terms("in terapia intensiva")
    assert "the" not in terms("the seizure") and "della" not in terms("della febbre")
    assert "trauma cranico minore" in terms("un trauma cranico minore.")
    assert "infection of the bladder" in terms("An infection of the bladder")
    assert not any(len(t.split()) > 4 for t in terms("one two three four five six seven"))
    assert "fever cough" not in terms("fever,cough") and "fever cough" not in terms("fever, cough") and "type diabetes" not in terms("type 2 diabetes")
    index = TermIndex(["Nell'attività dell'ospedale", "l'attività dell'ospedale"], min_df=1)
    assert index.display("attivita dell ospedale") == "attività dell'ospedale"


@pytest.mark.anyio
async def test_italian_label_is_the_known_term_written_with_its_accent():
    backend = KeywordsBackend()
    result = await backend.name_feature(NamingRequest(0, IT_POS, IT_NEG))
    assert result.candidates[0].label.split(", ")[0] == "bronchiolite"
    assert result.model is None and result.prompt_version == "log-odds-dirichlet.v3"
    # accents: the term shows as written most often
    index = TermIndex(["attività respiratoria", "attività fisica", "attivita"], min_df=1)
    assert index.display("attivita") == "attività"


@pytest.mark.anyio
async def test_english_label_through_a_corpus_index():
    corpus = EN_POS + EN_NEG
    backend = KeywordsBackend(TermIndex(corpus, min_df=1))
    request = NamingRequest(1, (), (), activating_ids=[0, 1, 2], non_activating_ids=[3, 4, 5])
    result = await backend.name_feature(request)
    assert result.candidates[0].label.split(", ")[0] in {"epilepsy", "seizures"}
    assert "epilepsy" in result.candidates[0].label
    assert "children" not in result.candidates[0].label  # present on both sides


@pytest.mark.anyio
async def test_no_contrast_is_a_typed_error_not_a_placeholder():
    with pytest.raises(BackendOutputError):
        await KeywordsBackend().name_feature(NamingRequest(2, ["alpha beta"], ["alpha beta"]))


def test_log_odds_prefers_frequent_contrasts_over_rare_ones():
    y_a = np.array([10.0, 1.0, 5.0])
    y_b = np.array([1.0, 0.0, 5.0])
    z = log_odds_z(y_a, y_b, background=np.array([20.0, 2.0, 50.0]))
    assert z[0] > z[1] > z[2]


FAMILY_SCRIPT = """
import asyncio
from services.interpreter.backends.base import FamilyRequest
from services.interpreter.backends.keywords import KeywordsBackend
request = FamilyRequest("tosse, febbre, wheezing, rinite, dispnea",
                        ["tosse, rinite, otite", "dispnea, febbre, vomito", "wheezing, otite, sibili"])
print(asyncio.run(KeywordsBackend(n_terms=4).name_family(request)).candidates[0].label)
"""


def test_a_family_is_named_alike_in_every_process():
    """Ties between terms (here each of the parent's five terms is shared by one child) are broken
    by the parent's order, not by a set's: under different hash seeds the same family got different
    names from one process to the next."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    labels = {subprocess.run([sys.executable, "-c", FAMILY_SCRIPT], capture_output=True, text=True, check=True, cwd=root,
                             env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(root)}).stdout.strip()
              for seed in range(6)}
    assert labels == {"tosse, febbre, wheezing, rinite"}


def test_the_english_stop_words_are_scikit_learns():
    """The list is written out in stopwords.py (importing scikit-learn's cost every naming process 1.5 s)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from services.interpreter.backends.stopwords import ENGLISH

    assert frozenset(ENGLISH.split()) == ENGLISH_STOP_WORDS


def _terms_from_tokens(text: str, surfaces: dict) -> list[str]:
    """`terms` as read off `tokens` (words, content flags, gaps), the way the term index's phrases are defined."""
    from collections import Counter

    from services.interpreter.backends.words import MAX_NGRAM, tokens

    toks, out, seg_start = tokens(text), [], 0
    for i, (word, surface, _, _, content, gap) in enumerate(toks):
        seg_start = i if gap else seg_start
        surfaces.setdefault(word, Counter())[surface] += 1
        if content:
            out.append(word)
            out += [" ".join(t[0] for t in toks[j:i + 1]) for j in range(max(seg_start, i - MAX_NGRAM + 1), i)
                    if toks[j][4]]
    return out


@pytest.mark.parametrize("text", [*IT_POS, *IT_NEG, *EN_POS, *EN_NEG, "", "  ", "12 34", "Non febbre. Tosse, 3 gg",
                                  "dell'ospedale e l’attività  del  reparto", "Attività\tfisica -- ridotta: sì/no",
                                  "POSITIVO al tampone; negativo (VRS) 2x", "a b c d e f g h"])
def test_terms_read_in_one_pass_are_those_of_the_tokens(text: str) -> None:
    from services.interpreter.backends.words import folded_words, tokens

    ours, theirs = {}, {}
    assert terms(text, ours) == _terms_from_tokens(text, theirs)
    assert [(w, list(c.items())) for w, c in ours.items()] == [(w, list(c.items())) for w, c in theirs.items()]
    assert folded_words(text) == [t[0] for t in tokens(text)]
