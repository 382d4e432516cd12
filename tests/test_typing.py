"""The public API as a type checker and an IDE see it: the names that the packages import on first use
(:mod:`labeldp._lazy`) resolve to their definitions, not to ``Any``, and the package says it ships its
annotations (``py.typed``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "labeldp"

#: public names (from the package and its subpackages) and what mypy should see: a class (its constructor
#: returns it) or a function
CLASSES = {
    "LabelDPClassifier": "labeldp.estimators.classifier.LabelDPClassifier",
    "PrivateLabels": "labeldp.boundary.labels.PrivateLabels",
    "RunConfig": "labeldp.config.run_config.RunConfig",
    "Recipe": "labeldp.recipes.training.Recipe",
}
FUNCTIONS = ("privatize", "epsilon_lower_bound", "temper", "train_run")
SNIPPET = "\n".join(
    [
        "from labeldp import LabelDPClassifier, PrivateLabels, privatize",
        "from labeldp.audit import epsilon_lower_bound",
        "from labeldp.config import RunConfig",
        "from labeldp.priors import temper",
        "from labeldp.recipes import Recipe",
        "from labeldp.runs import train_run",
        *(f"reveal_type({name})" for name in [*CLASSES, *FUNCTIONS]),
        'LabelDPClassifier(epsilon="2")  # an error',
    ]
)

#: mypy reads labeldp's annotations; the big libraries under it are skipped (their names are Any), which
#: keeps a first run to seconds: this test is about labeldp's names, not theirs
CONFIG = """\
[mypy]
mypy_path = {src}
ignore_missing_imports = True
follow_imports = silent
[mypy-torch.*,torchvision.*,sklearn.*,scipy.*,pandas.*,pyarrow.*,dp_accounting.*,matplotlib.*,dask.*]
follow_imports = skip
"""


def test_public_names_resolve_to_their_definitions(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    """``from labeldp import LabelDPClassifier`` is the class to mypy, with its signature: a wrong
    argument is an error before anything runs. mypy runs in its own process (it holds a few hundred MB
    while it checks), with its cache kept between runs in pytest's."""
    pytest.importorskip("mypy")
    (tmp_path / "snippet.py").write_text(SNIPPET)
    (tmp_path / "mypy.ini").write_text(CONFIG.format(src=ROOT / "src"))
    cache = pytestconfig.cache.mkdir("mypy") if pytestconfig.cache is not None else tmp_path / "cache"
    command = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(cache), "snippet.py"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    source = SNIPPET.splitlines()
    revealed: dict[str, str] = {}
    errors = []
    for line in result.stdout.splitlines():
        where, _, message = line.partition(": ")
        if not where.startswith("snippet.py:"):
            continue
        code = source[int(where.split(":")[1]) - 1]
        if message.startswith("note: Revealed type is "):
            revealed[code.removeprefix("reveal_type(").removesuffix(")")] = message.split(" is ", 1)[1].strip('"')
        elif message.startswith("error: "):
            errors.append((code, message))
    assert set(revealed) == {*CLASSES, *FUNCTIONS}, result.stdout + result.stderr
    for name, cls in CLASSES.items():
        assert revealed[name].startswith("def (") and revealed[name].endswith(f"-> {cls}"), revealed[name]
    for name in FUNCTIONS:
        assert revealed[name].startswith(("def (", "Overload(")), revealed[name]
    assert len(errors) == 1 and errors[0][0].endswith("# an error"), errors
    assert 'Argument "epsilon" to "LabelDPClassifier" has incompatible type "str"' in errors[0][1]


def _lazy_exports(tree: ast.Module) -> dict[str, str] | None:
    """The ``name -> module`` map of a package whose names are imported on first use, or None."""
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "lazy_exports":
            return ast.literal_eval(node.value.args[1])
        if [getattr(target, "id", None) for target in node.targets] == ["_EXPORTS"]:
            return ast.literal_eval(node.value)
    return None


def _type_checking_imports(tree: ast.Module) -> set[tuple[str, str]]:
    """The ``(name, module)`` pairs imported as ``from module import name as name`` under ``if TYPE_CHECKING:``."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    found.update((a.name, statement.module) for a in statement.names if a.asname == a.name)
    return found


def test_every_name_imported_on_first_use_is_imported_for_type_checkers() -> None:
    """Each package ``__init__`` that loads its names on first use also imports each of them, from the
    same module, under ``if TYPE_CHECKING:`` (as ``name as name``: re-exported for any checker): a name
    added to one list and not the other fails here."""
    checked = []
    for path in sorted(PACKAGE.rglob("__init__.py")):
        tree = ast.parse(path.read_text())
        exports = _lazy_exports(tree)
        if exports is None:
            continue
        checked.append(path)
        assert _type_checking_imports(tree) == set(exports.items()), path.relative_to(ROOT)
    assert PACKAGE / "__init__.py" in checked and len(checked) > 5


def test_the_package_ships_its_annotations() -> None:
    tomllib = pytest.importorskip("tomllib")
    assert (PACKAGE / "py.typed").is_file()
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "py.typed" in setuptools["package-data"]["labeldp"]
