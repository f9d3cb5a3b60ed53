"""torch's int8 CPU path: every Linear layer of the encoder as an int8 matrix product (fbgemm/oneDNN).

The int8 engine by default is CTranslate2 (`services/embedder/ct2.py`), faster on a CPU without VNNI;
this path runs a model CTranslate2 does not convert, or every model with
`PRISMA_EMBEDDER_INT8_ENGINE=torch`.

Weights: int8, one scale per output row (symmetric, `max|w| / 127`). Activations: quantised as
they come ("dynamic"), but *per token*, not per tensor as `torch.ao`'s `quantize_dynamic` does:
each row of x is divided by its own largest magnitude before the GEMM and the output multiplied
back. Why: a per-tensor scale is the largest activation of the whole batch, so a text's vector
would depend on the texts it is batched with, and the promise of `encoder.forward_chunks` (a text
alone gets bit for bit its vector in any batch: a query meets its stored document exactly, a
repeated segment is embedded once) would break. fbgemm still takes one range per call: two anchor
rows `[1, 0, ...]` and `[-1, 0, ...]` appended to every call pin it to [-1, 1], so each row's int8 values, the
exact int32 products and the per-element rescaling depend on that row alone. `reduce_range`
(7-bit activations) keeps AVX2's 16-bit pair sums from saturating, so every x86 CPU computes the
same integers. Attention, LayerNorm, GELU and pooling stay fp32.

The feed-forward block of each layer (`intermediate` → GELU → `output`) runs over the batch's token
rows in blocks of `FFN_BLOCK_ROWS` (`RowBlocks`): at the CPU budget of 8,192 tokens its [tokens,
1536] float32 intermediates are 50 MB each, above glibc's largest mmap threshold (32 MB), so every
one was a fresh mmap whose pages faulted in on first touch (a GELU over [8192, 1536] took 28 ms,
8 ms into reused memory); in blocks of 2,048 rows (12.6 MB) they come from the heap, reused. Every
operation of the block is per row, so the result is bit for bit the same (tested); on the demo's full
batches the int8 pass ran 1.23x faster over notes and 1.42x over clauses (bench/studies/results/ffn-blocks.json).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable

import torch
from torch import nn

PRECISION = "int8"
FFN_BLOCK_ROWS = 2048  # [2048, 1536] float32 = 12.6 MB: under glibc's 32 MB mmap threshold
MIN_COSINE = 0.99  # the quality bar of issue #29: cosine to fp32, 5th percentile (and median)
#: Short clinical clauses, Italian and English: where int8 loses most (few tokens to average over).
PROBE_TEXTS = (
    "Torace: MV fisiologico.", "Sospetta bronchiolite,", "esclusa polmonite.", "ma presente otite media;",
    "Tosse da 3 giorni,", "TC 38,5 °C.", "SatO2 95% in aria ambiente.", "Faringe iperemica.",
    "Non segni di disidratazione.", "Diagnosi: bronchiolite acuta.", "Terapia: paracetamolo al bisogno.",
    "Controllo tra 48 ore.", "Addome trattabile, non dolente.", "Rinorrea sierosa.", "Wheezing espiratorio.",
    "No EDEMA.", "Extremities reveal no peripheral cyanosis or edema.", "HYPERTENSION.",
    "Possible pneumonia,", "but no fever.", "History of asthma.", "Rule out appendicitis.",
    "The patient denies chest pain.", "Mother reports cough since Monday.",
)


def _pack(weight: torch.Tensor) -> object:
    """fbgemm's packed int8 weight [out, in], symmetric per output row."""
    w = weight.detach().float()
    scale = w.abs().amax(1).clamp_min(1e-12) / 127  # [out]
    zero = torch.zeros(len(scale), dtype=torch.int64)
    with warnings.catch_warnings():  # quantised tensor constructors warn of a future deprecation
        warnings.simplefilter("ignore")
        q = torch.quantize_per_channel(w, scale.double(), zero, axis=0, dtype=torch.qint8)
        return torch.ops.quantized.linear_prepack(q, None)


