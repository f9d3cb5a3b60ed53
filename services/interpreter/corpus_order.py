"""What naming reads from a corpus before it names anything: the language its names are written in, and the
order its features are worth naming in."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from services.interpreter.corpus import Corpus

LANGUAGES = {"en": "English", "it": "Italian"}
_MARKERS = {"en": frozenset("the and of with was were is are this that from by which".split()),
            "it": frozenset("il la di che con per della del nel non una sono alla dei delle gli".split())}


def corpus_language(texts: Sequence[str]) -> str:
    """'en' or 'it': whose common function words the texts use more (English on a tie)."""
    counts = dict.fromkeys(_MARKERS, 0)
    for text in texts:
        for word in text.lower().split():
            for lang, markers in _MARKERS.items():
                counts[lang] += word in markers
    return "it" if counts["it"] > counts["en"] else "en"


def naming_order(corpus: Corpus, order: str = "browse") -> list[int]:
    """Every feature, in the order they are worth naming: `browse`, as the features page lists them by
    default (densest first, then the strongest maximum activation, then index); `index`, by index."""
    if order == "index":
        return list(range(corpus.n_features))
    density = corpus.codes.getnnz(axis=0)  # [n]
    top = np.asarray(corpus.codes.max(axis=0).todense()).ravel() if corpus.codes.nnz else np.zeros(len(density))
    return [int(i) for i in np.lexsort((np.arange(len(density)), -top, -density))]
