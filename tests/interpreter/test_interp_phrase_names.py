"""Phrase names (Italian and English), the text judge, the calibrated threshold against a naive computation,
and near misses kept apart from what a name is scored on."""

from __future__ import annotations

import numpy as np
import pytest

from services.interpreter.backends.base import NamingRequest
from services.interpreter.backends.keywords import TermIndex
from services.interpreter.calibration import calibrated_threshold, curve_points, even_ranks, curve_threshold, holds_on, precision_curve
from services.interpreter.phrases import (Contrast, PhraseBackend, covering_phrases, distinct_phrases, is_phrase, name_holds,
                                         phrase_ranking)

IT_TOP = ["Sospetta bronchiolite acuta.", "Il PLS riferisce sospetta bronchiolite.", "sospetta bronchiolite in atto.",
          "Inviata per sospetta bronchiolite.", "Sospetta bronchiolite.", "sospetta bronchiolite, febbre."]
IT_NEAR = ["Bronchiolite acuta.", "Bronchiolite confermata.", "bronchiolite in atto.", "Diagnosi di bronchiolite.",
           "Sospetta gastroenterite.", "Sospetta otite media."]
IT_OTHER = ["PCR nei limiti.", "Torace libero.", "Addome trattabile.", "Faringe iperemica.", "Cute integra."] * 2


def _request(index: TermIndex, n_top: int, n_near: int) -> NamingRequest:
    top = range(n_top)
    near = range(n_top, n_top + n_near)
    other = range(n_top + n_near, index.matrix.shape[0])
    return NamingRequest(0, (), (), activating_ids=top, near_miss_ids=near, non_activating_ids=other)


@pytest.mark.anyio
async def test_italian_phrase_keeps_the_cue_word_and_beats_its_near_misses():
    texts = [*IT_TOP, *IT_NEAR, *IT_OTHER]
    index = TermIndex(texts, min_df=1)
    result = await PhraseBackend(index).name_feature(_request(index, len(IT_TOP), len(IT_NEAR)))
    labels = [c.label for c in result.candidates]
    # "bronchiolite" alone is as common in the near misses, "sospetta" alone too: the phrase separates
    assert labels[0] == "sospetta bronchiolite"
    assert all(len(label.split()) <= 5 for label in labels)


@pytest.mark.anyio
async def test_english_phrase_keeps_function_and_negation_words():
    top = ["No evidence of pneumonia.", "There is no evidence of pneumonia today.", "no evidence of pneumonia seen",
           "Chest: no evidence of pneumonia.", "No evidence of pneumonia or effusion."]
    near = ["Evidence of pneumonia in the left lobe.", "Pneumonia confirmed.", "Right lower lobe pneumonia.",
            "No evidence of fracture.", "No evidence of effusion."]
    other = ["Heart rate regular.", "Abdomen soft.", "Pupils equal and reactive."] * 2
    index = TermIndex([*top, *near, *other], min_df=1)
    result = await PhraseBackend(index).name_feature(_request(index, len(top), len(near)))
    assert result.candidates[0].label == "no evidence of pneumonia"


def test_phrases_longer_only_when_they_separate_as_well():
    texts = ["pcr nei limiti.", "PCR nei limiti, emocromo normale.", "pcr nei limiti", "Esami: PCR nei limiti.",
             "Emocromo nei limiti.", "Elettroliti nei limiti.", "PCR elevata.", "Torace libero.", "Cute integra."]
    index = TermIndex(texts, min_df=1)
    ranked = phrase_ranking(index, [0, 1, 2, 3], [4, 5, 6], [7, 8], k=10, min_support=2)
    assert ranked[0][0] == "pcr nei limiti"  # "pcr" alone is in a near miss; "nei limiti" in two
    assert distinct_phrases([("pcr nei limiti", 1, 1), ("pcr", 0.9, 1), ("limiti", 0.5, 1)], 3) == ["pcr nei limiti"]


EN_TOP = ["Peptic ulcer bleeding was controlled in rats.", "Bleeding from a peptic ulcer in rats.",
          "Rats with gastric ulcer.", "Peptic ulcer bleeding recurred in rats.", "Rats were treated.",
          "Gastric lesions in rats."]
