"""The layout of benchmarks/: a family imports only itself and common/, nothing imports tests/,
and no module imports another that imports it back (read from the sources, nothing is run)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FAMILIES = {"common", "faults", "gpu", "parity", "quality", "security", "speed"}


def module_name(path: Path) -> str:
    parts = path.relative_to(BENCHMARKS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> set[str]:
    """Every module an import statement names, top-level or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in BENCHMARKS.rglob("*.py")}
    return {m: imported_names(p) & set(modules) - {m} for m, p in modules.items()}


def test_every_module_lives_in_a_family_folder() -> None:
    loose = [p.name for p in BENCHMARKS.glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"benchmarks/: scripts outside a family folder: {loose}"
    assert {p.name for p in BENCHMARKS.iterdir() if (p / "__init__.py").is_file()} == FAMILIES


def test_a_family_imports_only_itself_and_common_and_never_tests() -> None:
    wrong = []
    for path in BENCHMARKS.rglob("*.py"):
        family = module_name(path).split(".")[1] if path.parent != BENCHMARKS else None
        for name in imported_names(path):
            top = name.split(".")
            if top[0] in {"tests", "workflow_helpers", "peer_helpers", "fault_campaign"}:
                wrong.append(f"{path.relative_to(BENCHMARKS)} imports {name} (tests)")
            elif top[0] == "benchmarks" and len(top) > 1 and top[1] not in {family, "common"}:
                wrong.append(f"{path.relative_to(BENCHMARKS)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    graph = import_graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        assert module not in path, "import cycle: " + " -> ".join([*path, module])
        if module in done:
            return
        for other in sorted(graph[module]):
            visit(other, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert "benchmarks.gpu.context" in graph["benchmarks.gpu.sections"]  # the graph is read
