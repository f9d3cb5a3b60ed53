"""A sentence-transformers model directory, read without sentence-transformers.

`modules.json` lists the pipeline: a Transformer (at "" or "0_Transformer"), a Pooling module
(`1_Pooling/config.json`: which of cls / max / mean / mean_sqrt_len / weightedmean / lasttoken,
concatenated in sentence-transformers' order when several are set), optional Dense modules
(Linear + activation; weights `linear.weight`/`linear.bias` in model.safetensors or
pytorch_model.bin) and an optional Normalize. Prisma applies Pooling -> Dense -> Normalize to
each chunk's last hidden states, exactly as `SentenceTransformer.encode` does to a whole text.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from services.embedder.errors import EmbedderInputError

# sentence-transformers' Pooling.forward concatenates the modes in this order.
_MODES = (
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_weightedmean_tokens", "weightedmean"),
    ("pooling_mode_lasttoken", "lasttoken"),
)


@dataclass(eq=False)
class StHead:
    """What follows the transformer in a sentence-transformers pipeline."""

    transformer_path: Path  # the directory holding the encoder's config.json and weights
    pooling_modes: tuple[str, ...]  # empty: modules.json has no Pooling module
    dense: list[torch.nn.Module] = field(default_factory=list)  # Linear + activation, in order
    normalize: bool = False
    max_seq_length: int | None = None
    do_lower_case: bool = False

    def out_dim(self, hidden: int) -> int:
        if self.dense:
            return int(self.dense[-1][0].out_features)
        return hidden * max(1, len(self.pooling_modes))

    def to(self, device: torch.device) -> StHead:
        self.dense = [d.to(device=device, dtype=torch.float32).eval() for d in self.dense]
        return self

    def apply(self, pooled: torch.Tensor) -> torch.Tensor:
        """float32 [B, d_out] from pooled float32 [B, d]: Dense layers, then Normalize if listed."""
        for layer in self.dense:
            pooled = layer(pooled)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled


def st_pool(hidden: torch.Tensor, attention_mask: torch.Tensor, modes: tuple[str, ...]) -> torch.Tensor:
    """float32 [B, k*d]: sentence-transformers' Pooling of hidden [B, L, d] (right padding)."""
    h = hidden.float()
    mask = attention_mask.unsqueeze(-1).float()  # [B, L, 1]
    count = mask.sum(1).clamp(min=1e-9)  # [B, 1]
    out = []
    for mode in modes:
        if mode == "cls":
            out.append(h[:, 0])
        elif mode == "max":
            out.append(h.masked_fill(mask == 0, -1e9).max(1).values)
        elif mode == "mean":
            out.append((h * mask).sum(1) / count)
        elif mode == "mean_sqrt_len":
            out.append((h * mask).sum(1) / count.sqrt())
        elif mode == "weightedmean":
            w = torch.arange(1, h.shape[1] + 1, device=h.device, dtype=h.dtype)[None, :, None] * mask
            out.append((h * w).sum(1) / w.sum(1).clamp(min=1e-9))
        elif mode == "lasttoken":
            last = attention_mask.sum(1).long() - 1  # [B]
            out.append(h[torch.arange(h.shape[0], device=h.device), last])
    return torch.cat(out, dim=1)


def lowercase_first(tokenizer: object) -> None:
    """`do_lower_case`: a Lowercase normalizer ahead of the fast tokenizer's own, as
    sentence-transformers 6 does; unlike lower-casing the text first, the character offsets
    (the chunks' and segments' highlighted spans) stay those of the original text."""
    from tokenizers.normalizers import Lowercase
    from tokenizers.normalizers import Sequence as NormalizerSequence

    backend = tokenizer.backend_tokenizer  # type: ignore[attr-defined]
    own = backend.normalizer
    rest = list(own) if isinstance(own, NormalizerSequence) else [own] if own is not None else []
    backend.normalizer = NormalizerSequence([Lowercase(), *rest])


def _activation(name: str | None) -> torch.nn.Module:
    """`torch.nn.modules.activation.Tanh` -> Tanh(); only torch.nn classes are accepted."""
    if not name or name.endswith(".Identity"):
        return torch.nn.Identity()
    module, _, cls = name.rpartition(".")
    if not module.startswith("torch.nn"):
        raise EmbedderInputError(f"Dense activation {name!r}: only torch.nn activations are supported")
    return getattr(importlib.import_module(module), cls)()


def _dense(folder: Path) -> torch.nn.Module:
    cfg = json.loads((folder / "config.json").read_text())
    linear = torch.nn.Linear(int(cfg["in_features"]), int(cfg["out_features"]), bias=bool(cfg.get("bias", True)))
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").is_file():
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise EmbedderInputError(f"Dense module {folder}: no model.safetensors or pytorch_model.bin")
    linear.load_state_dict({k.removeprefix("linear."): v for k, v in state.items() if k.startswith("linear.")})
    return torch.nn.Sequential(linear, _activation(cfg.get("activation_function")))


_MODE_NAMES = {"cls": "cls", "cls_token": "cls", "max": "max", "max_tokens": "max", "mean": "mean",
               "mean_tokens": "mean", "mean_sqrt_len_tokens": "mean_sqrt_len", "mean_sqrt_len": "mean_sqrt_len",
               "weightedmean": "weightedmean", "weightedmean_tokens": "weightedmean", "lasttoken": "lasttoken"}


def _pooling_modes(cfg: dict) -> tuple[str, ...]:
    """The Pooling config's modes: booleans `pooling_mode_*` (sentence-transformers < 6) or a
    `pooling_mode` name or list (>= 6)."""
    named = cfg.get("pooling_mode")
    if named:
        names = [named] if isinstance(named, str) else list(named)
        try:
            wanted = {_MODE_NAMES[n] for n in names}
        except KeyError as exc:
            raise EmbedderInputError(f"Pooling mode {exc.args[0]!r} is not supported") from None
        return tuple(mode for _, mode in _MODES if mode in wanted)
    return tuple(mode for key, mode in _MODES if cfg.get(key))


def read_st_head(path: Path) -> StHead | None:
    """The pipeline of a sentence-transformers directory; None when it has no modules.json."""
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    modules = json.loads(modules_file.read_text())
    transformer_path, modes, dense, normalize = path, (), [], False
    for m in modules:
        kind = m.get("type", "").rsplit(".", 1)[-1]
        folder = path / m.get("path", "")
        if kind == "Transformer":
            transformer_path = folder
        elif kind == "Pooling":
            cfg = json.loads((folder / "config.json").read_text())
            modes = _pooling_modes(cfg)
        elif kind == "Dense":
            dense.append(_dense(folder))
        elif kind == "Normalize":
            normalize = True
        else:
            raise EmbedderInputError(f"{modules_file}: module type {m.get('type')!r} is not supported")
    st_config: dict = {}
    for candidate in (transformer_path / "sentence_bert_config.json", path / "sentence_bert_config.json"):
        if candidate.is_file():
            st_config = json.loads(candidate.read_text())
            break
    max_seq = st_config.get("max_seq_length")
    return StHead(transformer_path=transformer_path, pooling_modes=modes, dense=dense, normalize=normalize,
                  max_seq_length=int(max_seq) if max_seq else None,
                  do_lower_case=bool(st_config.get("do_lower_case", False)))