EN_NEAR = ["Blood pressure in rats.", "Rats were fed a high salt diet.", "Renal function in rats.", "Liver of rats."]
EN_OTHER = ["Heart rate regular.", "Abdomen soft.", "Pupils equal and reactive.", "Chest clear."] * 2


def test_covering_phrase_holds_most_of_the_separating_words():
    """One word says what most of the strongest segments say ("ulcer", "bleeding"); the covering phrase holds
    several of the words that set them apart, as written in two of them."""
    index = TermIndex([*EN_TOP, *EN_NEAR, *EN_OTHER], min_df=1)
    top, near, others = range(6), range(6, 10), range(10, len(EN_OTHER) + 10)
    contrast = Contrast.of(index, top, near, others)
    covering = covering_phrases(index, contrast, k=2)
    assert covering[0][0] == "peptic ulcer bleeding"  # in 2 of 6, as written: peptic, ulcer and bleeding, each separating
    column = {str(t): i for i, t in enumerate(index.vocab)}
    assert covering[0][1] == pytest.approx(sum(contrast.separation[column[w]] for w in ("peptic", "ulcer", "bleeding")))
    assert all(" " in term for term, *_ in covering)  # phrases of two words or more, never a word alone
    assert [t for t, *_ in covering_phrases(index, contrast, k=2, min_support=3)] == ["peptic ulcer"]  # in 3 of 6


@pytest.mark.anyio
async def test_the_covering_phrase_follows_the_lexical_ones():
    """The lexical ranking offers what most strongest segments say, one word at a time ("ulcer", "bleeding"); the
    covering phrase that holds them together comes after, offered where the lexical candidates lack it."""
    index = TermIndex([*EN_TOP, *EN_NEAR, *EN_OTHER], min_df=1)
    request = NamingRequest(0, (), (), activating_ids=range(6), near_miss_ids=range(6, 10),
                            non_activating_ids=range(10, len(EN_OTHER) + 10))
    lexical = [c.label for c in (await PhraseBackend(index, candidates=2, contrastive=0, covering=0)
                                 .name_feature(request)).candidates]
    labels = [c.label for c in (await PhraseBackend(index, candidates=2, contrastive=0).name_feature(request)).candidates]
    assert "peptic ulcer bleeding" not in lexical and labels[: len(lexical)] == lexical
    assert "peptic ulcer bleeding" in labels[len(lexical):]
    assert len(labels) == len(set(labels)) <= len(lexical) + 2 and all(len(label.split()) <= 5 for label in labels)
    # with 4 lexical phrases it is one of them, and no covering phrase repeats what they hold ("ulcer bleeding")
    four = [c.label for c in (await PhraseBackend(index, contrastive=0).name_feature(request)).candidates]
    assert four == ["ulcer", "peptic ulcer", "bleeding", "peptic ulcer bleeding"]


@pytest.mark.anyio
async def test_the_contrastive_topic_word_is_offered_though_every_near_miss_has_it():
    """"rats" is in every near miss, so it separates nothing from them and phrase_ranking never offers it; against
    the non-activating segments it is the most contrastive word (log-odds), and the back-end offers it after the
    lexical phrases: the Namer keeps whichever tells the selection documents apart best."""
    index = TermIndex([*EN_TOP, *EN_NEAR, *EN_OTHER], min_df=1)
    request = NamingRequest(0, (), (), activating_ids=range(6), near_miss_ids=range(6, 10),
                            non_activating_ids=range(10, len(EN_OTHER) + 10))
    without = [c.label for c in (await PhraseBackend(index, contrastive=0, covering=0).name_feature(request)).candidates]
    labels = [c.label for c in (await PhraseBackend(index).name_feature(request)).candidates]
    assert "rats" not in without and "rats" in labels[len(without):]
    assert labels[: len(without)] == without and len(labels) == len(set(labels))


def test_name_holds_by_word_stems_negation_included():
    assert name_holds("sospetta bronchiolite", "Inviato con sospetto di bronchiolite acuta.", "it")
    assert not name_holds("sospetta bronchiolite", "Bronchiolite acuta confermata.", "it")
    assert name_holds("non bronchiolite", "Quadro non compatibile con bronchiolite.", "it")
    assert not name_holds("non bronchiolite", "Quadro compatibile con bronchiolite.", "it")
    assert name_holds("denies fevers", "The patient denied any fever.", "en")
    assert not name_holds("no murmurs", "Heart: murmurs heard.", "en")


