"""The package as installed: every library it imports is installed with it, and its version is stated once."""

import pytest


def _requirement_name(requirement: str) -> str:
    import re

    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_every_library_the_package_imports_is_installed_with_it() -> None:
    """Each third-party module imported under src/labeldp comes from a distribution that pyproject.toml
    depends on, or one of theirs (joblib through scikit-learn): a module found only because a test
    extra or a neighbour installed it breaks a plain `pip install labeldp` (PyYAML for --grid-file). An
    engine's library (``labeldp[spark]``, ``labeldp[dask]``) is imported only inside the functions that run on it."""
    import ast
    import importlib.metadata as metadata
    import sys
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    declared = {_requirement_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    engines = {_requirement_name(r) for extra in ("spark", "dask") for r in extras[extra]}
    reachable, todo = set(), list(declared)
    while todo:
        name = todo.pop()
        if name in reachable:
            continue
        reachable.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_requirement_name(r) for r in requires if "extra ==" not in r]
    modules, at_import = set(), set()
    for path in (root / "src" / "labeldp").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = set()
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = {node.module.split(".")[0]}
            modules |= names
            if node in tree.body:
                at_import |= names
    providers = metadata.packages_distributions()
    third_party = sorted(m for m in modules if m != "labeldp" and m not in sys.stdlib_module_names and m in providers)
    missing = {
        m: providers[m] for m in third_party if not {d.lower().replace("_", "-") for d in providers[m]} & reachable
    }
    assert missing.keys() <= {m for m in missing if {d.lower() for d in providers[m]} & engines} - at_import, missing


def test_the_version_is_stated_once() -> None:
    """The installed package's version is labeldp._version's (pyproject.toml reads it), and the package's own."""
    import importlib.metadata

    import labeldp
    from labeldp._version import __version__

    assert importlib.metadata.version("labeldp") == __version__ == labeldp.__version__
