"""Batched chunk-and-average inference: texts -> one vector each, plus the chunk vectors.

One fast-tokenizer call for all texts (no special tokens), chunks planned with numpy,
chunks of all documents packed into token-budget batches of one padded width (a function
of each chunk's own length, so a text's vector does not depend on its batch), one forward
pass per batch under `inference_mode` (several side by side on an engine that runs them so:
`in_order`), mean (or CLS) pooling per chunk, chunk vectors averaged per document, then
optionally unit-normalised.

A sentence-transformers model directory (`modules.json`) is embedded faithfully per chunk:
its Pooling module's mode(s), then its Dense modules, then Normalize if listed, exactly as
`SentenceTransformer.encode` treats a text that fits one window; the chunk vectors are then
averaged (and normalised) as usual. The rule for the run's pooling: the default 'mean' means
the model's own Pooling module; 'mean_content' or 'cls' replace that Pooling module only
(Dense and Normalize still follow, so the dimension stays the model's).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain
from typing import NamedTuple, TypeVar

import numpy as np
import torch

from services.embedder.chunking import ChunkPlan, chunk_token_windows, pack_batches, padded_length
from services.embedder.errors import EmbedderInputError, RunCancelledError
from services.embedder.models import LoadedModel, default_threads
from services.embedder.st_modules import st_pool

T = TypeVar("T")
R = TypeVar("R")
CPU_BATCH_TOKENS = 8192
GPU_BATCH_TOKENS = 65536


class TokenizedTexts(NamedTuple):
    """All texts' tokens without specials, concatenated."""

    ids: np.ndarray  # int64 [T]: token ids of every text, back to back
    starts: np.ndarray  # int64 [D + 1]: text i's tokens are ids[starts[i]:starts[i + 1]]
    offsets: list[list[tuple[int, int]]]  # per text, per token: (char start, char end)

    @property
    def n_tokens(self) -> np.ndarray:
        return np.diff(self.starts)


class ChunkVectors(NamedTuple):
    """Each chunk's pooled vector and where it came from (provenance)."""

    doc: np.ndarray  # int64 [C]: index of the document in the input
    token_start: np.ndarray  # int32 [C]: in the document's tokens without specials
    token_end: np.ndarray  # int32 [C]
    char_start: np.ndarray  # int32 [C]: character span of the chunk in the text
    char_end: np.ndarray  # int32 [C]
    vectors: np.ndarray  # float32 [C, d]: pooled, before averaging and normalisation


class TokenStates(NamedTuple):
    """Every content token's last hidden state, read in its chunk (`embed_texts(token_states=True)`)."""

    states: np.ndarray  # float16 [T, d]: as the model gave them (not normalised), texts back to back
    starts: np.ndarray  # int64 [D + 1]: text i's tokens are rows starts[i]:starts[i + 1]
    offsets: list[list[tuple[int, int]]]  # per text, per token: (char start, char end)


class Embedded(NamedTuple):
    """Document vectors in input order, with their chunks."""

    vectors: np.ndarray  # float32 [D, d]
    chunks: ChunkVectors
    n_chunks: np.ndarray  # int64 [D]
    n_tokens: np.ndarray  # int64 [D]: tokens fed to the model, specials included
    tokens: TokenStates | None = None  # with token_states=True


def configure_threads(threads: int | None) -> int:
    """Set torch's intra-op CPU threads (None: every CPU this process may use); returns the count."""
    n = threads or default_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def default_batch_tokens(device: torch.device) -> int:
    return GPU_BATCH_TOKENS if device.type == "cuda" else CPU_BATCH_TOKENS


def tokenize_texts(lm: LoadedModel, texts: Sequence[str]) -> TokenizedTexts:
    """One batched fast-tokenizer call, no specials, no truncation, offsets kept."""
    enc = lm.tokenizer(  # type: ignore[operator]
        list(texts), add_special_tokens=False, truncation=False, padding=False,
        return_offsets_mapping=True, return_attention_mask=False, return_token_type_ids=False,
        verbose=False,
    )
    lengths = np.fromiter((len(x) for x in enc["input_ids"]), dtype=np.int64, count=len(texts))
    starts = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    ids = np.fromiter(chain.from_iterable(enc["input_ids"]), dtype=np.int64, count=int(starts[-1]))
    return TokenizedTexts(ids=ids, starts=starts, offsets=enc["offset_mapping"])


class Batch(NamedTuple):
    """One forward batch; every tensor [B, L]."""

    input_ids: torch.Tensor  # int64: prefix specials, content, suffix specials, padding
    attention_mask: torch.Tensor  # int64: 1 on real tokens, 0 on padding
    pool_weights: torch.Tensor  # float32: 1 on the tokens the chunk vector averages