def test_name_holds_keeps_words_that_share_a_prefix_apart():
    """Compared by their first six characters, "bronchiolite" held on "bronchite" and "tracheite" on
    "tracheobronchite": a "bronchiolite" feature firing on bronchitis got a threshold it did not earn."""
    assert not name_holds("bronchiolite", "Storia di bronchite acuta.", "it")
    assert name_holds("bronchiolite", "Bronchioliti ricorrenti.", "it")
    assert not name_holds("tracheite", "Tracheobronchite.", "it")
    assert name_holds("hypertension", "Hypertensive crisis.", "en")  # one stem: hypertens
    assert is_phrase("pcr nei limiti", ["Esami: PCR nei  limiti."]) and not is_phrase("pcr, limiti", ["pcr limiti"])


@pytest.mark.parametrize("language", ["it", "en"])
def test_the_stem_index_holds_what_name_holds_says_text_by_text(language):
    """StemIndex.holds (every name on every unit at once, a word's stem found once for the corpus) equals
    name_holds asked of each text: case, accents, elided articles, repeated and long texts, empty text."""
    import pyarrow as pa
    import scipy.sparse as sp

    from services.interpreter.corpus import Corpus
    from services.interpreter.thresholds import StemIndex

    texts = ["Inviato con SOSPETTO di bronchiolite acuta.", "Bronchiolite acuta confermata.",
             "Quadro non compatibile con bronchiolite.", "Quadro non compatibile con bronchiolite.",
             "Attività ridotta dell'ospedale; febbre 38.5", "", "The patient denied any fever.",
             "Heart: murmurs heard. " * 40, "Bronchioliti ricorrenti, tracheobronchite.", "Hypertensive crisis, no murmurs."]
    labels = ["sospetta bronchiolite", "non bronchiolite", "bronchiolite", "attivita ospedale", "denies fevers",
              "no murmurs", "hypertension", "tracheite", "murmurs heard", "febbre"]
    n = len(texts)
    corpus = Corpus(pa.array(texts), np.arange(n), np.eye(n, dtype=np.float32), sp.csc_matrix((n, 1), dtype=np.float32))
    positions = [9, 0, 3, 2, 7, 5, 1, 4, 6, 8, 3]
    got = StemIndex(corpus, language).holds(positions, labels)
    expected = np.array([[name_holds(label, texts[p], language) for label in labels] for p in positions])
    assert expected.any() and not expected.all()
    np.testing.assert_array_equal(got, expected)


def naive_threshold(acts: np.ndarray, holds: np.ndarray, min_precision: float = 0.8, min_above: int = 5):
    """The definition, one candidate threshold at a time."""
    best = None
    for t in sorted(set(acts.tolist())):
        above = acts >= t
        if above.sum() >= min_above and holds[above].mean() >= min_precision - 1e-12:
            best = t if best is None else min(best, t)
    return best


@pytest.mark.parametrize("n", [0, 1, 4, 5, 17, 200])
@pytest.mark.parametrize("seed", range(6))
def test_threshold_equals_the_naive_computation_on_random_codes(n, seed):
    rng = np.random.default_rng(seed)
    acts = np.round(rng.gamma(2.0, 0.5, n), 1).astype(np.float32)  # rounded: ties of equal activations
    holds = rng.random(n) < np.clip(acts / (acts.max() if n else 1) + rng.normal(0, 0.2, n), 0, 1)
    expected = naive_threshold(acts.astype(np.float64), holds)
    got = calibrated_threshold(acts, holds)
    assert (got is None and expected is None) or got == pytest.approx(expected)
    curve = precision_curve(acts, holds)
    for t, p, above in zip(curve.thresholds, curve.precision, curve.above):
        mask = acts.astype(np.float64) >= t
        assert above == mask.sum() and p == pytest.approx(holds[mask].mean())
    points = curve_points(curve)
    assert len(points) <= 12 and all(a[0] > b[0] for a, b in zip(points, points[1:]))


