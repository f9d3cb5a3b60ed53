"""Naming features: evidence → back-ends → candidate labels → scores → best-of-n.

`Namer.name_features` names a batch of features with every configured back-end; `name_run`
(runs.py) drives it over a whole SAE run with checkpoints, `Namer.prepare` drawing the groups ahead (in a
child process: ahead.py); app.py's `interpret_feature` re-interprets one feature for the synchronous endpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from contracts.interpret import (Alternative, BackendOptions, EvidenceConfig, FeatureInterpretations,
                                 Interpretation, ScoringConfig)
from services.interpreter.backends.base import (Backend, BackendError, BackendOutputError, NamingRequest, copies_input)
from services.interpreter.backends.keywords import LABEL_WORDS, KeywordsBackend, TermIndex, label_words
from services.interpreter.corpus import Corpus
from services.interpreter.corpus_order import LANGUAGES, corpus_language, naming_order  # noqa: F401  (runs.py reads it here)
from services.interpreter.calibration import curve_points, curve_threshold, holds_on
from services.interpreter.evidence import EvidenceSet, FeatureTooRare, anchors_of, sample_evidence
from services.interpreter import neighbours as neighbours_module
from services.interpreter.ahead import Ahead, can_fork
from services.interpreter.neighbours import Neighbours
from services.interpreter.excerpts import ONE_BLAS_THREAD, DrivingChunks
from services.interpreter.label_vectors import LabelVectors
from services.interpreter.near_misses import NearMisses
from services.interpreter.thresholds import StemIndex, precision_curves
from services.interpreter.selection import alternative_reliable, choose_controls, first_per_backend, greedy_terms, lower, names_first, with_alternatives
from services.interpreter.scoring import (EmbedFn, auroc_columns, best_index, detection_score, embedding_scores,
                                         finalise)

HINTS = 8
"""Contrastive keywords offered to a language model."""
EMBED_CACHE = 50_000
"""Label vectors kept (single terms recur across features): 50k × 384 float32 ≈ 77 MB."""
@dataclass
class _Pending:
    """One feature in flight: its evidence and the interpretations found so far."""

    record: FeatureInterpretations
    evidence: EvidenceSet | None = None
    control: str | None = None
    terms: dict[str, list[str]] = field(default_factory=dict)
    """Per back-end, terms it offers to compose labels from (NamingResult.extra['terms'])."""
    keywords: list[str] | None = None
    """The feature's most contrastive terms: hints to a language model, and evidence shown under its name."""

    @property
    def named(self) -> list[Interpretation | Alternative]:
        """Every label scored and calibrated: the interpretations, then each one's alternatives, in order."""
        return [*self.record.interpretations, *(a for i in self.record.interpretations for a in i.alternatives)]