def build_batch(lm: LoadedModel, tok: TokenizedTexts, plan: ChunkPlan, idx: np.ndarray, pooling: str,
                seq_width: int | None = None) -> Batch:
    """The chunks `idx` as tensors padded to `seq_width` tokens (default: the longest chunk's
    length with specials), built with numpy (no per-token Python)."""
    n = plan.lengths[idx]  # [B] content tokens per chunk
    p, s = len(lm.prefix_ids), len(lm.suffix_ids)
    width = int(n.max()) if seq_width is None else seq_width - p - s  # content columns
    if width < int(n.max()):
        raise ValueError(f"seq_width {seq_width} is shorter than the longest chunk with its specials")
    cols = np.arange(width, dtype=np.int64)  # [W]
    content = cols[None, :] < n[:, None]  # [B, W]
    src = tok.starts[plan.doc[idx]] + plan.start[idx]  # [B] where each chunk's tokens begin in ids
    ids = np.full((len(idx), p + width + s), lm.pad_id, dtype=np.int64)  # [B, L]
    if len(tok.ids):
        gather = np.where(content, src[:, None] + cols[None, :], 0)  # [B, W]
        ids[:, p : p + width] = np.where(content, tok.ids[gather], lm.pad_id)
    ids[:, :p] = lm.prefix_ids
    rows = np.arange(len(idx))
    for j, token in enumerate(lm.suffix_ids):  # suffix right after each chunk's last token
        ids[rows, p + n + j] = token
    attention = np.arange(ids.shape[1])[None, :] < (p + n + s)[:, None]  # [B, L]
    weights = attention
    if pooling == "mean_content":
        weights = np.zeros_like(attention)
        weights[:, p : p + width] = content
        weights[n == 0] = attention[n == 0]  # an empty text: its special tokens are all it has
    return Batch(torch.from_numpy(ids), torch.from_numpy(attention.astype(np.int64)),
                 torch.from_numpy(weights.astype(np.float32)))


def pool_chunks(hidden: torch.Tensor, weights: torch.Tensor, pooling: str) -> torch.Tensor:
    """float32 [B, d] from hidden [B, L, d], one vector per chunk.

    'mean': over the chunk's tokens, its own special tokens included and padding excluded,
    exactly as sentence-transformers pools (the way the model was trained); 'mean_content':
    over content tokens only; 'cls': the first token. `weights` [B, L] says which tokens.
    """
    if pooling == "cls":
        return hidden[:, 0].float()
    summed = torch.bmm(weights.unsqueeze(1), hidden.float()).squeeze(1)  # [B, d]
    return summed / weights.sum(1, keepdim=True)


def forward_chunks(
    lm: LoadedModel,
    tok: TokenizedTexts,
    plan: ChunkPlan,
    *,
    pooling: str,
    batch_tokens: int,
    max_batch_size: int,
    on_tokens: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    pad_multiple: int = 1,
    on_hidden: Callable[[np.ndarray, torch.Tensor], None] | None = None,
) -> np.ndarray:
    """float32 [C, d]: every chunk's pooled vector, computed in batches of chunks padded to one
    width that depends on each chunk's own length only (`padded_length`), so that a chunk's
    vector does not depend on the other texts embedded with it: in fp32 and int8 a text embedded
    alone (a query) gets bit for bit the vector it got inside an embedding run; in bf16 on an AMX CPU,
    within about 1e-3 (the kernel follows the row count, `padded_length`)."""
    seq_lengths = plan.lengths + lm.n_special  # [C]
    widths = np.minimum(padded_length(seq_lengths, pad_multiple), lm.max_length)  # [C]: never past the model's window
    batches = pack_batches(widths, batch_tokens=batch_tokens, max_batch_size=max_batch_size,
                           max_attention=getattr(lm.model, "max_attention", None))
    out = torch.empty(len(seq_lengths), lm.dim, dtype=torch.float32, device=lm.device)  # [C, d]
    total, done = int(seq_lengths.sum()), 0
    cuda = lm.device.type == "cuda"

    @torch.inference_mode()  # per thread: the batches may run in the engine's worker threads
    def forward(idx: np.ndarray) -> tuple[np.ndarray, torch.Tensor]:
        if should_stop is not None and should_stop():
            raise RunCancelledError("stopped on request")
        batch = build_batch(lm, tok, plan, idx, pooling, seq_width=int(widths[idx[0]]))
        if cuda:  # pinned host memory: the copy overlaps the previous batch's kernels
            batch = Batch(*(t.pin_memory().to(lm.device, non_blocking=True) for t in batch))
        hidden = lm.model(  # [B, L, d]
            input_ids=batch.input_ids, attention_mask=batch.attention_mask
        ).last_hidden_state
        if on_hidden is not None:  # the chunks' token states, before pooling (rows of disjoint chunks)
            on_hidden(idx, hidden)
        if pooling == "model":
            pooled = st_pool(hidden, batch.attention_mask, lm.st.pooling_modes)  # type: ignore[union-attr]
        else:
            pooled = pool_chunks(hidden, batch.pool_weights, pooling)
        return idx, (lm.st.apply(pooled) if lm.st is not None else pooled)

    with torch.inference_mode():
        for idx, pooled in in_order(forward, batches, workers=getattr(lm.model, "parallel_batches", 1)):
            out[torch.from_numpy(idx).to(lm.device)] = pooled
            done += int(seq_lengths[idx].sum())
            if on_tokens is not None:
                on_tokens(done, total)
    return out.cpu().numpy()