@pytest.mark.parametrize("seed", range(6))
def test_a_weighted_threshold_equals_the_naive_computation(seed):
    """Each calibration segment standing for `w` segments of the corpus: the precision is the weighted share."""
    rng = np.random.default_rng(seed)
    n = 120
    acts = np.round(rng.gamma(2.0, 0.5, n), 1)
    holds = rng.random(n) < np.clip(acts / acts.max() + rng.normal(0, 0.2, n), 0, 1)
    weights = np.where(rng.random(n) < 0.3, 1.0, rng.uniform(2, 20))
    expected = None
    for t in sorted(set(acts.tolist())):
        above = acts >= t
        if above.sum() >= 5 and (weights[above] * holds[above]).sum() / weights[above].sum() >= 0.8 - 1e-12:
            expected = t if expected is None else min(expected, t)
    got = calibrated_threshold(acts, holds, weights=weights)
    assert (got is None and expected is None) or got == pytest.approx(expected)
    assert calibrated_threshold(acts, holds, weights=np.full(n, 7.0)) == calibrated_threshold(acts, holds)


@pytest.mark.parametrize("seed", range(4))
def test_holds_on_is_the_threshold_precision_times_the_activations_that_reach_it(seed):
    """holds_on against a naive count: the calibration sample's precision at the threshold, times every
    activation of the feature (a larger set than the sample) at or above the threshold."""
    rng = np.random.default_rng(seed)
    everywhere = np.round(rng.gamma(2.0, 0.5, 400), 2).astype(np.float32)
    sample = rng.choice(everywhere, 120, replace=False)
    holds = rng.random(120) < np.clip(sample / sample.max() + 0.2, 0, 1)
    curve = precision_curve(sample, holds)
    t = curve_threshold(curve)
    assert t is not None  # every seed here has one
    above = sample.astype(np.float64) >= t
    expected = round(holds[above].mean() * np.count_nonzero(everywhere.astype(np.float64) >= t))
    assert holds_on(curve, t, everywhere) == expected
    assert holds_on(curve, None, everywhere) is None


