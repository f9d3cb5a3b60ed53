"""Versioned prompt templates: `<name>.v<N>.txt`, a system part, a line `---`, a user part.

Placeholders are `string.Template`'s `$name` (braces stay free for JSON examples). A template
file never changes once released: a new wording is a new version, so that every stored
interpretation says which prompt produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template

SEPARATOR = "\n---\n"


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    """'name_feature.v1': stored with each interpretation."""
    system: Template
    user: Template

    def messages(self, **values: object) -> list[dict[str, str]]:
        """Chat messages with every `$placeholder` filled (a missing one raises KeyError)."""
        return [{"role": "system", "content": self.system.substitute(values)},
                {"role": "user", "content": self.user.substitute(values)}]


@lru_cache
def load_prompt(name: str, version: int = 1) -> Prompt:
    """The template `prompts/<name>.v<version>.txt`."""
    text = resources.files(__package__).joinpath(f"{name}.v{version}.txt").read_text(encoding="utf-8")
    system, sep, user = text.partition(SEPARATOR)
    if not sep:
        raise ValueError(f"prompt {name}.v{version}: no '---' line between system and user parts")
    return Prompt(name, f"{name}.v{version}", Template(system.strip()), Template(user.strip()))


def _numbered(texts: list[str], max_chars: int) -> str:
    return "\n".join(f"{i + 1}. {' '.join(t.split())[:max_chars]}" for i, t in enumerate(texts)) or "(none)"


def naming_messages(prompt: Prompt, *, activating: list[str], non_activating: list[str], hints: list[str],
                    n: int, max_docs: int = 12, max_chars: int = 600, language: str = "English") -> list[dict[str, str]]:
    """The naming prompt with at most `max_docs` excerpts a side, each cut to `max_chars`; v2 and later
    ask for names in `language` (v1 has no such placeholder and ignores it)."""
    return prompt.messages(activating=_numbered(activating[:max_docs], max_chars),
                           non_activating=_numbered(non_activating[:max_docs], max_chars),
                           hints=", ".join(hints) or "(none)", n=n, language=language)


def detect_messages(prompt: Prompt, *, label: str, description: str | None, document: str,
                    max_chars: int = 1200) -> list[dict[str, str]]:
    return prompt.messages(label=label, description=f"({description})" if description else "",
                           document=" ".join(document.split())[:max_chars])


def family_messages(prompt: Prompt, *, parent: str, children: list[str], n: int) -> list[dict[str, str]]:
    return prompt.messages(parent=parent, children="\n".join(f"- {c}" for c in children) or "(none)", n=n)