def in_order(run: Callable[[T], R], items: Iterable[T], *, workers: int) -> Iterator[R]:
    """`run(item)` for each item, the results in the items' order. With `workers` > 1, up to that many run at
    once in threads (for an engine that releases the GIL and runs several batches side by side: CTranslate2's
    `inter_threads`), at most 2 x workers started ahead of the one read; the rest are cancelled when the reader
    stops (an exception in `run`, raised where its result is read, or the reader's own)."""
    if workers <= 1:
        yield from map(run, items)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="embed-batch") as pool:
        pending: deque[Future[R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(run, item))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def effective_pooling(lm: LoadedModel, pooling: str) -> str:
    """'model' (the sentence-transformers Pooling module) when `lm` has one and `pooling` is the
    default 'mean'; otherwise `pooling` itself, checked against the model's Dense input size."""
    if lm.st is None:
        return pooling
    if pooling == "mean" and lm.st.pooling_modes:
        return "model"
    if lm.st.dense:
        hidden = int(lm.model.config.hidden_size)  # type: ignore[union-attr]
        wanted = int(lm.st.dense[0][0].in_features)
        if hidden != wanted:
            raise EmbedderInputError(
                f"pooling {pooling!r} gives {hidden} dimensions but the model's Dense takes {wanted}; "
                "use the model's own pooling ('mean')"
            )
    return pooling


def embed_texts(
    lm: LoadedModel,
    texts: Sequence[str],
    *,
    pooling: str = "mean",
    normalize: bool = True,
    batch_tokens: int | None = None,
    max_batch_size: int = 1024,
    on_tokens: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    pad_multiple: int = 1,
    token_states: bool = False,
) -> Embedded:
    """Chunk-and-average embeddings of `texts`, in input order; no token is dropped.

    `on_tokens(done, total)` reports tokens fed so far; `should_stop()` is polled per batch. `pad_multiple`
    (chunking.padded_length): an embedding run's and POST /passages pass their spec's; queries and labels,
    compared with a run's vectors but never equal to one, keep 1 whatever the run. `token_states`: also keep
    every content token's last hidden state from the same forward passes (`Embedded.tokens`); the vectors
    are the same either way.
    """
    pooling = effective_pooling(lm, pooling)
    tok = tokenize_texts(lm, texts)
    plan = chunk_token_windows(tok.n_tokens, lm.window)
    states = np.empty((len(tok.ids), lm.dim), dtype=np.float16) if token_states else None  # [T, d]: as stored

    def keep(idx: np.ndarray, hidden: torch.Tensor) -> None:
        rows = hidden.float().cpu().numpy()  # [B, L, d]
        p = len(lm.prefix_ids)
        for r, c in enumerate(idx.tolist()):
            n, first = int(plan.lengths[c]), int(tok.starts[plan.doc[c]] + plan.start[c])
            states[first:first + n] = rows[r, p:p + n]  # type: ignore[index]

    chunk_vecs = forward_chunks(
        lm, tok, plan, pooling=pooling, batch_tokens=batch_tokens or default_batch_tokens(lm.device),
        max_batch_size=max_batch_size, on_tokens=on_tokens, should_stop=should_stop, pad_multiple=pad_multiple,
        on_hidden=keep if token_states else None,
    )
    n_chunks = np.bincount(plan.doc, minlength=len(texts)).astype(np.int64)  # [D]
    vectors = np.zeros((len(texts), lm.dim), dtype=np.float32)  # [D, d]
    np.add.at(vectors, plan.doc, chunk_vecs)
    vectors /= n_chunks[:, None]
    if normalize:
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    char_start, char_end = chunk_char_spans(tok.offsets, plan)
    chunks = ChunkVectors(
        doc=plan.doc, token_start=plan.start.astype(np.int32), token_end=plan.end.astype(np.int32),
        char_start=char_start, char_end=char_end, vectors=chunk_vecs,
    )
    n_tokens = tok.n_tokens + n_chunks * lm.n_special
    tokens = None if states is None else TokenStates(states, tok.starts, tok.offsets)
    return Embedded(vectors=vectors, chunks=chunks, n_chunks=n_chunks, n_tokens=n_tokens, tokens=tokens)


def chunk_char_spans(offsets: list[list[tuple[int, int]]], plan: ChunkPlan) -> tuple[np.ndarray, np.ndarray]:
    """int32 [C] character start and end of each chunk (0, 0 for an empty one), for highlighting."""
    starts = np.zeros(len(plan.doc), dtype=np.int32)
    ends = np.zeros(len(plan.doc), dtype=np.int32)
    for c, (d, s, e) in enumerate(zip(plan.doc.tolist(), plan.start.tolist(), plan.end.tolist())):
        if e > s:
            starts[c], ends[c] = offsets[d][s][0], offsets[d][e - 1][1]
    return starts, ends
