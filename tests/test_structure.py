"""The package's structure, checked: imports never run in a circle, a module is read in one sitting,
a function fits on a screen, and every default is stated once (line lengths and the rest of the style
are ruff's, run by ``make test``).

A module's size counts every line (its docstrings, comments and blank lines too); a function's counts lines
of code: its docstrings, comments and blank lines are documentation, not length.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "labeldp"
#: lines of a module, every line counted, and lines of code (as ruff formats them) of a function, at most
MODULE_LINES, FUNCTION_LINES = 500, 80
#: functions allowed to be longer, each with its reason
LONG_FUNCTIONS: dict[str, str] = {}
#: modules allowed to be longer, each with its reason and its own limit
LONG_MODULES: dict[str, tuple[str, int]] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """The lines of ``if TYPE_CHECKING:`` blocks (imports for type hints only: not run)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def _imports(module: str, path: Path) -> set[str]:
    """The labeldp modules ``module`` imports when it runs (at module level or inside a function)."""
    tree = ast.parse(path.read_text())
    hidden = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", 0) in hidden:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for alias in node.names:  # a name that is a submodule is an import of that submodule
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {name for name in found if name in MODULES and name != module}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_imports_never_run_in_a_circle() -> None:
    graph = {module: _imports(module, path) for module, path in MODULES.items()}
    assert _cycles(graph) == []


def _code_lines(lines: list[str], first: int, last: int, documentation: set[int]) -> int:
    return sum(
        1
        for number in range(first, last + 1)
        if lines[number - 1].strip() and not lines[number - 1].strip().startswith("#") and number not in documentation
    )


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_is_read_in_one_sitting_and_a_function_fits_on_a_screen(module: str) -> None:
    path = MODULES[module]
    text = path.read_text()
    lines, tree = text.split("\n"), ast.parse(text)
    documentation = _docstring_lines(tree)
    limit = LONG_MODULES.get(module, ("", MODULE_LINES))[1]
    assert len(text.splitlines()) <= limit, f"{module}: {len(text.splitlines())} lines, split it by job"
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{module}.{node.name}"
            length = _code_lines(lines, node.lineno, node.end_lineno, documentation)
            assert length <= FUNCTION_LINES or name in LONG_FUNCTIONS, f"{name}: {length} lines of code"


def test_each_default_is_stated_once() -> None:
    """The defaults that used to be stated in several places have one home each, and every place that
    needs one reads it from there: the options' defaults in their dataclass fields, the rest here."""
    from labeldp.config.auditing import DEFAULT_SHADOWS
    from labeldp.config.run_config import RunConfig
    from labeldp.config.tuning import DEFAULT_HOLDOUT, SELECTION_DEFAULTS
    from labeldp.tables.table_batches import DEFAULT_BATCH_ROWS

    sources = {module: path.read_text() for module, path in MODULES.items()}
    for literal, home in (
        ("DEFAULT_DELTA = 1e-5", "labeldp.config.run_settings"),
        ("delta=1e-5", None),
        ("DEFAULT_BATCH_ROWS = 1 << 20", "labeldp.tables.table_batches"),
        ("DEFAULT_HOLDOUT = 0.2", "labeldp.config.tuning"),
        ("holdout: float = 0.2", None),
        ("DEFAULT_SHADOWS = 4", "labeldp.config.auditing"),
        ("num_shadows: int = 4", None),
        ('"score_noise": 10.0', "labeldp.config.tuning"),
        ("epsilon / 10", None),
    ):
        stated = [module for module, text in sources.items() if literal in text]
        assert stated == ([home] if home else []), (literal, stated)
    assert DEFAULT_BATCH_ROWS and DEFAULT_HOLDOUT and DEFAULT_SHADOWS and SELECTION_DEFAULTS
    assert all(field.metadata.get("help") for field in dataclasses.fields(RunConfig))  # each option documented


def test_a_module_is_found_by_its_name() -> None:
    """No two modules of the package share a file name (``__init__`` and ``__main__`` aside)."""
    by_name: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if path.stem not in ("__init__", "__main__"):
            by_name.setdefault(path.stem, []).append(module)
    assert not {name: found for name, found in by_name.items() if len(found) > 1}


TESTS = PACKAGE.parents[1] / "tests"
#: the map of the modules without a test file of their name: a row per module, the test files that exercise it
MODULE_MAP = TESTS / "MODULES.md"
_ROW = re.compile(r"^\| `([\w/]+\.py)` \| (.+) \|$")


def _mapped() -> dict[str, list[str]]:
    """MODULES.md's rows: each module's path under src/labeldp, and the test files its row names."""
    rows = [_ROW.match(line) for line in MODULE_MAP.read_text().splitlines() if line.startswith("| `")]
    assert all(rows), "a row of tests/MODULES.md is | `module.py` | `tests/...py`, ... |"
    return {row[1]: re.findall(r"`(tests/[\w/]+\.py)`", row[2]) for row in rows if row}


def _has_own_test_file(path: Path, named: set[str]) -> bool:
    """A module's file is test_<module>.py anywhere under tests/ (module names are unique); a package's
    is test_<package>.py in the package's own test folder (tests/cli/test_cli.py)."""
    if path.stem != "__init__":
        return f"test_{path.stem}.py" in named
    return (TESTS / path.parent.relative_to(PACKAGE) / f"test_{path.parent.name}.py").is_file()


def test_each_module_has_a_test_file_of_its_name_or_a_row_in_the_map() -> None:
    """A module's tests are found by its name, or MODULES.md says where they are, and the map cannot rot."""
    named = {path.name for path in TESTS.rglob("test_*.py")}
    modules = {str(path.relative_to(PACKAGE)): path for path in MODULES.values()}
    mapped = _mapped()
    own = {module for module, path in modules.items() if _has_own_test_file(path, named)}
    assert sorted(set(modules) - own - set(mapped)) == [], "add a test file of its name, or a row to tests/MODULES.md"
    assert sorted(set(mapped) - set(modules)) == [], "rows of tests/MODULES.md for modules that are gone"
    assert sorted(set(mapped) & own) == [], "modules with a test file of their name: take their row out of the map"
    assert all(mapped.values()), "each row names a test file"
    missing = sorted({test for tests in mapped.values() for test in tests if not (TESTS.parent / test).is_file()})
    assert missing == [], "test files the map names that do not exist"
