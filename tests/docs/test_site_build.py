"""The documentation site builds with `mkdocs build --strict` (a broken link or anchor, a page missing from the
nav, a nav entry without its page all fail it), and the results pages show only plots docs/make_plots.py draws.

The build runs on a copy of the repository's mkdocs.yml and docs/, where the pages other branches still owe
(docs_helpers.PENDING_PAGES) are stubbed; `.ci/run` builds the real tree, stubs and all absent.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs_helpers import DOCS, PENDING_PAGES, load_script
from testutil import REPO

# matplotlib's first import in a fresh environment runs fc-list to build its font cache: done here, at import
with contextlib.suppress(ImportError):
    import matplotlib.pyplot  # noqa: F401

pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra: pip install -e '.[dev]'")
pytest.importorskip("material", reason="mkdocs-material is in the dev extra: pip install -e '.[dev]'")


def site_copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(DOCS, root / "docs")
    for page in PENDING_PAGES:
        stub = root / "docs" / page
        if not stub.exists():
            stub.write_text(f"# {page}\n\n(written in another branch)\n")
    return root


def build(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")],
                          cwd=root, capture_output=True, text=True, timeout=300, check=False,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(root)})


def test_the_site_builds_strictly(tmp_path):
    root = site_copy(tmp_path)
    proc = build(root)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (root / "site" / "get-started" / "index.html").is_file()
    assert (root / "site" / "reference" / "config" / "index.html").is_file()
    assert not list((root / "site").rglob("*.py"))  # the generator scripts are not published


def test_a_broken_link_fails_the_build(tmp_path):
    root = site_copy(tmp_path)
    page = root / "docs" / "guides" / "sweeps.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    proc = build(root)
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr


def test_pending_pages_are_still_pending():
    """A page listed as owed by another branch that has landed should leave the list (it then builds for real)."""
    landed = [p for p in PENDING_PAGES if (DOCS / p).exists() and "written in another branch" not in
              (DOCS / p).read_text()]
    nav = (REPO / "mkdocs.yml").read_text()
    assert all(p in nav for p in PENDING_PAGES)
    if landed:
        pytest.skip(f"landed, remove from docs_helpers.PENDING_PAGES: {landed}")


def test_results_pages_show_the_plots_make_plots_draws(tmp_path):
    made = {p.name for p in load_script("make_plots").make_all(tmp_path)}
    shown = {Path(m).name for page in (DOCS / "results").glob("*.md")
             for m in re.findall(r"!\[[^\]]*\]\((img/[^)]+)\)", page.read_text())}
    assert shown and shown <= made, shown - made
    assert all((DOCS / "results" / "img" / name).is_file() for name in made)  # committed
