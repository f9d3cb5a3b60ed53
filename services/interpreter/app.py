"""Interpreter HTTP app: `GET /health`, `POST /interpret` (re-interpret one feature now), `POST /examples`
(a feature's documents to read). HTTP only."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict

import httpx
from fastapi import Depends, FastAPI, HTTPException, Request

from artifacts import ArtifactStore
from contracts.examples import ExamplesRequest, FeatureExamples
from contracts.interpret import CorpusRef, InterpretRequest, InterpretResult
from contracts.service_security import NO_DOCS, authorized
from services.interpreter.backends import build_backend
from services.interpreter.backends.base import Backend, BackendError
from services.interpreter.backends.keywords import TermIndex
from services.interpreter.config import InterpreterSettings, get_settings
from services.interpreter.corpus import Corpus, load_corpus
from services.interpreter.embedder_client import EmbedderError, async_http_embedder
from services.interpreter.examples import feature_examples
from services.interpreter.naming import Namer
from services.interpreter.scoring import EmbedFn


async def interpret_feature(request: InterpretRequest, corpus: Corpus, backend: Backend, *,
                            embed_texts: EmbedFn | None, judge: Backend | None = None,
                            term_index: TermIndex | None = None) -> InterpretResult:
    """Re-interpret one feature now (the synchronous endpoint); controls come from the request."""
    namer = Namer(corpus, [(request.backend, backend)], embed_texts, request.evidence, request.scoring,
                  judge=judge, term_index=term_index)
    (record,) = await namer.name_features([request.feature], request.control_labels)
    return InterpretResult.model_validate(record.model_dump())


class CorpusCache:
    """The last `size` corpora (vectors, codes) used, by their artifact references, and each one's
    term index, built the first time a back-end needs it (the feature page's examples do not)."""

    def __init__(self, store: ArtifactStore, size: int) -> None:
        self.store, self.size = store, size
        self._items: OrderedDict[str, Corpus] = OrderedDict()
        self._terms: dict[str, TermIndex] = {}
        self._lock = threading.Lock()  # requests load in worker threads: one corpus loaded once

    def get(self, ref: CorpusRef) -> Corpus:
        key = ref.model_dump_json()
        with self._lock:
            if key not in self._items:
                self._items[key] = load_corpus(self.store, ref)
                while len(self._items) > self.size:
                    self._terms.pop(self._items.popitem(last=False)[0], None)
            self._items.move_to_end(key)
            return self._items[key]

    def terms(self, ref: CorpusRef) -> tuple[Corpus, TermIndex]:
        corpus, key = self.get(ref), ref.model_dump_json()
        with self._lock:
            if key not in self._terms:
                self._terms[key] = TermIndex.of_corpus(corpus)
            return corpus, self._terms[key]


def create_app(settings: InterpreterSettings | None = None, *, embed_texts: EmbedFn | None = None,
               embedder: httpx.AsyncClient | None = None) -> FastAPI:
    """Labels are embedded for the embedding scorer by `embed_texts` when given (tests), else by the
    embedder service through `embedder` (embedded mode: the gateway's in-process client), else over
    HTTP at `settings.embedder_url`, with the model and pooling each request names."""
    settings = settings or get_settings()
    app = FastAPI(title="Prisma interpreter service", version="0.1.0", **NO_DOCS)
    app.state.settings = settings
    app.state.corpora = CorpusCache(ArtifactStore(settings.artifact_root), settings.cached_corpora)
    token = settings.service_token.get_secret_value() if settings.service_token else None
    if embedder is None and embed_texts is None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        embedder = httpx.AsyncClient(base_url=settings.embedder_url, headers=headers, timeout=settings.request_timeout_s)

    def label_embedder(body: InterpretRequest) -> EmbedFn:
        if embed_texts is not None:
            return embed_texts
        assert embedder is not None
        spec = body.label_embedding
        if spec is None:
            return async_http_embedder(embedder, model=settings.embed_model)
        return async_http_embedder(embedder, model=spec.model, pooling=spec.pooling, normalize=spec.normalize,
                                   prompt_name=spec.prompt_name)

    def require_token(request: Request) -> None:
        if not authorized(request.headers.get("authorization"), token, request.scope.get("server")):
            raise HTTPException(401, "missing or wrong service token", headers={"WWW-Authenticate": "Bearer"})

    async def load(request: Request, ref: CorpusRef) -> Corpus:
        try:  # reading the artifacts and indexing terms is blocking work: off the event loop
            return await asyncio.to_thread(request.app.state.corpora.get, ref)
        except FileNotFoundError as exc:
            raise HTTPException(404, f"corpus: artifact not found: {exc}") from exc
        except ValueError as exc:
            raise HTTPException(422, f"corpus: {exc}") from exc

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/interpret", response_model=InterpretResult, dependencies=[Depends(require_token)])
    async def interpret(body: InterpretRequest, request: Request) -> InterpretResult:
        corpus = await load(request, body.corpus)
        index = (await asyncio.to_thread(request.app.state.corpora.terms, body.corpus))[1]
        if body.feature >= corpus.n_features:
            raise HTTPException(422, f"feature: {body.feature} is not below n = {corpus.n_features}")
        if body.scoring.detection and body.backend.backend == "keywords":
            raise HTTPException(422, "scoring.detection: needs an LLM back-end (ollama or llamacpp)")
        backend = build_backend(body.backend, settings)
        try:
            return await interpret_feature(body, corpus, backend, embed_texts=label_embedder(body),
                                           judge=backend if body.scoring.detection else None, term_index=index)
        except EmbedderError as exc:
            raise HTTPException(502, str(exc)) from exc
        except BackendError as exc:
            raise HTTPException(502, f"{type(exc).__name__}: {exc}") from exc

    @app.post("/examples", response_model=FeatureExamples, dependencies=[Depends(require_token)])
    async def examples(body: ExamplesRequest, request: Request) -> FeatureExamples:
        """A feature's documents to read: activating across quantiles with their driving chunk, and
        near misses."""
        corpus = await load(request, body.corpus)
        if body.feature >= corpus.n_features:
            raise HTTPException(422, f"feature: {body.feature} is not below n = {corpus.n_features}")
        return await asyncio.to_thread(feature_examples, corpus, body)

    return app
