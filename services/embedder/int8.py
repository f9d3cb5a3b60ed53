"""The int8 CPU path: every Linear layer of the encoder as an int8 matrix product (fbgemm/oneDNN).

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
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

PRECISION = "int8"
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
        scale = rows.abs().amax(1, keepdim=True).clamp_min_(1e-30)  # [N, 1]
        pinned = torch.empty(n + 2, self.in_features, dtype=rows.dtype)  # [N + 2, in], every value in [-1, 1]
        torch.div(rows, scale, out=pinned[:n])  # written in place: no copy for the anchors (7 % of a pass)
        pinned[n:] = self.anchor
        out = torch.ops.quantized.linear_dynamic(pinned, self._packed, True)[:n].mul_(scale)  # [N, out]
        if self.bias is not None:
            out.add_(self.bias)
        return out.reshape(*x.shape[:-1], self.out_features)


def quantize_linears(model: nn.Module) -> list[tuple[nn.Module, str, nn.Linear]]:
    """Replace each nn.Linear of `model` (fp32, CPU) by `RowScaledInt8Linear`, in place; returns
    (parent, name, the fp32 layer) of each, for `restore`."""
    swapped = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, RowScaledInt8Linear(child))
                swapped.append((parent, name, child))
    return swapped


def restore(swapped: list[tuple[nn.Module, str, nn.Linear]]) -> None:
    for parent, name, linear in swapped:
        setattr(parent, name, linear)


def mean_pooled(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """float32 [B, d]: unit mean-pooled last hidden states of a tokenized, padded batch."""
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state.float()  # [B, L, d]
    mask = batch["attention_mask"].unsqueeze(-1).float()  # [B, L, 1]
    return nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1)


def quantize_if_close(model: nn.Module, tokenizer: object, *, min_cosine: float = MIN_COSINE) -> bool:
    """Quantise `model` in place if, on PROBE_TEXTS, its int8 vectors keep cosine >= `min_cosine`
    with its fp32 ones at the 5th percentile; otherwise leave it fp32. Returns whether it did.
    What 'auto' does on a CPU without bf16: e5-small keeps 0.996 (int8), MiniLM drops to 0.987 on
    short clauses (fp32) (bench/results/embed.json)."""
    batch = tokenizer(list(PROBE_TEXTS), padding=True, return_tensors="pt",  # type: ignore[operator]
                      return_token_type_ids=False)
    reference = mean_pooled(model, batch)
    swapped = quantize_linears(model)
    cosine = (mean_pooled(model, batch) * reference).sum(1)  # [B]
    if float(torch.quantile(cosine, 0.05)) >= min_cosine:
        return True
    restore(swapped)
    return False