class RowScaledInt8Linear(nn.Module):
    """`linear` with int8 weights and per-row int8 activations (see the module docstring)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self._packed = _pack(linear.weight)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().float(), requires_grad=False)
        anchor = torch.zeros(2, linear.in_features)  # [2, in]
        anchor[0, 0], anchor[1, 0] = 1.0, -1.0
        self.register_buffer("anchor", anchor, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)  # [N, in]
        n = rows.shape[0]
        # max |x| per row as max(max x, -min x): the same number, two reads and no [N, in] temporary (2x faster)
        scale = torch.maximum(rows.amax(1, keepdim=True), rows.amin(1, keepdim=True).neg_()).clamp_min_(1e-30)  # [N, 1]
        pinned = torch.empty(n + 2, self.in_features, dtype=rows.dtype)  # [N + 2, in], every value in [-1, 1]
        torch.div(rows, scale, out=pinned[:n])  # written in place: no copy for the anchors (7 % of a pass)
        pinned[n:] = self.anchor
        out = torch.ops.quantized.linear_dynamic(pinned, self._packed, True)[:n].mul_(scale)  # [N, out]
        if self.bias is not None:
            out.add_(self.bias)
        return out.reshape(*x.shape[:-1], self.out_features)


class RowBlocks:
    """A layer's `feed_forward_chunk` (hidden [..., d] → [..., d], every operation per row) run over
    the rows in blocks of `rows`, into one output: the same numbers, smaller intermediates."""

    def __init__(self, feed_forward: Callable[[torch.Tensor], torch.Tensor], rows: int) -> None:
        self.feed_forward, self.rows = feed_forward, rows

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        flat = hidden.reshape(-1, hidden.shape[-1])  # [N, d]
        if len(flat) <= self.rows:
            return self.feed_forward(hidden)
        out = torch.empty_like(flat)  # [N, d]
        for start in range(0, len(flat), self.rows):
            out[start : start + self.rows] = self.feed_forward(flat[start : start + self.rows])
        return out.view_as(hidden)


def block_feed_forwards(model: nn.Module, rows: int = FFN_BLOCK_ROWS) -> list[nn.Module]:
    """Run each transformer layer's feed-forward block in row blocks (`RowBlocks`), where the
    layer has one (BERT, XLM-R, RoBERTa: `feed_forward_chunk` over `intermediate` and `output`);
    returns the layers changed."""
    layers = [m for m in model.modules() if hasattr(m, "intermediate") and hasattr(m, "output")
              and callable(getattr(m, "feed_forward_chunk", None))]
    for layer in layers:
        layer.feed_forward_chunk = RowBlocks(layer.feed_forward_chunk, rows)  # the instance's, over the method
    return layers


Swapped = tuple[list[tuple[nn.Module, str, nn.Linear]], list[nn.Module]]


def quantize_linears(model: nn.Module) -> Swapped:
    """Replace each nn.Linear of `model` (fp32, CPU) by `RowScaledInt8Linear` and block its
    feed-forwards (`block_feed_forwards`), in place; returns what `restore` undoes."""
    swapped = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, RowScaledInt8Linear(child))
                swapped.append((parent, name, child))
    return swapped, block_feed_forwards(model)


def restore(swapped: Swapped) -> None:
    linears, blocked = swapped
    for parent, name, linear in linears:
        setattr(parent, name, linear)
    for layer in blocked:
        del layer.feed_forward_chunk  # the class's method again


def mean_pooled(model: Callable[..., object], batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """float32 [B, d]: unit mean-pooled last hidden states of a tokenized, padded batch."""
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state.float()  # type: ignore[attr-defined]  # [B, L, d]
    mask = batch["attention_mask"].unsqueeze(-1).float()  # [B, L, 1]
    return nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1)


def probe_vectors(model: Callable[..., object], tokenizer: object) -> torch.Tensor:
    """float32 [len(PROBE_TEXTS), d]: `model`'s unit vectors of the probe clauses."""
    batch = tokenizer(list(PROBE_TEXTS), padding=True, return_tensors="pt",  # type: ignore[operator]
                      return_token_type_ids=False)
    return mean_pooled(model, batch)


def probe_cosine_p5(reference: torch.Tensor, candidate: torch.Tensor) -> float:
    """The 5th percentile of the cosines between the candidate's probe vectors and fp32's."""
    return float(torch.quantile((candidate * reference).sum(1), 0.05))


def stays_close(reference: torch.Tensor, candidate: torch.Tensor, min_cosine: float = MIN_COSINE) -> bool:
    """Whether the candidate's probe vectors keep cosine >= `min_cosine` with fp32's at the 5th percentile."""
    return probe_cosine_p5(reference, candidate) >= min_cosine


def probe_key(cpu: str) -> str:
    """Names a probe verdict: the probe texts and `cpu` (int8 kernels differ by instruction set)."""
    return hashlib.sha256("\0".join((*PROBE_TEXTS, cpu)).encode()).hexdigest()[:16]


def quantize_if_close(model: nn.Module, tokenizer: object, *, min_cosine: float = MIN_COSINE) -> bool:
    """Quantise `model` in place if, on PROBE_TEXTS, its int8 vectors keep cosine >= `min_cosine`
    with its fp32 ones at the 5th percentile; otherwise leave it fp32. Returns whether it did.
    What 'auto' does on a CPU without bf16 where CTranslate2 cannot take the model (ct2.py):
    e5-small keeps 0.996 (int8), MiniLM drops to 0.987 on short clauses (fp32) (bench/results/embed.json)."""
    reference = probe_vectors(model, tokenizer)
    swapped = quantize_linears(model)
    if stays_close(reference, probe_vectors(model, tokenizer), min_cosine):
        return True
    restore(swapped)
    return False