def test_near_misses_come_from_co_firing_features_and_are_held_apart():
    import pyarrow as pa
    import scipy.sparse as sp

    from contracts.interpret import EvidenceConfig
    from services.interpreter.corpus import Corpus
    from services.interpreter.evidence import sample_evidence
    from services.interpreter.near_misses import NearMisses

    rng = np.random.default_rng(0)
    n = 400
    codes = np.zeros((n, 3), np.float32)
    codes[:120, 0] = rng.uniform(0.1, 2.0, 120)  # the feature
    codes[60:260, 1] = rng.uniform(0.1, 1.0, 200)  # co-fires with it on 60 rows, alone on 140
    codes[300:, 2] = 1.0  # never with it
    vectors = rng.normal(size=(n, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    corpus = Corpus(pa.array([f"segment {i}" for i in range(n)]), np.arange(n), vectors, sp.csc_matrix(codes))
    ev = sample_evidence(corpus, 0, EvidenceConfig(), pool=200)
    NearMisses(corpus).add(ev)
    assert NearMisses(corpus).co_firing(0, corpus.column(0)[0]) == [1]
    assert len(ev.holdout_near_misses) >= 4 and ev.near_misses  # the rest of its rows are random negatives already
    assert all(120 <= p < 260 for p in [*ev.holdout_near_misses, *ev.near_misses])  # feature 1's, not 0's
    shown = {*ev.near_misses, *ev.pool_activating, *ev.selection_activating, *ev.random_negatives, *ev.hard_negatives,
             *ev.pool_non_activating, *ev.selection_hard, *ev.selection_random}
    assert not set(ev.holdout_near_misses) & shown
    active, acts = corpus.column(0)
    act = dict(zip(active.tolist(), acts.tolist()))
    # the calibration set: the pool (the strongest), each itself, then held-out and other activating segments
    # outside the evidence, each standing for its share of the activating segments outside the pool
    pool = ev.pool_activating
    assert ev.calibration[:len(pool)] == pool and set(ev.holdout_activating) <= set(ev.calibration[len(pool):])
    sample = ev.calibration[len(pool):]
    assert not set(sample) & {*pool, *ev.selection_activating} and len(set(sample)) == len(sample)
    assert ev.calibration_acts == [act[p] for p in ev.calibration]
    weight = pytest.approx((len(active) - len(pool)) / len(sample))
    assert ev.calibration_weights == [1.0] * len(pool) + [weight] * len(sample)


def test_a_threshold_counts_the_strongest_segments_the_name_was_chosen_from():
    """The demo's F180 "allattamento materno esclusivo": its strongest segments say "Diario clinico:", the weaker
    ones the name. A calibration without the pool (the strongest) measured only the weaker ones and promised 80 %
    above a threshold where the corpus held 30 %; with the pool counted, no threshold holds for that name, and the
    one the strongest segments say gets one."""
    import pyarrow as pa
    import scipy.sparse as sp

    from contracts.interpret import EvidenceConfig
    from services.interpreter.corpus import Corpus
    from services.interpreter.evidence import sample_evidence
    from services.interpreter.near_misses import NearMisses
    from services.interpreter.phrases import holds_mask, word_stems

    rng = np.random.default_rng(0)
    n = 2000
    texts = ["Febbre da due giorni."] * n
    codes = np.zeros((n, 2), dtype=np.float32)
    codes[:250, 0] = rng.uniform(0.8, 1.0, 250)  # the strongest: another text
    texts[:250] = ["Diario clinico:"] * 250
    codes[250:650, 0] = rng.uniform(0.3, 0.6, 400)  # weaker: the name's own text
    texts[250:650] = ["Allattamento materno esclusivo."] * 400
    vectors = rng.normal(size=(n, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    corpus = Corpus(pa.array(texts), np.arange(n), vectors, sp.csc_matrix(codes))
    ev = sample_evidence(corpus, 0, EvidenceConfig(), pool=200)
    NearMisses(corpus).add(ev)
    acts, weights = np.asarray(ev.calibration_acts), np.asarray(ev.calibration_weights)
    stems = [word_stems(corpus.text(p), "it") for p in ev.calibration]
    name = holds_mask("allattamento materno esclusivo", stems, "it")
    diary = holds_mask("diario clinico", stems, "it")
    # the population above t: every strongest segment, then the name's; at best 400 of 650 hold the name
    assert calibrated_threshold(acts, name, weights=weights) is None
    assert calibrated_threshold(acts[len(ev.pool_activating):], name[len(ev.pool_activating):]) is not None  # before
    t = calibrated_threshold(acts, diary, weights=weights)
    assert t is not None and t <= codes[:250, 0].min()  # every diary segment above it, and a few of the name's
    above = codes[:, 0] >= t
    assert 250 / above.sum() == pytest.approx(0.8, abs=0.05)  # the corpus's precision there: what was estimated
    assert precision_curve(acts, name, weights).precision[-1] == pytest.approx(400 / 650, abs=0.03)  # everything


def test_each_thread_stems_with_its_own_stemmer():
    """A Snowball stemmer keeps the word it works on in its own state, so naming jobs side by side must not
    share one: one per thread and language, reused within the thread."""
    from concurrent.futures import ThreadPoolExecutor

    from services.interpreter import phrases

    here = phrases._stemmer("it")
    assert phrases._stemmer("it") is here and phrases._stemmer("en") is not here
    assert phrases._stemmer("de") is None  # no stemmer: words compared on their first STEM characters
    with ThreadPoolExecutor(1) as pool:
        there = pool.submit(phrases._stemmer, "it").result()
    assert there is not None and there is not here
    assert there.stemWord("sospetta") == here.stemWord("sospetta") == "sospett"  # type: ignore[attr-defined]


def test_even_ranks_are_the_distinct_ranks_of_evenly_spaced_points():
    """What np.unique(np.linspace(0, n - 1, m).astype(int)) gives, where points crowd (m > n) and where not."""
    for n, m in [(0, 0), (1, 1), (2, 5), (7, 7), (10, 3), (100, 16), (257, 50), (5, 1)]:
        want = np.unique(np.linspace(0, n - 1, m).astype(int))
        got = even_ranks(n, m)
        assert got.tolist() == want.tolist() and got.dtype == want.dtype
