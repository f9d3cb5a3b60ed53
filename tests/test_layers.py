"""The house's layers, read from the source: contracts → artifacts → services → gateway → bench,
no import running back up, no import circle, and the gateway reaching service code only through
its embedded-mode wiring (`gateway/embedded.py`).

Imports are read with `ast`, every one of them: at module level, inside functions (lazy), and
under `if TYPE_CHECKING:` — a circle hidden in a function or a type-only import is still a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("contracts", "artifacts", "services", "gateway", "bench")
LAYER = {name: i for i, name in enumerate(PACKAGES)}
EMBEDDED_WIRING = "gateway.embedded"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imported_names(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module name `source` imports, anywhere in it (`from a import b` yields a and a.b:
    b may be a module), plus every string constant that names one (importlib's targets)."""
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.split(".")[0] in PACKAGES and node.value.replace(".", "").replace("_", "").isalnum():
                names.add(node.value)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports (names that are not modules resolve to their package)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_names(path.read_text(), name, is_package=path.name == "__init__.py"):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(project_modules())


def test_no_import_circle(graph: dict[str, set[str]]) -> None:
    assert circles(graph) == []


@pytest.mark.parametrize(("a", "b"), [
    ("gateway.domain.auth.accounts", "gateway.domain.auth.service"),
    ("gateway.domain.concepts.baselines", "gateway.domain.concepts.scope"),
    ("gateway.domain.jobs.handlers", "gateway.domain.jobs.runner"),
])
def test_the_old_circles_run_one_way(graph: dict[str, set[str]], a: str, b: str) -> None:
    assert a in graph and b in graph
    assert not (b in graph[a] and a in graph[b]), f"{a} and {b} import each other"


def test_the_job_registry_is_imported_by_no_stage_nor_the_runner(graph: dict[str, set[str]]) -> None:
    registry = "gateway.domain.jobs.handlers"
    users = sorted(name for name, targets in graph.items() if registry in targets)
    assert users == ["gateway.app", "gateway.worker"]


def test_no_import_runs_back_up_a_layer(graph: dict[str, set[str]]) -> None:
    upward = [(name, target) for name, targets in graph.items() for target in targets
              if LAYER[target.split(".")[0]] > LAYER[name.split(".")[0]]]
    assert upward == []


def test_services_import_no_other_service(graph: dict[str, set[str]]) -> None:
    def service(name: str) -> str | None:
        parts = name.split(".")
        return parts[1] if parts[0] == "services" and len(parts) > 2 else None

    crossing = [(name, target) for name, targets in graph.items() for target in targets
                if service(name) and service(target) and service(name) != service(target)]
    assert crossing == []


def test_the_gateway_reaches_service_code_only_through_its_embedded_wiring(graph: dict[str, set[str]]) -> None:
    reaching = sorted(name for name, targets in graph.items()
                      if name.startswith("gateway") and any(t.startswith("services") for t in targets))
    assert reaching == [EMBEDDED_WIRING]


def test_the_checks_see_lazy_type_only_and_importlib_imports() -> None:
    """The scanner and the circle finder can fail: a circle through a function-level import and a
    TYPE_CHECKING one, and a string handed to importlib, are all found."""
    modules = {"gateway.a": "if TYPE_CHECKING:\n    from gateway.b import X\n",
               "gateway.b": "def f():\n    from gateway import a\n",
               "gateway.c": "import importlib\nimportlib.import_module('services.sae.app')\n"}
    found = {name: imported_names(src, name) for name, src in modules.items()}
    assert "gateway.b" in found["gateway.a"] and "gateway.a" in found["gateway.b"]
    assert "services.sae.app" in found["gateway.c"]
    assert circles({"gateway.a": {"gateway.b"}, "gateway.b": {"gateway.a"}, "gateway.c": set()}) == [
        ["gateway.a", "gateway.b"]]
    assert circles({"gateway.a": {"gateway.b"}, "gateway.b": set()}) == []
