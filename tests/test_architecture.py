"""docs/ARCHITECTURE.md, kept true: a map on one screen (at most 1,500 words, a line a layer), whose
every labeldp name exists, and whose picture and table of layers are the imports' own order.

A name is what the page puts in backticks (a module or file, ``boundary/release.py``; a class, a
function or a constant, ``PrivateLabels``, ``release_*``; a dotted name, ``labeldp.accounting.PrivacyLedger``,
``RunContext.spend``; a command, ``labeldp tune``), and, in its picture and its prose, what looks
like one (a ``.py`` file, a ``labeldp.`` name; in the picture also a CamelCase or snake_case word).
Files resolve against src/labeldp (or the repository, for ``tests/``, ``examples/``...); names against
the package's syntax trees (a def, a class, an assignment, a class's field or ``self.`` attribute) or,
for a dotted name under a module (``config.run_config``, ``one_release.release_once``), by importing it. A
word in backticks that is no labeldp name fails too: take it out of the backticks, or, for another
project's name, add it to :data:`ELSEWHERE`.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import re
from functools import cache
from pathlib import Path

import pytest

from tests.test_structure import MODULES, _imports

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "labeldp"
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
#: the page's length in words, as ``wc -w`` counts them, at most
MAX_WORDS = 1500
#: a row of the table of layers, at most (a line, not a paragraph)
MAX_ROW_WORDS = 30
#: folders of the repository a path may start with (any other path is the package's)
REPOSITORY_FOLDERS = ("tests/", "examples/", "benchmarks/", "docs/")
#: names of other projects the page may mention
ELSEWHERE = frozenset({"dp_accounting"})
#: what a backticked token is when it is no name: a file the package writes (``summary.json``)
DATA_FILE = re.compile(r"\.(json|jsonl|npz|pt|pt2|csv|parquet|md|toml|yml|yaml|lock)$")
NAME = re.compile(r"^[A-Za-z_][\w.*/]*(\(.*\))?$")
#: a command of the command line: ``labeldp tune``, ``labeldp hashed train``
COMMAND = re.compile(r"^labeldp [a-z]+\b")
#: in the picture and the prose: a file, a labeldp name; in the picture also a CamelCase or snake_case word
PROSE_NAME = re.compile(r"(?<![\w/.])(?:[\w/]+\.py\b|labeldp(?:\.\w+)+)")
PICTURE_NAME = re.compile(
    r"(?<![\w/.])(?:[\w/]+\.py\b|[A-Za-z_]\w*\.\w+|_*[a-z]\w*_[\w*]+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?![\w.])"
)


def _page() -> str:
    return PAGE.read_text()


@cache
def _definitions() -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """Every name the package defines (a def or class anywhere; an assignment at a module's or a
    class's top level), and each class name's members (its defs, fields, ``self.`` attributes)."""
    defined: set[str] = set()
    members: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            if isinstance(node, (ast.Module, ast.ClassDef)):
                defined.update(_assigned(node.body))
            if isinstance(node, ast.ClassDef):
                own = members.setdefault(node.name, set())
                own.update(_assigned(node.body))
                for child in ast.walk(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        own.add(child.name)
                    elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store):
                        if isinstance(child.value, ast.Name) and child.value.id in ("self", "cls"):
                            own.add(child.attr)
    return frozenset(defined), {name: frozenset(names) for name, names in members.items()}


def _assigned(body: list[ast.stmt]) -> set[str]:
    names = set()
    for statement in body:
        targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def _module_stems() -> set[str]:
    return {name.rsplit(".", 1)[-1] for name in MODULES}


def _in_module(module: str, rest: list[str]) -> bool:
    """Whether ``module`` has ``rest[0]`` (imported, so that lazy exports count), and that class the
    member ``rest[1]``."""
    if not rest:
        return True
    found = getattr(importlib.import_module(module), rest[0], None)
    if found is None or len(rest) == 1:
        return found is not None
    return len(rest) == 2 and (hasattr(found, rest[1]) or rest[1] in _definitions()[1].get(rest[0], ()))


def exists(token: str) -> bool:
    """Whether the name ``token`` (a file, a folder, a command, a name, a dotted name, a ``release_*``
    pattern) exists in labeldp."""
    if COMMAND.match(token):  # a command: its module in cli/
        return (PACKAGE / "cli" / f"{token.split()[1]}.py").is_file()
    token = token.split("(", 1)[0]
    if "/" in token or token.endswith(".py"):
        relative = token.removeprefix("src/").removeprefix("labeldp/")
        if relative.startswith(REPOSITORY_FOLDERS):
            return (ROOT / relative).exists()
        if "/" not in relative:
            return any(PACKAGE.rglob(relative))
        return (PACKAGE / relative).is_dir() if relative.endswith("/") else (PACKAGE / relative).is_file()
    defined, members = _definitions()
    if "*" in token:
        return bool(fnmatch.filter(defined, token))
    parts = token.split(".")
    if parts[0] == "labeldp":
        parts = parts[1:]
    if not parts:
        return True
    for cut in range(len(parts), 0, -1):  # the longest module it starts with, from labeldp or within a package
        prefix = ".".join(parts[:cut])
        within = sorted(module for module in MODULES if module == f"labeldp.{prefix}" or module.endswith(f".{prefix}"))
        if within:
            return any(_in_module(module, parts[cut:]) for module in within)
    if len(parts) == 2:
        return parts[1] in members.get(parts[0], ())
    return len(parts) == 1 and (parts[0] in defined or parts[0] in _module_stems())


def _picture(text: str) -> str:
    """The page's picture: its first code block (none: empty)."""
    found = re.search(r"^```text\n(.*?)^```", text, re.S | re.M)
    return found.group(1) if found else ""


def names(text: str) -> set[str]:
    """The names a page cites: in backticks outside code blocks, and what looks like one in its
    picture and its prose."""
    picture = _picture(text)
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found = set(PICTURE_NAME.findall(picture)) | set(PROSE_NAME.findall(re.sub(r"\]\([^)]*\)", "]", prose)))
    for token in re.findall(r"`([^`\n]+)`", prose):
        if COMMAND.match(token) or (NAME.match(token) and not DATA_FILE.search(token)):
            found.add(token)
    return {name for name in found if name not in ELSEWHERE}


def missing(text: str) -> list[str]:
    return sorted(name for name in names(text) if not exists(name))


def _layer_table(text: str) -> list[tuple[list[str], str]]:
    """The table of layers, top to bottom: (the layer's modules, the whole row)."""
    lines = text.splitlines()
    start = lines.index("| layer | what lives there |") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append((re.findall(r"`([^`]+)`", line.split(" | ")[0]), line))
    return rows


def _picture_layers(text: str) -> list[list[str]]:
    """The picture's left column, top to bottom: each line's modules, after the two heading lines."""
    lines = _picture(text).splitlines()[2:]
    return [re.split(r"\s{2,}", line.strip())[0].split(", ") for line in lines if line.strip()]


def _top(module: str) -> str:
    """The layer-level name of a module: ``labeldp.boundary.release`` -> ``boundary``."""
    return module.split(".")[1] if "." in module else module


def test_the_page_is_a_map_on_one_screen() -> None:
    text = _page()
    assert len(text.split()) <= MAX_WORDS, f"{PAGE.name}: {len(text.split())} words, at most {MAX_WORDS}"
    long = [row for _, row in _layer_table(text) if len(row.split()) > MAX_ROW_WORDS]
    assert long == [], f"a row of the table of layers is a line, at most {MAX_ROW_WORDS} words"


def test_every_name_on_the_page_exists() -> None:
    assert missing(_page()) == []


@pytest.mark.parametrize(
    "planted",
    [
        "`boundary/relase.py`",
        "`PrivateLabelz`",
        "`labeldp.accounting.PrivacyLedgr`",
        "`release_randomised_response`",
        "`RunContext.spent`",
        "`labeldp privatise`",
        "`methods/`, `methodz/`",
        "`release_nothing_*`",
        "prose naming boundary/nowhere.py and labeldp.boundary.Nowhere",
    ],
)
def test_a_name_that_does_not_exist_is_found(planted: str) -> None:
    text = _page()
    before = missing(text)
    planted_text = text.replace("## Principles", f"{planted}\n\n## Principles", 1)
    assert len(missing(planted_text)) > len(before)


def test_real_names_of_every_kind_are_found_and_exist() -> None:
    cited = (
        "`boundary/release.py`, `boundary/`, `release.py`, `tests/test_plugins.py`, `PrivateLabels`, "
        "`labeldp.accounting.PrivacyLedger`, `release_randomized_response`, `release_*`, `RunContext.spend`, "
        "`MethodContext.train`, `LabeledDataset.y_train`, `labeldp.PrivateLabels`, `config.run_config`, "
        "`labeldp tune`, `register_method(Method(...))`, `summary.json`, `--recipes FILE`"
    )
    assert names(cited) >= {"boundary/release.py", "PrivateLabels", "RunContext.spend", "labeldp tune"}
    assert "summary.json" not in names(cited) and missing(cited) == []


def test_the_picture_and_the_table_show_the_layers_of_the_imports() -> None:
    """The picture's left column and the table's rows list the same layers in the same order, every
    top-level module of the package in one of them, and every import points down them, but for one
    kind: a look-up into a module above whose imports are of the bottom layer, or declarations that import only
    it (a registry of names, as ``config.run_config`` reads them)."""
    text = _page()
    table = [modules for modules, _ in _layer_table(text)]
    assert _picture_layers(text) == table
    level = {module: len(table) - row for row, modules in enumerate(table) for module in modules}
    everything = [module for modules in table for module in modules]
    assert sorted(everything) == sorted({_top(module) for module in MODULES}), "each module in one layer"
    bottom = set(table[-1])

    def of_bottom(module: str) -> bool:
        return all(_top(name) in bottom for name in _imports(module, MODULES[module]))

    def reaches_only_bottom(module: str) -> bool:  # itself, or through declarations that import the bottom alone
        return all(_top(name) in bottom or of_bottom(name) for name in _imports(module, MODULES[module]))

    upward = []
    for module, path in MODULES.items():
        for imported in _imports(module, path):
            if level[_top(imported)] > level[_top(module)] and not reaches_only_bottom(imported):
                upward.append(f"{module} -> {imported}")
    assert upward == [], "imports that point up the layers"
