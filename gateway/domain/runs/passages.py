"""Texts encoded as an SAE run encodes its stored notes: embedded as passages by the run's own spec
(model, prompt, precision, pooling, chunk-and-average, segments: the embedder's POST /passages), then
through the run's SAE by the very function its pipeline calls (the SAE service's POST /codes), a note's
codes the max over its segments' where the run pools them. No FastAPI here.

A stored note sent as text gets the codes the run stored for it: checked against the run's own codes in
tests/concepts/test_classify.py, and on 1,000 demo notes in bench/classify.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from contracts.packed import PackedArray
from contracts.sparse import max_pool_rows
from gateway.domain.runs import repo as run_repo
from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.models import EmbeddingRun, SaeRun
from gateway.domain.runs.query_model import is_imported
from gateway.search.expressions import SegmentCodes
from gateway.search.space import codes_uri, segment_uris

CODES_BATCH = 16_384  # vectors per POST /codes (the service takes up to 65,536 by default)


@dataclass(frozen=True)
class ModelUsed:
    """The model a run's vectors came from, as its result recorded it."""

    name: str
    precision: str
    engine: str
    sha256: str | None  # the shipped model file's SHA-256 (None: a packaged model named by version, a local directory)
    provenance: dict[str, Any] | None  # as the embedder describes the file (package, version, hash)


@dataclass(frozen=True)
class PassageTarget:
    """What encoding texts for one SAE run needs, read in one session."""

    sae_run_id: int
    dataset_id: int
    spec: dict[str, Any]  # the embedding run's EmbeddingRunSpec, as recorded
    sae_uri: str  # the SAE's folder
    pooled: bool  # documents' codes are the max over their segments' (the run stores segment codes)
    model: ModelUsed
    words: bool = False  # a segment's codes are the max over its words' (the SAE run read the words)


@dataclass(frozen=True)
class SearchVectors:
    """What text search reads of texts, as an embedding run's shards hold it: the documents' vectors, and where the
    run has segments, theirs with each one's text and span."""

    documents: np.ndarray  # float32 [texts, d]
    segment_vectors: np.ndarray | None  # float16 [S, d]
    doc: np.ndarray | None  # int64 [S]: each segment's text, counted from the first
    spans: np.ndarray | None  # int64 [S, 2]: character start and end


class EncodedTexts:
    """Texts' codes: [texts, n] CSR, and, where the run pools segments, their segments' codes and spans; the vectors
    text search reads when they were asked for."""

    def __init__(self, codes: sp.csr_matrix, segments: SegmentCodes | None, segment_rows: sp.csr_matrix | None,
                 search: SearchVectors | None = None) -> None:
        self.codes, self.segments, self.segment_rows, self.search = codes, segments, segment_rows, search


def model_used(emb: EmbeddingRun) -> ModelUsed:
    result = emb.result or {}
    provenance = result.get("model_provenance") or {}
    return ModelUsed(name=emb.model, precision=result.get("precision", "fp32"), engine=result.get("engine", "torch"),
                     sha256=provenance.get("file_sha256") or provenance.get("sha256"),
                     provenance=result.get("model_provenance"))


def passage_target(session: Any, run: SaeRun, *, field: str = "sae_run_id") -> PassageTarget:
    """Raises SearchNotReady (the run has no codes yet) and RunInputError 409 when its vectors were imported:
    made elsewhere, no model here makes them."""
    codes_uri(run)  # SearchNotReady before any other work
    emb = run_repo.get_embedding_run(session, run_id=run.embedding_run_id)
    if is_imported(emb):
        raise RunInputError(f"{field}: SAE run {run.id} reads vectors imported as {emb.model}: no model here embeds "
                            "a text as they were made, so texts cannot be encoded for it", field=field, status_code=409)
    return PassageTarget(sae_run_id=run.id, dataset_id=emb.dataset_id, spec=dict(emb.spec or {}),
                         sae_uri=run.result["artifacts"]["cfg"]["uri"].rsplit("/", 1)[0],
                         pooled=segment_uris(run) is not None, model=model_used(emb),
                         words=bool(run.result.get("segment_words")))


def _check_model(target: PassageTarget, answer: dict[str, Any]) -> None:
    """The embedder must run the model the run's vectors came from: the same file (its provenance: package,
    version, SHA-256), precision and engine."""
    want = target.model
    if (answer.get("provenance"), answer["precision"], answer["engine"]) != (want.provenance, want.precision, want.engine):
        got = answer.get("provenance") or {}
        raise RunInputError(
            f"model: SAE run {target.sae_run_id}'s notes were embedded by {want.name} ({want.precision}, {want.engine}, "
            f"{_file(want.provenance)}); the embedder here runs {answer['model_name']} ({answer['precision']}, "
            f"{answer['engine']}, {_file(got)}): its scores would not be the run's", field="model", status_code=409)


