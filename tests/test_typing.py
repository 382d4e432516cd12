"""The package as a type checker and an IDE see it: mypy finds no error in it (``make test`` runs it here,
beside the other tests), the names that the packages import on first use (:mod:`labeldp._lazy`) resolve
to their definitions, not to ``Any``, and the package says it ships its annotations (``py.typed``)."""

from __future__ import annotations

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


def test_the_package_checks_and_its_public_names_resolve_to_their_definitions(tmp_path: Path) -> None:
    """mypy (the project's settings and cache) finds no error in ``src/labeldp``; in a user's snippet
    ``from labeldp import LabelDPClassifier`` is the class, with its signature: a wrong argument is an
    error before anything runs."""
    pytest.importorskip("mypy")
    (tmp_path / "snippet.py").write_text(SNIPPET)
    command = [sys.executable, "-m", "mypy", "src/labeldp", str(tmp_path / "snippet.py")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    source = SNIPPET.splitlines()
    revealed: dict[str, str] = {}
    errors = []
    for line in result.stdout.splitlines():
        where, _, message = line.partition(": ")
        file, _, number = where.rpartition(":")
        if not file.endswith("snippet.py"):
            assert not message.startswith("error: "), line  # in the package
            continue
        code = source[int(number) - 1]
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


def test_every_name_imported_on_first_use_is_the_one_type_checkers_see() -> None:
    """Each package that loads its names on first use takes them from its ``if TYPE_CHECKING:`` imports:
    at run time each resolves to the object of the module the type checker was pointed to."""
    import importlib

    from labeldp._lazy import type_checking_imports

    checked = []
    for path in sorted(PACKAGE.rglob("__init__.py")):
        source = path.read_text()
        if "lazy_exports(__name__)" not in source:
            continue
        package = importlib.import_module(".".join(path.relative_to(PACKAGE.parent).parent.parts))
        exports = type_checking_imports(source)
        checked.append(path)
        assert exports and set(exports) <= set(package.__all__) and set(exports) <= set(dir(package))
        for name, module in exports.items():
            assert getattr(package, name) is getattr(importlib.import_module(module), name), (path, name)
    assert PACKAGE / "__init__.py" in checked and len(checked) > 5


def test_the_package_ships_its_annotations() -> None:
    tomllib = pytest.importorskip("tomllib")
    assert (PACKAGE / "py.typed").is_file()
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "py.typed" in setuptools["package-data"]["labeldp"]