@dataclass
class Namer:
    """Names features of one corpus with several back-ends, scored by the embedding scorer
    (`embed_texts`) and, when `scoring.detection`, by `judge` (a language-model back-end)."""

    corpus: Corpus
    backends: list[tuple[BackendOptions, Backend]]
    embed_texts: EmbedFn | None = None
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    judge: Backend | None = None
    concurrency: int = 4
    keyword_pool: int = 200
    """Documents a side that term statistics count (all non-held-out activating ones, up to this)."""
    term_index: TermIndex | None = None
    name_tolerance: float = 0.02
    """Evidence AUROC a name (not a term list) may give up against the best candidate and still be kept:
    on 192 features of the benchmark, 0.02 doubles the share of names (16 % → 33 %) at the same
    held-out score (the evidence's own noise is larger)."""
    max_candidates: int = 8
    """Candidates of one back-end embedded per feature (composed ones included): embedding them is
    the cost of naming, so the back-end's first (plainest) ones and the best compositions go first."""
    language: str | None = None
    """'en' or 'it', the language names are asked in; None: the corpus's (`corpus_language` of 200 documents)."""
    ahead_process: bool = True
    """`prepare`'s groups drawn (evidence, keywords candidates) in a child process while this one names the group
    before (ahead.py), where every back-end is a keywords one and a child can be forked (`can_fork`)."""

    def __post_init__(self) -> None:
        if self.term_index is None:
            self.term_index = TermIndex.of_corpus(self.corpus)
        self.keywords = KeywordsBackend(self.term_index)
        for _, backend in self.backends:
            if isinstance(backend, KeywordsBackend) and backend.index is None:
                backend.index = self.term_index
        if self.language is None:
            step = max(1, self.corpus.n_docs // 200)
            self.language = corpus_language([self.corpus.text(p)[:2000] for p in range(0, self.corpus.n_docs, step)])
        self._gate = asyncio.Semaphore(self.concurrency)
        self.driving = DrivingChunks(self.corpus)
        self.neighbours = Neighbours(self.corpus)
        self.near = NearMisses(self.corpus, self.evidence.seed)
        self.stems = StemIndex(self.corpus, self.language)
        self.labels = LabelVectors(self.embed_texts) if self.embed_texts is not None else None
        self._ready: dict[int, _Pending] = {}  # prepared: evidence drawn, named by the back-ends
        self._ahead_groups: Ahead | None = None  # groups drawn ahead by a child process (made at the first prepare)

    def close(self) -> None:
        """Stop the child process drawing ahead, if there is one (a Namer left open stops it when collected)."""
        ahead, self._ahead_groups = self._ahead_groups, None
        if ahead is not None:
            ahead.close()

    @property
    def embedded(self) -> int:
        """Texts embedded so far (cache misses): what naming costs."""
        return self.labels.embedded if self.labels is not None else 0

    async def embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors of `texts` (label_vectors.py), at most EMBED_CACHE kept; groups ahead drawn while they are embedded."""
        assert self.labels is not None
        while self._ahead_groups is not None and not self.labels.ready(texts) and await self._ahead_groups.help():
            pass
        return await self.labels.get(texts, EMBED_CACHE)

    # -- one batch --------------------------------------------------------------------------
    async def name_features(self, features: Sequence[int], control_pool: Sequence[str] = ()) -> list[FeatureInterpretations]:
        """Every feature of `features` named by every back-end, scored; order kept (those `prepare`d already
        named by the back-ends). The batch's anchors' neighbours are found first, their blocks on a thread pool
        (Neighbours.prefetch: a [64, U] product and its partition each); the rest runs with BLAS on one thread:
        thousands of small products, which a BLAS thread pool slows down (7× on two busy cores) instead of
        speeding up."""
        pending = await self._candidates(features)
        with ONE_BLAS_THREAD:
            return await self._name_features(pending, control_pool)

    async def prepare(self, features: Sequence[int]) -> None:
        """Draw the evidence of `features` (the next batches) and name them by every back-end, and start embedding the
        candidates `_select` compares, in one call on a thread; with `ahead_process`, by the groups drawn ahead."""
        ahead = self._ahead()
        new = [f for f in dict.fromkeys(features) if f not in self._ready and not (ahead and ahead.holds(f))]
        if not new:
            return
        if ahead is None:
            await self._ready_up(await self._draw(new))
            return
        ahead.add(new)
        await self._collect()

    def _ahead(self) -> Ahead | None:
        """The groups drawn ahead by a child process, forked at the first call (None: in this process)."""
        if self._ahead_groups is None and self.ahead_process and can_fork() and all(
                isinstance(b, KeywordsBackend) for _, b in self.backends):
            self._ahead_groups = Ahead(self._draw, self._in_child)
        return self._ahead_groups

    def _in_child(self) -> None:  # the child's own: a semaphore of its event loop, neighbours found on its thread
        self._gate = asyncio.Semaphore(self.concurrency)
        neighbours_module.PREFETCH_THREADS = 1

    async def _collect(self, needed: Sequence[int] = ()) -> None:
        """The groups drawn ahead taken back (ahead.py `Ahead.collect`), made ready."""
        if self._ahead_groups is not None:
            for drawn in await self._ahead_groups.collect(needed):
                await self._ready_up(drawn)

    async def _ready_up(self, drawn: list[_Pending]) -> None:
        """Drawn features completed (compositions) and kept for `name_features`; their candidates' embedding
        started."""
        ready = await self._composed(drawn)
        self._ready.update((p.record.feature, p) for p in ready)
        if self.scoring.embedding and self.labels is not None:
            self.labels.start([i.label for p in ready if self._selectable(p)
                               for i in first_per_backend(p.record.interpretations, self.max_candidates)])

    async def _candidates(self, features: Sequence[int]) -> list[_Pending]:
        """Each feature's evidence and candidates (with the compositions the embedding scorer adds), the
        `prepare`d ones taken as they are."""
        await self._collect(features)
        new = [f for f in dict.fromkeys(features) if f not in self._ready]
        drawn = {p.record.feature: p for p in await self._composed(await self._draw(new))}
        return [drawn[f] if f in drawn else self._ready.pop(f) for f in features]

    async def _draw(self, features: Sequence[int]) -> list[_Pending]:
        """Each feature's evidence and every back-end's candidates (no compositions: they need label vectors)."""
        self.neighbours.prefetch(a for f in features for a in anchors_of(self.corpus, f, self.evidence).tolist())
        with ONE_BLAS_THREAD:
            pending = list(map(self._evidence, features))
            await asyncio.gather(*(self._name(p, opts, be) for p in pending if p.evidence
                                   for opts, be in self.backends))
        return pending

    async def _composed(self, pending: list[_Pending]) -> list[_Pending]:
        """`pending`, the compositions of the embedding scorer added to the candidates of those selectable."""
        if self.scoring.embedding and self.embed_texts is not None:
            with ONE_BLAS_THREAD:
                await self._compose([p for p in pending if self._selectable(p)])
        return pending

    @staticmethod
    def _selectable(p: _Pending) -> bool:
        """Named, with evidence documents to compare its candidates on."""
        ev = p.evidence
        return bool(p.record.interpretations and ev and ev.selection_activating and ev.selection_hard + ev.selection_random)

    async def _name_features(self, pending: list[_Pending],
                             control_pool: Sequence[str]) -> list[FeatureInterpretations]:
        await self._select(pending)
        if self.scoring.control:
            choose_controls(pending, control_pool, self.evidence.seed + 1)
        await self._score_embedding(pending)
        if self.scoring.detection and self.judge is not None:
            await asyncio.gather(*(self._score_detection(p) for p in pending if p.record.interpretations))
        for p in pending:
            for interp in p.record.interpretations:
                finalise(interp, self.scoring)
            p.record.best = best_index(p.record.interpretations)
            for interp in p.record.interpretations:
                for alt in interp.alternatives:
                    alt.reliable = alternative_reliable(alt, interp, self.scoring)
            if p.evidence and not p.record.interpretations and p.record.skipped is None:
                p.record.skipped = ("no name: " + "; ".join(p.record.errors))[:300] if p.record.errors else "no name"
        return [p.record for p in pending]

    def _evidence(self, feature: int) -> _Pending:
        n_act = len(self.corpus.column(feature)[0])
        record = FeatureInterpretations(feature=feature, n_activating=n_act)
        try:
            ev = sample_evidence(self.corpus, feature, self.evidence, pool=self.keyword_pool, neighbours=self.neighbours)
            self.near.add(ev)
            return _Pending(record, ev)
        except FeatureTooRare as exc:
            record.skipped = str(exc)
            return _Pending(record)

    def _keywords(self, p: _Pending) -> list[str]:
        """The feature's HINTS most contrastive terms, found once (every back-end's evidence)."""
        ev = p.evidence
        assert ev is not None
        if p.keywords is None:
            p.keywords = self.keywords.keywords(NamingRequest(
                ev.feature, (), (), activating_ids=ev.pool_activating, non_activating_ids=ev.pool_non_activating), HINTS)
        return p.keywords

    def _request(self, p: _Pending, opts: BackendOptions, backend: Backend) -> NamingRequest:
        ev = p.evidence
        assert ev is not None
        ids = dict(activating_ids=ev.pool_activating, non_activating_ids=ev.pool_non_activating)
        chars = self.evidence.excerpt_chars
        if isinstance(backend, KeywordsBackend):  # excerpts of the shown documents: its extractive spans
            return NamingRequest(ev.feature, self.driving.excerpts(ev.feature, ev.activating, chars), (), **ids,
                                 hard_negative_ids=ev.selection_hard, near_miss_ids=ev.near_misses,
                                 candidates=opts.candidates)
        language = LANGUAGES[self.language if opts.language == "auto" else opts.language]  # type: ignore[index]
        return NamingRequest(ev.feature, self.driving.excerpts(ev.feature, ev.activating, chars),
                             self.driving.excerpts(ev.feature, ev.non_activating, chars), **ids,
                             hints=self._keywords(p), candidates=opts.candidates, temperature=opts.temperature,
                             language=language)

    async def _name(self, p: _Pending, opts: BackendOptions, backend: Backend) -> None:
        ev = p.evidence
        assert ev is not None
        request = self._request(p, opts, backend)
        try:
            async with self._gate:
                result = await backend.name_feature(request)
        except BackendError as exc:  # a back-end that found no name says why; any other failure names its type too
            why = str(exc) if isinstance(exc, BackendOutputError) else f"{type(exc).__name__}: {exc}"
            p.record.errors.append(f"{backend.name}: {why}"[:300])
            return
        ids = ev.ids(pools=isinstance(backend, KeywordsBackend))
        ids.keywords = p.record.keywords = self._keywords(p)
        ids.near_miss_examples = self.near.examples(ev)
        shown = [*request.activating, *request.non_activating]
        p.terms[backend.name] = list(result.extra.get("terms", []))
        p.record.interpretations += [
            Interpretation(feature=ev.feature, label=c.label, description=c.description, backend=backend.name,
                           model=result.model, prompt_version=result.prompt_version, evidence=ids,
                           copies_input=c.copies_input or copies_input(c.label, shown))
            for c in result.candidates
        ]

    async def _select(self, pending: list[_Pending]) -> None:
        """Keep each back-end's best `keep_candidates` by embedding AUROC on the evidence's selection
        documents (never held out); without an embedder, the back-end's first ones."""
        keep = self.scoring.keep_candidates
        named = [p for p in pending if p.record.interpretations]
        if not (self.scoring.embedding and self.embed_texts is not None):
            for p in named:
                p.record.interpretations = with_alternatives(p.record.interpretations, keep)
            return
        named = [p for p in named if self._selectable(p)]  # their compositions added already (_candidates)
        for p in named:
            p.record.interpretations = first_per_backend(p.record.interpretations, self.max_candidates)
        vectors = await self.embed([i.label for p in named for i in p.record.interpretations])
        for p in named:
            ev = p.evidence
            assert ev is not None
            negatives = [*ev.selection_hard, *ev.selection_random]
            interps = p.record.interpretations
            labels = np.stack([vectors[i.label] for i in interps])  # [L, d] unit-norm
            scores = auroc_columns(self.corpus.vectors[ev.selection_activating] @ labels.T,
                                   self.corpus.vectors[negatives] @ labels.T)  # [L]
            for interp, s in zip(interps, scores):
                interp.score_evidence = round(float(s), 6)
            p.record.interpretations = with_alternatives(names_first(interps, self.name_tolerance), keep)

    async def _compose(self, named: list[_Pending]) -> None:
        """Add candidates composed greedily from each back-end's offered terms (selection.py)."""
        offered = sorted({t for p in named for terms in p.terms.values() for t in terms})
        if not offered:
            return
        vectors = await self.embed(offered)
        for p in named:
            ev = p.evidence
            assert ev is not None
            pos = self.corpus.vectors[ev.selection_activating]
            neg = self.corpus.vectors[[*ev.selection_hard, *ev.selection_random]]
            for name, terms in p.terms.items():
                template = next((i for i in p.record.interpretations if i.backend == name), None)
                if template is None or not terms:
                    continue
                tv = np.stack([vectors[t] for t in terms]).T  # [d, T]
                have = {i.label for i in p.record.interpretations}
                for chosen in greedy_terms(pos @ tv, neg @ tv):
                    label = ", ".join(terms[i] for i in chosen)
                    if label_words(label) > LABEL_WORDS:
                        break  # longer lists only grow
                    if label not in have:
                        have.add(label)
                        p.record.interpretations.append(template.model_copy(update={
                            "label": label, "copies_input": False, "description": f"{template.description or ''} Terms chosen for how "
                            "well they tell its documents from similar ones.".strip()}))

    async def _score_embedding(self, pending: list[_Pending]) -> None:
        if not self.scoring.embedding or self.embed_texts is None:
            return
        texts = sorted({n.label for p in pending for n in p.named} | {p.control for p in pending if p.control})
        if not texts:
            return
        vectors = await self.embed(texts)
        for p in pending:
            if not p.record.interpretations:
                continue
            ev = p.evidence
            assert ev is not None
            named = p.named
            labels = [n.label for n in named] + ([p.control] if p.control else [])
            scores = embedding_scores(np.stack([vectors[t] for t in labels]),
                                      self.corpus.vectors[ev.holdout_activating],
                                      self.corpus.vectors[ev.holdout_non_activating])
            control = scores[-1] if p.control else None
            for n, s in zip(named, scores):  # an alternative's own too, as it may be shown in the name's place
                n.score_embedding = s
                if isinstance(n, Interpretation):
                    n.control_embedding = control
            self._near_and_threshold(p, vectors)

    def _near_and_threshold(self, p: _Pending, vectors: dict[str, np.ndarray]) -> None:
        """Each name's (and alternative's) near-miss AUROC, held-out activating vs held-out near misses, and its
        threshold: the lowest activation above which its words occur in >= 80 % of the corpus's activating segments,
        estimated on the calibration segments (each weighted by the segments it stands for)."""
        ev = p.evidence
        assert ev is not None
        acts = np.asarray(ev.calibration_acts, dtype=np.float64)
        weights = np.asarray(ev.calibration_weights, dtype=np.float64) if ev.calibration_weights else None
        named = p.named
        everywhere = self.corpus.column(p.record.feature)[1]  # every activation: how many reach a threshold
        near = len(ev.holdout_near_misses) >= 4
        if near:
            scores = embedding_scores(np.stack([vectors[n.label] for n in named]),
                                      self.corpus.vectors[ev.holdout_activating],
                                      self.corpus.vectors[ev.holdout_near_misses])
        curves = precision_curves(acts, self.stems.holds(ev.calibration, [n.label for n in named]), weights)
        for k, (n, curve) in enumerate(zip(named, curves)):
            n.score_near_miss = round(scores[k], 6) if near else None
            n.threshold = curve_threshold(curve)
            n.holds_on = holds_on(curve, n.threshold, everywhere)
            n.precision_curve = curve_points(curve)  # an alternative's own too: it may be shown in the name's place
            if isinstance(n, Interpretation):
                n.calibrated_on = len(ev.calibration)
                n.calibration = "strongest_and_sample" if ev.pool_activating else "sample"
            else:
                n.score = lower(n.score_near_miss, n.score_embedding)

    async def _score_detection(self, p: _Pending) -> None:
        """Detection for each back-end's best candidate by embedding score (all when unscored), and the control."""
        ev, judge = p.evidence, self.judge
        assert ev is not None and judge is not None
        best: dict[str, Interpretation] = {}
        for interp in p.record.interpretations:
            cur = best.get(interp.backend)
            if cur is None or (interp.score_embedding or 0) > (cur.score_embedding or 0):
                best[interp.backend] = interp
        pos = [self.corpus.text(i) for i in ev.holdout_activating]
        neg = [self.corpus.text(i) for i in ev.holdout_non_activating]
        try:
            async with self._gate:
                control = (await detection_score(judge, p.control, None, pos, neg)) if p.control else None
                for interp in best.values():
                    interp.score_detection = await detection_score(judge, interp.label, interp.description, pos, neg)
                    interp.control_detection = control
        except BackendError as exc:
            p.record.errors.append(f"detection: {type(exc).__name__}: {exc}"[:300])
