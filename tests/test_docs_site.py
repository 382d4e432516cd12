"""The documentation site, built: ``mkdocs build --strict`` (what ``make docs`` runs) into a temporary
folder, then the built pages read back. A Sphinx role of a docstring (``:func:`...```, ``:class:`...```)
must come out as a cross-reference or as code, never as the raw text a reader cannot follow
(docs/griffe_sphinx_roles.py rewrites them); a role that names a public labeldp object the API pages
have no entry for is named in a warning.

The build needs the ``docs`` extra, which the ``test`` extra includes (about 8 s more to install); where
it is missing, the test is skipped and says so. The build takes about 6 s.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the modules the build imports: MkDocs, its theme, mkdocstrings with its Python handler, griffe-sphinx
DOCS_MODULES = ["mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "griffe_sphinx"]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


_MISSING = [name for name in DOCS_MODULES if not _installed(name)]

pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"the docs extra is not installed (no {', '.join(_MISSING)}): pip install -e '.[docs]', or make docs",
)

#: the Sphinx roles the docstrings use; on a built page a raw one reads ``:func:`` before the name
RAW_ROLE = re.compile(r":(?:py:)?(func|mod|class|meth|attr|data|exc|obj|const):\s*`?\S")
#: a docstring role that named a labeldp object the pages have no entry for: autorefs leaves it unlinked
UNLINKED = re.compile(r'<span title="(labeldp\.[\w.]+)"><code>')


def _text(page_html: str) -> str:
    """What a reader sees of a page: its HTML without the tags, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page_html))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def _pages(site: Path) -> dict[str, str]:
    return {str(path.relative_to(site)): path.read_text(encoding="utf-8") for path in sorted(site.rglob("*.html"))}


def test_the_docstrings_sphinx_roles_are_links_or_code(site: Path) -> None:
    """No role is left as raw text. One that names a public labeldp object the API pages have no entry
    for is shown as code, and named in a warning (not a failure: docstrings change more often than the
    pages, and code is what such a role rendered as before)."""
    raw, unlinked = [], {}
    for page, page_html in _pages(site).items():
        text = _text(page_html)
        for match in RAW_ROLE.finditer(text):
            raw.append(f"{page}: :{match[1]}: in ...{text[max(0, match.start() - 40) : match.end() + 40]!r}...")
        for match in UNLINKED.finditer(page_html):
            if not any(part.startswith("_") for part in match[1].split(".")):
                unlinked.setdefault(match[1], set()).add(page)
    index = site / "search" / "search_index.json"
    if index.exists():
        raw += [f"search/search_index.json: :{match[1]}:" for match in RAW_ROLE.finditer(_text(index.read_text()))]
    if unlinked:
        warnings.warn(
            "docstrings point to names the API pages have no entry for (add a ::: block to docs/api/): "
            + "; ".join(f"{target} (from {', '.join(sorted(pages))})" for target, pages in sorted(unlinked.items())),
            stacklevel=1,
        )
    assert not raw, f"{len(raw)} Sphinx roles left as raw text:\n" + "\n".join(raw[:50])
