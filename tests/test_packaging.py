"""The package's dependencies: every library it imports is installed with it."""

import pytest


def _requirement_name(requirement: str) -> str:
    import re

    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_every_library_the_package_imports_is_installed_with_it() -> None:
    """Each third-party module imported under src/labeldp comes from a distribution that pyproject.toml
    depends on, or one of theirs (joblib through scikit-learn): a module found only because a test
    extra or a neighbour installed it breaks a plain `pip install labeldp` (PyYAML for --grid-file)."""
    import ast
    import importlib.metadata as metadata
    import sys
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parents[1]
    declared = {
        _requirement_name(r) for r in tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    }
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
    modules = set()
    for path in (root / "src" / "labeldp").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules.add(node.module.split(".")[0])
    providers = metadata.packages_distributions()
    third_party = sorted(m for m in modules if m != "labeldp" and m not in sys.stdlib_module_names and m in providers)
    missing = {
        m: providers[m] for m in third_party if not {d.lower().replace("_", "-") for d in providers[m]} & reachable
    }
    assert missing == {}