def _file(provenance: dict[str, Any] | None) -> str:
    p = provenance or {}
    sha = p.get("file_sha256") or p.get("sha256")
    return f"file {sha[:12]}" if sha else f"{p.get('package', 'a local directory')} {p.get('package_version', '')}".strip()


async def _codes(services: Any, sae_uri: str, vectors: np.ndarray) -> sp.csr_matrix:
    """[m, n] CSR codes of vectors [m, d], in batches of CODES_BATCH sent together."""
    batches = [vectors[i:i + CODES_BATCH] for i in range(0, max(len(vectors), 1), CODES_BATCH)]
    answers = await asyncio.gather(*(services.post("sae", "/codes", {"vectors": PackedArray.of(b).model_dump(),
                                                                     "sae_uri": sae_uri}) for b in batches))
    parts = [sp.csr_matrix((PackedArray.model_validate(a["data"]).array(), PackedArray.model_validate(a["indices"]).array(),
                            PackedArray.model_validate(a["indptr"]).array()), shape=(len(b), a["n_features"]))
             for a, b in zip(answers, batches)]
    return sp.vstack(parts, format="csr") if len(parts) > 1 else parts[0]


def _segments(answer: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(doc int64 [S], spans int64 [S, 2], vectors float16 [S, d]) of a /passages answer."""
    seg = answer["segments"]
    doc, start, end, vectors = (PackedArray.model_validate(seg[k]).array() for k in ("doc", "start", "end", "vectors"))
    return doc.astype(np.int64), np.stack([start, end], axis=1).astype(np.int64), vectors


def _words(answer: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """(vectors float16 [W, d], segment int64 [W]) of a /passages answer's words, if it has them."""
    seg = answer["segments"]
    if seg.get("word_segment") is None:
        return None
    return (PackedArray.model_validate(seg["word_vectors"]).array(),
            PackedArray.model_validate(seg["word_segment"]).array().astype(np.int64))


def check_texts(texts: list[str], *, max_texts: int, max_bytes: int) -> None:
    """Texts bounded as an upload bounds a document (datasets/checks.py): not empty nor only white space, no NUL,
    at most `max_bytes` of UTF-8 each; at most `max_texts`. Raises RunInputError naming `texts.<i>`."""
    if not texts:
        raise RunInputError("texts: give at least one text", field="texts")
    if len(texts) > max_texts:
        raise RunInputError(f"texts: {len(texts)} texts; at most {max_texts} per call", field="texts")
    for i, text in enumerate(texts):
        if not text.strip():
            raise RunInputError(f"texts.{i}: the text is empty or only white space", field=f"texts.{i}")
        if "\x00" in text:
            raise RunInputError(f"texts.{i}: the text contains a NUL character", field=f"texts.{i}")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise RunInputError(f"texts.{i}: the text contains an unpaired surrogate", field=f"texts.{i}") from None
        if size > max_bytes:
            raise RunInputError(f"texts.{i}: the text is {size} bytes of UTF-8, over the {max_bytes}-byte limit of "
                                "a document", field=f"texts.{i}", status_code=413)


def _request_spec(target: PassageTarget, search_vectors: bool) -> dict[str, Any]:
    """The run's spec, without segments where neither the SAE, the documents' vectors nor text search read them, and
    with words only where the SAE read the run's segments by them."""
    spec = {**target.spec, "word_states": target.pooled and target.words}  # pooled: the run has segments
    if target.pooled or search_vectors or target.spec.get("document_vectors") == "segments":
        return spec
    return {**spec, "segments": False}


async def encode_texts(services: Any, target: PassageTarget, texts: list[str], *,
                       search_vectors: bool = False) -> EncodedTexts:
    """The texts' codes as the run's pipeline computed its notes' (services/sae/pipeline.py `analyse`); with
    `search_vectors`, also their vectors as the embedding run's shards hold its notes' (what text search reads)."""
    answer = await services.post("embedder", "/passages", {"texts": texts,
                                                           "spec": _request_spec(target, search_vectors),
                                                           "documents": search_vectors or not target.pooled})
    _check_model(target, answer)
    documents = None if answer.get("documents") is None else PackedArray.model_validate(answer["documents"]).array()
    segments = _segments(answer) if answer.get("segments") is not None else None  # vectors float16, as the shards
    search = None if not search_vectors else SearchVectors(documents, *(
        (segments[2], segments[0], segments[1]) if segments is not None else (None, None, None)))
    if not target.pooled:
        return EncodedTexts(await _codes(services, target.sae_uri, documents), None, None, search)
    doc, spans, vectors = segments
    words = _words(answer) if target.words else None
    if words is None:
        rows = await _codes(services, target.sae_uri, vectors)  # [S, n]
    else:  # a segment read by its words
        rows = max_pool_rows(await _codes(services, target.sae_uri, words[0]), words[1], len(doc))
    codes = max_pool_rows(rows, doc, len(texts))  # services/sae/segments.py pooled_codes
    return EncodedTexts(codes, SegmentCodes(rows.tocsc(), doc, spans), rows, search)
