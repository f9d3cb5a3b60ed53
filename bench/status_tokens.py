"""probe_tokens of bench/status.py (issue #16 item 3, measured there): an SAE on token hidden states."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

# --- probe_tokens: an SAE on token hidden states (issue #16 item 3, measured here) ------------
def token_states(ds: Any, seg: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """float16 [T, d] last hidden state of every content token of every segment (each segment run
    through the model on its own, as its segment vector was) and the segment of each [T] (cached)."""
    from services.embedder.chunking import chunk_token_windows, pack_batches
    from services.embedder.encoder import build_batch, tokenize_texts

    from status_core import CACHE, _cache_key, _model

    path = CACHE / f"status-{ds.name}-tokens-{_cache_key(ds)}.npz"
    if path.exists():
        with np.load(path) as z:
            return z["x"], z["owner"], float(z["seconds"])
    t0 = time.perf_counter()
    lm = _model()
    pieces = [ds.texts[d][a:b] for d, a, b in zip(seg.position.tolist(), seg.char_start.tolist(), seg.char_end.tolist())]
    tok = tokenize_texts(lm, pieces)
    plan = chunk_token_windows(tok.n_tokens, lm.window)
    p = len(lm.prefix_ids)
    states, owner = [], []
    with torch.inference_mode():
        for idx in pack_batches(plan.lengths + lm.n_special, batch_tokens=16384, max_batch_size=1024):
            b = build_batch(lm, tok, plan, idx, "mean")
            hidden = lm.model(input_ids=b.input_ids, attention_mask=b.attention_mask).last_hidden_state.float()
            for j, c in enumerate(idx):
                n = int(plan.lengths[c])
                states.append(hidden[j, p:p + n].numpy().astype(np.float16))
                owner.append(np.full(n, plan.doc[c], dtype=np.int64))
    x, who = np.concatenate(states), np.concatenate(owner)
    order = np.argsort(who, kind="stable")
    seconds = time.perf_counter() - t0
    np.savez(path, x=x[order], owner=who[order], seconds=seconds)
    return x[order], who[order], seconds


def token_codes(x: np.ndarray, owner: np.ndarray, seg: Any, split: Any, n_docs: int) -> tuple[dict, Any, Any]:
    """The token SAE (unit-norm states `x` [T, d] of the segments `owner` [T]; trained on the
    training rows' tokens, its FVU on at most 50,000 held-out ones) and (its description, codes
    max-pooled to segments [S, n], then to documents [n_docs, n])."""
    from services.sae.encoding import encode_all, max_pool_rows
    from status_core import train_sae

    in_train = np.isin(seg.position[owner], split.train)
    hold = np.flatnonzero(~in_train)
    hold = np.random.default_rng(0).choice(hold, min(len(hold), 50_000), replace=False)
    sae, info = train_sae(x[in_train], x[np.sort(hold)])
    segment_codes = max_pool_rows(encode_all(sae, x), owner, len(seg.position))
    return info, segment_codes, max_pool_rows(segment_codes, seg.position, n_docs)


def run_tokens(ds: Any, split: Any, seg: Any, out: dict) -> dict:
    from status_core import run_probe, stage

    with stage(out, "embed_tokens"):
        x16, owner, seconds = token_states(ds, seg)
    out["stages"]["embed_tokens"]["embedding_seconds"] = round(seconds, 1)
    with stage(out, "sae_tokens"):
        x = x16.astype(np.float32)
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-6)
        out["sae_tokens"], _, codes = token_codes(x, owner, seg, split, len(ds.texts))
        out["sae_tokens"]["tokens"] = len(x)
    with stage(out, "probe_tokens"):
        return run_probe(codes, ds, split)
