"""The house's shape (issue 17), checked on the source: no import cycles between the package's
modules, no function-level imports of the package's own modules (the way cycles get hidden),
every experiment fulfils the contract, and ``config.py`` of each experiment is a leaf."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from thesis_repro.experiment import NAMES, Experiment, experiment

PACKAGE = Path(__file__).resolve().parents[1] / "thesis_repro"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom) -> list[str]:
    """The package's modules that ``from X import a, b`` in ``module`` loads."""
    if node.level:  # relative import
        base = module.split(".")[: -node.level] if not module.endswith("__init__") else []
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    found = [source] if source in MODULES else []
    found += [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in MODULES]
    return found


def _import_nodes(tree: ast.AST, in_functions: bool) -> list[ast.AST]:
    """Import statements that run when the module is imported (``in_functions`` False) or
    those inside functions (True); ``if TYPE_CHECKING:`` blocks never run and are skipped."""
    found: list[ast.AST] = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test) == "TYPE_CHECKING":
                continue
            function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and inside == in_functions:
                found.append(child)
            walk(child, inside or function)

    walk(tree, False)
    return found


def _imports(module: str, in_functions: bool = False) -> set[str]:
    """The package's modules that ``module`` imports when imported (or inside functions)."""
    found: set[str] = set()
    for node in _import_nodes(ast.parse(MODULES[module].read_text()), in_functions):
        if isinstance(node, ast.ImportFrom):
            found.update(_resolve(module, node))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
    # importing a.b.c runs a/__init__ and a/b/__init__ too
    parents = {".".join(m.split(".")[:i]) for m in found for i in range(1, m.count(".") + 1)}
    return (found | parents) - {module, "thesis_repro"}


def test_no_import_cycles() -> None:
    graph = {m: _imports(m) for m in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for child in sorted(graph[module]):
            if state.get(child) == 1:
                # a package's __init__ importing its own submodules is how packages work; a
                # submodule importing its package back (or a sibling that does) is a cycle
                cycle = [*path[path.index(child) :], child]
                if not all(m.startswith(child + ".") or m == child for m in cycle):
                    pytest.fail("import cycle: " + " -> ".join(cycle))
            elif child not in state:
                visit(child, [*path, child])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])


def test_no_function_level_imports_of_the_package() -> None:
    hidden = {m: found for m in MODULES if (found := sorted(_imports(m, in_functions=True)))}
    assert not hidden, f"imports inside functions: {hidden}"


def test_modules_stay_readable() -> None:
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("name", NAMES)
def test_every_experiment_fulfils_the_contract(name: str) -> None:
    exp = experiment(name)
    assert isinstance(exp, Experiment) and exp.name == name
    assert exp.package == f"thesis_repro.{name}" and exp.package in MODULES
    assert {"smoke", "cpu", "paper"} <= set(exp.presets)
    runs = exp.runs("smoke")
    assert runs and all(exp.describe(config) for config in runs)
    paths = {exp.record_path(config, Path("r")) for config in runs}
    assert len(paths) == len(runs), "every run has its own record"
    assert all(p.suffix == ".json" and p.parts[:2] == ("r", name) for p in paths)
    for file in ("config", "model", "train", "report", "cli", "__main__"):
        assert f"thesis_repro.{name}.{file}" in MODULES, f"{name} has no {file}.py"
    # config.py is a leaf of its package: it imports nothing else of it
    own = {m for m in _imports(f"thesis_repro.{name}.config") if m.startswith(exp.package)}
    assert not own, f"{name}/config.py imports {own}"
    # report.py renders from records alone: it never imports the training or the models
    report = _imports(f"thesis_repro.{name}.report")
    assert not report & {f"{exp.package}.train", f"{exp.package}.model"}


def test_unknown_experiment_is_named() -> None:
    with pytest.raises(ValueError, match="ffattention, addition, lm"):
        experiment("nope")
