"""How much text an SAE run learned from, and whether that is enough (no FastAPI here).

An SAE only finds the features of a corpus it has read enough of. On real clinical cases (E3C, the product's
default SAE on the labelled sentences plus more and more unlabelled cases of the same source, three SAE seeds), the
probe's F1 with 100 labels rose with the SAE's text: English 0.61 with no cases, 0.64 with 219 k characters of
cases, 0.71 with 749 k, then flat; Spanish 0.54, 0.57 (345 k), 0.64 (1.0 M), still rising
(bench/studies/results/sae-corpus.json; one seed each, with French and Basque: sae-text-curve.json). A run that
learned from less than ENOUGH_CHARACTERS, about the most measured, says so.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from contracts.runs import TrainingText
from gateway.domain.datasets.models import Document
from gateway.domain.runs import repo
from gateway.domain.runs.models import SaeRun

ENOUGH_CHARACTERS = 1_000_000
"""Characters of text up to which the probe's F1 with 100 labels still rose on E3C Spanish (see above)."""
CURVE = "bench/studies/results/sae-text-curve.json"


def training_text(session: Session, run: SaeRun) -> TrainingText | None:
    """The documents and characters the run's SAE was trained and encoded on (the first `num_documents` of its
    dataset), None before it has finished."""
    result = run.result or {}
    documents = (result.get("extension") or {}).get("trained_documents") or result.get("num_documents")
    if run.status != "succeeded" or not documents:
        return None
    emb = repo.get_embedding_run(session, run_id=run.embedding_run_id)
    characters = int(session.scalar(select(func.coalesce(func.sum(Document.n_chars), 0)).where(
        Document.dataset_id == emb.dataset_id, Document.position < documents)) or 0)
    enough = characters >= ENOUGH_CHARACTERS
    advice = None if enough else (
        f"This SAE learned from {characters:,} characters of text in {documents:,} documents. On real clinical cases "
        f"the probe's F1 with 100 labels still rose as the SAE read up to {ENOUGH_CHARACTERS:,} characters "
        f"({CURVE}): upload the unlabelled notes of the same source together with the labelled ones, as one "
        "dataset, and train a new SAE on it.")
    return TrainingText(documents=int(documents), characters=characters, enough_characters=ENOUGH_CHARACTERS,
                        enough=enough, advice=advice)
