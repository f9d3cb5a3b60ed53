"""A note as the labelling page shows it: its whole text, the segment where each feature that drives the probe is
strongest marked with that feature's name. The probe's carriers once it is trained; before, the features its seed
expression reads. The note is read through `service.document_features` (audited there, as the document page's)."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from sqlalchemy.orm import Session

from contracts.search import DocumentFeatures, ReadFeature
from gateway.domain.concepts.errors import ConceptInputError
from gateway.domain.concepts.models import Concept
from gateway.search import service

MAX_SEGMENTS = 2_000  # a note's segments read (every clause of a clinical note)
PER_SEGMENT = 128  # features listed a segment: every active one at an SAE's k, so no carrier is cut
NOTE_FEATURES = 256  # the same for a run without segments (the whole note's features)
TEXT_CHARS = 100_000  # a page stays small for a 10 MB note
REASONS = {"seed": "the seed's hit", "near_miss": "just below the seed", "uncertain": "the probe is unsure",
           "random": "drawn at random"}


class Drive(NamedTuple):
    """The features whose firing the page marks, and where they come from."""

    source: Literal["probe", "seed", "none"]
    features: frozenset[int]


class QueuedNote(NamedTuple):
    """A note handed out by the queue (or brought back by an undo), as the page carries it."""

    document_id: int
    lease_id: int | None = None
    reason: str | None = None
    probability: float | None = None


class Piece(NamedTuple):
    text: str
    features: list[ReadFeature]  # the driving features firing on it, strongest first; empty: plain text


class NoteView(NamedTuple):
    note: QueuedNote
    external_id: str | None
    sae_run_id: int
    pieces: list[Piece]
    whole: list[ReadFeature]  # driving features firing in the note (a run without segments marks no span)
    n_chars: int
    n_marked: int  # segments marked
    drive: str  # what marks them: probe | seed | none


def driving_features(session: Session, store: Any, concept: Concept) -> Drive:
    """The probe's carriers (its largest positive weights, named on the concept page), else the features of its
    seed expression; none for a text seed before the probe exists."""
    carriers = [c["index"] for c in (concept.labelling or {}).get("carriers") or []]
    if concept.probe and not carriers:
        carriers = [int(i) for i, w in concept.probe["weights"].items() if w > 0]
    if concept.probe and carriers:
        return Drive("probe", frozenset(carriers))
    expression = (concept.seed or {}).get("expression")
    if expression:
        from gateway.domain.concepts.service import match_expression, run_data

        try:
            space = run_data(session, store, concept.sae_run_id).space
            return Drive("seed", frozenset(match_expression(expression, space).features))
        except ConceptInputError:  # the run's codes are gone, or a name no longer resolves: nothing to mark
            return Drive("none", frozenset())
    return Drive("none", frozenset())


def strongest_segments(found: DocumentFeatures, drive: Drive) -> dict[int, list[ReadFeature]]:
    """Segment index → the driving features whose strongest segment in the note it is: a note's codes are the max
    over its segments, so that segment alone is what the probe (or the seed's label:"…") reads of the feature."""
    best: dict[int, tuple[float, int, ReadFeature]] = {}
    for segment in found.segments or []:
        for f in segment.features:
            if f.index in drive.features and f.activation > best.get(f.index, (0.0, -1, f))[0]:
                best[f.index] = (f.activation, segment.index, f)
    marked: dict[int, list[ReadFeature]] = {}
    for _, segment_index, f in sorted(best.values(), key=lambda b: -b[0]):
        marked.setdefault(segment_index, []).append(f)
    return marked


def note_pieces(found: DocumentFeatures, drive: Drive) -> list[Piece]:
    """The text (its first TEXT_CHARS) cut at its segments; a segment where a driving feature is strongest carries
    it."""
    text = found.text[:TEXT_CHARS]
    if not found.segments:
        return [Piece(text, [])]
    marked = strongest_segments(found, drive)
    pieces, cursor = [], 0
    for segment in sorted(found.segments, key=lambda s: s.start):
        start, end = max(segment.start, cursor), min(segment.end, len(text))
        if start >= end:
            continue
        if start > cursor:
            pieces.append(Piece(text[cursor:start], []))
        pieces.append(Piece(text[start:end], marked.get(segment.index, [])))
        cursor = end
    if cursor < len(text):
        pieces.append(Piece(text[cursor:], []))
    return pieces


def read_note(state: Any, concept: Concept, note: QueuedNote, drive: Drive, session: Session) -> NoteView:
    """Blocking. The note with its marked segments; raises service.DocumentNotInRun for a note of another dataset."""
    found = service.document_features(state, concept.sae_run_id, note.document_id, limit=NOTE_FEATURES,
                                      per_segment=PER_SEGMENT, segment_limit=MAX_SEGMENTS, session=session)
    pieces = note_pieces(found, drive)
    return NoteView(note=note, external_id=found.external_id, sae_run_id=concept.sae_run_id, pieces=pieces,
                    whole=[f for f in found.features if f.index in drive.features], n_chars=len(found.text),
                    n_marked=sum(1 for p in pieces if p.features), drive=drive.source)
